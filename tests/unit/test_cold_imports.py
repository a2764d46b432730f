"""Cold start (issue 16): ``import agent_core`` loads no room, and a plain run reaches its first model
request without importing the optional rooms (MCP, the hooks file schema and runner, memory, serve,
telemetry, declarative tools, replay) nor what only some runs use: the Task DAG and the orchestrator, the
child-run machinery of the agent tools, the compact fork, the providers the run does not use. Their tools
are registered with static definitions. Checked in a fresh interpreter, at the moment the scripted model
server receives the first request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOMS = ("tasks", "orchestrator", "agents", "compact", "mcp", "hooks", "memory", "server", "telemetry")
OPTIONAL_AT_FIRST_REQUEST = (
    "agent_core._mcp",
    "agent_core._hooks.config",
    "agent_core._hooks.dispatcher",
    "agent_core._hooks.runner",
    "agent_core._hooks.matchers",
    "agent_core._memory",
    "agent_core.server",
    "agent_core.telemetry",
    "agent_core.tools._declarative",
    "agent_core._api.replay",
    "agent_core._api.maintenance",
    "agent_core.types._results",  # the maintenance/inspection API results (cancel, replay, cleanup, ...)
    "agent_core.types.workers",
    # only some runs: loaded on first use (static tool definitions are registered at open)
    "agent_core._tasks.dag",
    "agent_core._tasks.models",
    "agent_core._tasks.inputs",
    "agent_core._tasks.service",
    "agent_core._tasks.store",
    "agent_core._tasks.registry",
    "agent_core._tasks.wal",
    "agent_core._tasks.tools",
    "agent_core._orchestrator.orchestration",
    "agent_core._orchestrator.dispatch",
    "agent_core._orchestrator.pools",
    "agent_core._orchestrator.tools",
    "agent_core._agents.children",
    "agent_core._agents.tools",
    "agent_core._agents.results",
    "agent_core._compact.fork",
    "agent_core._compact.inputs",
    "agent_core._compact.payload",
    "agent_core.providers._anthropic",
    "agent_core.providers._ollama",
    # the built-in tools' implementations and the skill tool: static definitions, loaded on first call
    "agent_core.tools._builtin",
    "agent_core._skills.tool",
)
THIRD_PARTY_NOT_AT_FIRST_REQUEST = ("yaml",)
"""PyYAML: only parsed frontmatter needs it (the packaged agent definitions are parsed on first lookup)."""
STATIC_TOOLS = (
    "agent.task_create",
    "agent.dispatch_worker",
    "agent.create_sub_agent",
    "code.read_file",
    "code.run_command",
    "internal.load_skill",
)

SCRIPT = r"""
import asyncio, json, sys
import agent_core
after_import = sorted(m for m in sys.modules if m.startswith("agent_core."))
from agent_core.testing import OpenAIWire, ScriptedOpenAIServer, stream
seen = {}
def answer(request):
    seen.setdefault("modules", sorted(m for m in sys.modules if m.startswith("agent_core.")))
    seen.setdefault("third_party", sorted(m for m in THIRD_PARTY if m in sys.modules))
    return stream(OpenAIWire.text_stream("hi"))
server = ScriptedOpenAIServer(strict=False)
server.handler(answer)
server.start()
home = sys.argv[1]
with open(home + "/config.toml", "w") as fh:
    fh.write(f'''[model]
provider = "openai"
base_url = "{server.base_url}"
api_key_env = "SOONG_COLD_KEY"
name = "m"
context_window = 100000
[model.retry]
max_attempts = 1
[compact]
enabled = false
[memory]
enabled = false
''')
async def main():
    from agent_core import AgentRuntime
    async with AgentRuntime(project_dir=sys.argv[2]) as rt:
        run = await rt.start("hello")
        async for _ in run.events():
            pass
        assert rt._manager is not None
        return run.status.value, sorted(d.name for d in rt._manager.services.tools.definitions())
status, tools = asyncio.run(main())
server.stop()
print(json.dumps({"after_import": after_import, "first_request": seen.get("modules"), "status": status, "tools": tools,
                  "third_party": seen.get("third_party")}))
"""


def test_import_and_first_request_skip_the_optional_rooms(tmp_path: Path) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "SOONG_AGENT_HOME": str(home),
        "SOONG_COLD_KEY": "sk-cold-start-test",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"THIRD_PARTY = {THIRD_PARTY_NOT_AT_FIRST_REQUEST!r}\n{SCRIPT}",
            str(home),
            str(project),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "completed"
    rooms = [m for m in report["after_import"] if m.split(".")[1] in ROOMS]
    assert rooms == [], f"import agent_core loaded {rooms}"
    first = report["first_request"]
    assert first, "the scripted server saw no model request"
    assert "agent_core._runtime.runs" in first  # the snapshot is of a real run
    optional = [m for m in first if any(m == o or m.startswith(o + ".") for o in OPTIONAL_AT_FIRST_REQUEST)]
    assert optional == [], f"the first model request needed {optional}"
    assert report["third_party"] == [], report["third_party"]
    offered = report["tools"]
    assert set(STATIC_TOOLS) <= set(offered), offered  # registered, though their rooms were not imported


def test_import_agent_core_and_its_name_list_load_neither_pydantic_nor_ast() -> None:
    """The export map is a literal: listing the SDK names parses nothing and imports no module of ours."""
    code = (
        "import sys, json\n"
        "import agent_core\n"
        "names = agent_core.__all__ + dir(agent_core)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m in ('ast', 'pydantic') or m.startswith('agent_core.'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == []
