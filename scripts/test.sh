#!/usr/bin/env bash
# Set up (the test profile: every extra) and run the test suite: ruff over the source trees,
# the core suite, then each domain distribution's own tests (each in its own pytest
# process, since each carries its own conftest).
# Extra arguments go to every pytest run (e.g. -m slow, -x).
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test || exit 1
bash scripts/services.sh || exit 1
export PATH="$PWD/.venv/bin:$PATH"
export EVO_TEST_PG_URL=${EVO_TEST_PG_URL:-postgresql://postgres@127.0.0.1:5432/test}
suites=(tests)
for d in domains/*/tests examples/*/tests; do [ -d "$d" ] && suites+=("$d"); done
status=0
echo "== ruff check"
.venv/bin/ruff check evo_core events plugins domains examples benchmarks tests scripts || status=1
for s in "${suites[@]}"; do
  echo "== pytest $s"
  .venv/bin/python -m pytest -q "$s" "$@"
  rc=$?
  # pytest exits 5 when a selection holds no test; that is not a failure of the suite.
  if [ $rc -ne 0 ] && [ $rc -ne 5 ]; then status=1; fi
done
exit $status
