"""The temporal engine behaves as the local engine where a run's worker is not the starting runtime
(docs/scale-out.md): SessionStart hooks fire for a runtime's first run of a session, also of a session it
loaded, and a failing permission callback of the starting runtime gives the local engine's events.
"""

from __future__ import annotations

import asyncio
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentRuntime, RunStatus, ToolDefinition
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from tests.engine.test_temporal_engine import _env, engine_config, stored, worker
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import open_runtime
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

HOOK = Path(__file__).resolve().parents[1] / "fixtures" / "hook_script.py"


def hook_rules(env: SoongEnv, log: Path) -> None:
    command = " ".join(shlex.quote(a) for a in (sys.executable, str(HOOK), "--log", str(log)))
    rules = {"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]}
    env.write_home("hooks.json", json.dumps({"version": 1, "hooks": rules}))


def session_starts(log: Path) -> list[str]:
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return [e["input"]["source"] for e in lines if e["input"]["hook_event"] == "SessionStart"]


def no_tools(rt: AgentRuntime) -> None:
    del rt


async def three_runs(env: SoongEnv, *, temporal: bool) -> tuple[str, list[str]]:
    """Two runs of a new session in one runtime, then one in a runtime that loads the session."""
    log = env.home / "hooks.log"
    first = FakeProvider() if temporal else FakeProvider(text("one"), text("two"))
    async with open_runtime(env, first, write_config=False) as rt:
        run = await rt.start("first")
        assert await asyncio.wait_for(run.wait(), 60) == RunStatus.completed, run.error
        again = await rt.start("second", session_id=run.session_id)
        assert await asyncio.wait_for(again.wait(), 60) == RunStatus.completed, again.error
    later = FakeProvider() if temporal else FakeProvider(text("three"))
    async with open_runtime(env, later, write_config=False) as rt:
        third = await rt.start("third", session_id=run.session_id)
        assert await asyncio.wait_for(third.wait(), 60) == RunStatus.completed, third.error
    return run.session_id, session_starts(log)


async def test_session_start_hooks_fire_for_each_runtime_s_first_run_as_locally(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    local_env.write_config()
    hook_rules(local_env, local_env.home / "hooks.log")
    local_session, local_starts = await three_runs(local_env, temporal=False)
    assert local_starts == ["new", "resume"]

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    hook_rules(env, env.home / "hooks.log")
    async with worker(env, FakeProvider(text("one"), text("two"), text("three")), no_tools):
        session, starts = await three_runs(env, temporal=True)
    assert starts == local_starts
    assert stored(env, session)[0] == stored(local_env, local_session)[0]


def write_tool(rt: AgentRuntime) -> None:
    async def write(args: dict[str, Any], ctx: Any) -> str:
        return "written"

    definition = ToolDefinition(
        name="probe.write",
        description="Writes.",
        input_schema={"type": "object", "properties": {}},
        permission="write",
    )
    rt.register_tool(definition, write)


def write_script() -> FakeProvider:
    return FakeProvider(tool_calls(("probe.write", {}, "call_w")), text("done"))


def without_request_ids(value: Any) -> Any:
    """``value`` without its permission request ids (each request has a fresh one)."""
    if isinstance(value, dict):
        return {k: without_request_ids(v) for k, v in value.items() if k != "request_id"}
    if isinstance(value, list | tuple):
        return [without_request_ids(v) for v in value]
    return value


async def failing_callback(request: PermissionRequest) -> PermissionDecision:
    raise RuntimeError("the permission UI crashed")


async def slow_callback(request: PermissionRequest) -> PermissionDecision:
    await asyncio.sleep(30)
    return PermissionDecision(decision="allow_once")


@pytest.mark.parametrize(
    ("callback", "failure"), [(failing_callback, "exception"), (slow_callback, "timeout")]
)
async def test_a_failing_permission_callback_gives_the_local_engine_s_events(
    tmp_path: Any,
    temporal_server: TemporalServer,
    monkeypatch: pytest.MonkeyPatch,
    callback: Any,
    failure: str,
) -> None:
    async def run_once(env: SoongEnv, fake: FakeProvider) -> tuple[str, Any]:
        async with open_runtime(env, fake, write_config=False, permission_callback=callback) as rt:
            write_tool(rt)
            # the callback timeout (300 s by default) of the runtime asking the callback
            (await rt._open()).services.gate._timeout_s = 0.5
            run = await rt.start("write")
            assert await asyncio.wait_for(run.wait(), 60) == RunStatus.completed, run.error
            return run.session_id, (await rt.replay_run(run.run_id)).events

    local_env = _env(tmp_path / "local", monkeypatch)
    local_env.write_config()
    local_session, local_events = await run_once(local_env, write_script())
    local_stored = stored(local_env, local_session)
    assert "permission_failed" in local_stored[0]

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    async with worker(env, write_script(), write_tool):
        session, events = await run_once(env, FakeProvider())
    assert without_request_ids(stored(env, session)) == without_request_ids(local_stored)
    payload = next(e.data for e in events if e.event_type.value == "permission_failed")
    local_payload = next(e.data for e in local_events if e.event_type.value == "permission_failed")
    assert payload["error"] == local_payload["error"] and payload["tool_name"] == local_payload["tool_name"]
    assert payload["error"]["details"] == {"permission_failure": failure}


async def test_without_a_permission_callback_a_call_is_denied_as_by_the_local_engine(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The starting runtime has no callback: the worker's gate denies with the policy's reason and code
    (not a generic "no permission callback" denial)."""

    async def run_once(env: SoongEnv, fake: FakeProvider) -> tuple[str, Any]:
        async with open_runtime(env, fake, write_config=False) as rt:
            write_tool(rt)
            run = await rt.start("write")
            assert await asyncio.wait_for(run.wait(), 60) == RunStatus.completed, run.error
            return run.session_id, (await rt.replay_run(run.run_id)).events

    local_env = _env(tmp_path / "local", monkeypatch)
    local_env.write_config()
    local_session, local_events = await run_once(local_env, write_script())
    local_stored = stored(local_env, local_session)

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    async with worker(env, write_script(), write_tool):
        session, events = await run_once(env, FakeProvider())
    assert without_request_ids(stored(env, session)) == without_request_ids(local_stored)
    denied = [e.data for e in events if e.event_type.value == "tool_denied"]
    local_denied = [e.data for e in local_events if e.event_type.value == "tool_denied"]
    assert len(denied) == 1 and without_request_ids(denied) == without_request_ids(local_denied)
    assert "requires permission" in json.dumps(denied[0]), denied
