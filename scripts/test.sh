#!/usr/bin/env bash
# Installs what the tests need into ./.venv and runs the default test suite.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m slow`, `scripts/test.sh -m real_model`).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
set +e
.venv/bin/python -m pytest "$@"
status=$?
set -e
# pytest exit code 5 means "no tests collected": that is a failure of the suite, not a pass.
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$status"
