#!/usr/bin/env bash
# Set up and run the test suite. Extra arguments go to pytest (e.g. -m slow).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/services.sh
export PATH="$PWD/.venv/bin:$PATH"
export EVO_TEST_PG_URL=${EVO_TEST_PG_URL:-postgresql://postgres@127.0.0.1:5432/test}
set +e
.venv/bin/python -m pytest -q "$@"
rc=$?
set -e
# pytest exits 5 when a selection holds no test; that is not a failure of the suite.
[ $rc -eq 5 ] && exit 0
exit $rc
