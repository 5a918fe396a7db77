#!/usr/bin/env bash
# Make sure the services the tests need are up: PostgreSQL (for the multi-writer store
# tests) and a headless Chromium (for the report's browser test).
set -uo pipefail
pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null || psql "postgresql://postgres@127.0.0.1:5432/test" -c 'select 1' >/dev/null 2>&1; }
if ! pg_up; then
  (service postgresql start || pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | tail -1)" main start) >/dev/null 2>&1 || true
  for _ in $(seq 1 20); do pg_up && break; sleep 0.5; done
fi
if ! pg_up; then
  if [ "${CI:-}" = "true" ]; then
    echo "services: PostgreSQL is not reachable at 127.0.0.1:5432 although CI expects it" >&2
    exit 1
  fi
  echo "services: PostgreSQL not reachable; its tests will be skipped (set CI=true to make that an error)" >&2
fi
# Debian packages the tests use: chromium (report browser test), bubblewrap (sandbox backend).
need=()
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || need+=(chromium)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null) >/dev/null 2>&1 \
    || echo "services: could not install ${need[*]}; the tests that need them will say so" >&2
fi
exit 0
