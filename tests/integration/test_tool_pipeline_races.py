"""Which tool-pipeline stages race the run's cancel event in a task of their own (issue 16).

Only stages that can wait do: a pre-flight without ``preflight_now``, configured PreToolUse/PostToolUse
hooks and a permission callback. Hooks that are not configured are not called; the gate's policy / rule /
session-grant decision and a code tool's pre-flight run inline. Cancellation while a stage waits is
covered in ``test_tool_pipeline_scheduling.py`` (permission callback, pre hook) and
``test_tool_pipeline_code_tools.py`` (handlers).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agent_core._hooks import HooksDispatcher, load_hooks
from agent_core._hooks.base import NO_HOOKS, may_run
from agent_core._hooks.config import HOOKS_FILENAME
from agent_core.config.loader import load_config
from agent_core.permissions._gate import GateOutcome, PendingAsk
from agent_core.tools._builtin import CODE_TOOL_NAMES, CodeToolsAdapter
from agent_core.tools._lazy import LazyToolAdapter
from agent_core.tools.registry import ToolRegistry
from agent_core.types.enums import HookPhase
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_pipeline import (
    FakeHooks,
    PermissionRecorder,
    make_executor,
    make_settings,
    tool_call,
)
from tests.fixtures.tool_sink import RecordingSink, make_scope


@contextmanager
def task_names() -> Iterator[list[str]]:
    """The qualified names of the coroutines every task created meanwhile runs."""
    loop = asyncio.get_running_loop()
    names: list[str] = []

    def factory(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any) -> Any:
        names.append(getattr(coro, "__qualname__", type(coro).__name__))
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(factory)
    try:
        yield names
    finally:
        loop.set_task_factory(None)


def code_tools(project: Path, callback: Any = None, hooks: Any = None, lazy: bool = False) -> Any:
    cfg = make_settings()
    reg = ToolRegistry()
    adapter = CodeToolsAdapter(cfg)
    if lazy:  # as the runtime registers them
        reg.register_adapter(LazyToolAdapter(adapter.definitions(), lambda: adapter), internal=True)
    else:
        reg.register_adapter(adapter, internal=True)
    executor, gate = make_executor(reg, cfg, callback=callback, hooks=hooks)
    scope = make_scope(project, project.parent / "home", effective_tools=frozenset(CODE_TOOL_NAMES))
    return executor, gate, scope


@pytest.mark.parametrize("lazy", [False, True])
async def test_a_call_nothing_waits_for_creates_no_stage_task(tmp_path: Path, lazy: bool) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "a.txt").write_text("alpha\n")
    executor, _, scope = code_tools(project, PermissionRecorder.never(), lazy=lazy)
    sink = RecordingSink(tmp_path / "artifacts")
    with task_names() as names:
        outcome = await executor.execute_turn([tool_call("code.read_file", path="a.txt")], scope, sink)
    assert not outcome.results[0].is_error
    stages = {
        "CodeToolsAdapter.preflight",
        "LazyToolAdapter.preflight",
        "adapter_preflight",
        "NoHooks.pre_tool_use",
        "NoHooks.post_tool_use",
        "PermissionGate.check",
        "PermissionGate.ask",
    }
    assert any(n.endswith("Adapter.execute") for n in names) and not stages & set(names), names


async def test_a_permission_prompt_and_configured_hooks_still_race(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recorder = PermissionRecorder.always("allow_once")
    hooks = FakeHooks()
    executor, _, scope = code_tools(project, recorder, hooks)
    sink = RecordingSink(tmp_path / "artifacts")
    with task_names() as names:
        outcome = await executor.execute_turn(
            [tool_call("code.write_file", path="b.txt", content="b")], scope, sink
        )
    assert not outcome.results[0].is_error and len(recorder.requests) == 1
    assert "PermissionGate.ask" in names
    assert "FakeHooks.pre_tool_use" in names and "FakeHooks.post_tool_use" in names
    assert hooks.pre_calls and hooks.post_calls


async def test_gate_decide_then_ask_is_check(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    recorder = PermissionRecorder(["allow_for_session"])
    executor, gate, scope = code_tools(project, recorder)
    tool = executor._registry.get("code.write_file").definition
    from agent_core.tools.preflight import Preflight

    facts = Preflight(target_scope=str(project / "b.txt"))
    read = executor._registry.get("code.read_file").definition
    assert isinstance(gate.decide(tool=read, arguments={}, requester=scope, facts=facts), GateOutcome)
    pending = gate.decide(tool=tool, arguments={"path": "b.txt"}, requester=scope, facts=facts)
    assert isinstance(pending, PendingAsk)
    asked = await gate.ask(pending, tool_call_id="c1")
    assert asked.allowed and asked.asked and asked.request is not None
    assert asked.request.metadata["tool_call_id"] == "c1"
    again = gate.decide(tool=tool, arguments={"path": "b.txt"}, requester=scope, facts=facts)
    assert isinstance(again, GateOutcome) and again.cached and again.decided_by == "session_grant"
    checked = await gate.check(tool=tool, arguments={"path": "b.txt"}, requester=scope, facts=facts)
    assert checked == again and len(recorder.requests) == 1


def test_may_run_tells_configured_phases(soong_env: SoongEnv) -> None:
    assert not may_run(NO_HOOKS, HookPhase.PreToolUse)
    assert may_run(FakeHooks(), HookPhase.PreToolUse)  # no handles(): assume it may
    hooks = {"PostToolUse": [{"hooks": [{"type": "command", "command": "true"}]}]}
    soong_env.write_home(HOOKS_FILENAME, json.dumps({"version": 1, "hooks": hooks}))
    soong_env.write_config()
    dispatcher = load_hooks(load_config(home_dir=soong_env.home, project_dir=soong_env.project))
    assert isinstance(dispatcher, HooksDispatcher)
    assert may_run(dispatcher, HookPhase.PostToolUse) and not may_run(dispatcher, HookPhase.PreToolUse)
