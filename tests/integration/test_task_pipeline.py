"""Task tools through the real registry, effective tool sets and ToolExecutor pipeline
(cases K46, K49; docs/task-board.md, docs/testing.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core._tasks import TaskToolAdapter
from agent_core._tasks.models import PAYLOAD_MODELS
from agent_core.tools._effective import compute_effective_tools
from agent_core.tools.context import RunScope
from agent_core.tools.registry import ToolRegistry
from agent_core.types.enums import DEBUG_ONLY_EVENTS, AgentRole, EventType
from agent_core.types.tools import ToolResult
from tests.fixtures.task_harness import ManualClock, TaskHarness, step
from tests.fixtures.tool_pipeline import PermissionRecorder, make_executor, make_settings, tool_call


class Pipeline:
    def __init__(self, h: TaskHarness, callback: Any) -> None:
        self.h = h
        self.registry = ToolRegistry()
        self.registry.register_adapter(TaskToolAdapter(h), internal=True)
        self.settings = make_settings(permissions={"write_without_callback": "deny"})
        self.executor, _ = make_executor(self.registry, self.settings, callback=callback)

    def scope(self, role: AgentRole, base: RunScope | None = None) -> RunScope:
        scope = base or self.h.scope(role)
        scope.effective_tools = compute_effective_tools(
            self.registry.definitions(), self.settings, role
        ).names
        return scope

    async def run(self, scope: RunScope, name: str, **args: Any) -> ToolResult:
        outcome = await self.executor.execute_turn([tool_call(name, **args)], scope, self.h.sink_for(scope))
        (result,) = outcome.results
        return result


@pytest.fixture
def h(tmp_path: Path) -> TaskHarness:
    return TaskHarness(project=tmp_path.resolve(), session_id="sess_pipe", clock=ManualClock())


async def test_task_tools_never_ask_for_permission(h: TaskHarness) -> None:
    """Case K46."""
    recorder = PermissionRecorder.never()
    p = Pipeline(h, recorder)
    orch = p.scope(AgentRole.orchestrator, h.orchestrator())
    created = await p.run(
        orch,
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a"), step("b", "a")],
    )
    assert not created.is_error, created.error
    worker = p.scope(AgentRole.worker, h.worker("t1"))
    assert {
        "agent.task_get",
        "agent.task_query_steps",
        "agent.task_claim_step",
        "agent.task_update_step",
    } <= worker.effective_tools
    claimed = await p.run(worker, "agent.task_claim_step", task_id="t1", step_id="a")
    assert not claimed.is_error, claimed.error
    done = await p.run(worker, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    assert not done.is_error
    assert recorder.requests == []
    # a71 / k47 (event part): every Task event and the Task tool events are debug-only.
    events = h.sink_for(orch).events + h.sink_for(worker).events
    task_events = [e for e in events if e.event_type.value.startswith("task_")]
    assert task_events and all(e.event_type in DEBUG_ONLY_EVENTS for e in task_events)
    started = [e for e in h.sink_for(orch).events if e.event_type == EventType.tool_started]
    assert started and started[0].payload.get("internal") is True


async def test_availability_by_role(h: TaskHarness) -> None:
    """Case K49."""
    p = Pipeline(h, PermissionRecorder.never())
    orch = p.scope(AgentRole.orchestrator, h.orchestrator())
    await p.run(
        orch, "agent.task_create", task_id="t1", wal_name="work", title="T", summary="S", steps=[step("a")]
    )
    for role in (AgentRole.main, AgentRole.sub, AgentRole.fork):
        scope = p.scope(role)
        for name in ("agent.task_get", "agent.task_create", "agent.task_claim_step", "agent.task_template"):
            result = await p.run(scope, name, task_id="t1")
            assert result.is_error and result.error is not None
            assert result.error.code == "tool_not_available", (role, name)
    result = await p.run(orch, "agent.task_claim_step", task_id="t1", step_id="a")
    assert result.error is not None and result.error.code == "tool_not_available"
    worker = p.scope(AgentRole.worker, h.worker("t1"))
    for name in ("agent.task_template", "agent.task_list"):
        result = await p.run(worker, name)
        assert result.error is not None and result.error.code == "tool_not_available", name
    for name in (
        "agent.task_update",
        "agent.task_create",
        "agent.task_complete",
        "agent.task_fail",
        "agent.task_cancel",
    ):
        result = await p.run(worker, name, task_id="t1")
        assert result.error is not None and result.error.code == "permission_denied", name
    assert h.types() == ["task_created", "task_step_ready", "task_running"]
    assert "agent.task_archive" not in p.registry.names() and "agent.task_delete" not in p.registry.names()


async def test_claim_conflict_is_an_error_result(h: TaskHarness) -> None:
    p = Pipeline(h, PermissionRecorder.never())
    orch = p.scope(AgentRole.orchestrator, h.orchestrator())
    await p.run(
        orch, "agent.task_create", task_id="t1", wal_name="work", title="T", summary="S", steps=[step("a")]
    )
    w1 = p.scope(AgentRole.worker, h.worker("t1", name="w1"))
    w2 = p.scope(AgentRole.worker, h.worker("t1", name="w2"))
    assert not (await p.run(w1, "agent.task_claim_step", task_id="t1", step_id="a")).is_error
    lost = await p.run(w2, "agent.task_claim_step", task_id="t1", step_id="a")
    assert lost.is_error and lost.error is not None and lost.error.code == "step_already_claimed"
    bad = await p.run(
        orch, "agent.task_update", task_id="t1", operations=[{"op": "delete_step", "step_id": "zz"}]
    )
    assert bad.error is not None and bad.error.code == "step_not_found" and bad.error.details["op_index"] == 0


async def test_every_transition_writes_exact_payload_keys(h: TaskHarness) -> None:
    """Drives Tasks through all 17 WAL record types and checks payload keys and fixed values."""
    orch = h.orchestrator()
    await h.ok(
        orch,
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a"), step("b", "a"), step("c"), step("d"), step("opt", required=False)],
    )
    w = h.worker("t1", name="wa")
    await h.ok(w, "agent.task_claim_step", task_id="t1", step_id="a")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", status="running")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", result_summary="half")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    wc = h.worker("t1", name="wc")
    await h.ok(wc, "agent.task_claim_step", task_id="t1", step_id="c")
    await h.ok(wc, "agent.task_update_step", task_id="t1", step_id="c", status="blocked", reason="r")
    await h.ok(orch, "agent.task_update", task_id="t1", operations=[{"op": "reopen_step", "step_id": "c"}])
    wc2 = h.worker("t1", name="wc2")
    await h.ok(wc2, "agent.task_claim_step", task_id="t1", step_id="c")
    await h.service.on_worker_run_end(wc2.run_id, agent_id=wc2.agent_id, task_id="t1", ending="timeout")
    await h.ok(
        orch,
        "agent.task_update",
        task_id="t1",
        operations=[{"op": "reopen_step", "step_id": "c"}, {"op": "update_task", "status": "blocked"}],
    )
    await h.ok(
        orch, "agent.task_update", task_id="t1", operations=[{"op": "update_task", "status": "pending"}]
    )
    wd = h.worker("t1", name="wd")
    await h.ok(wd, "agent.task_claim_step", task_id="t1", step_id="d")
    h.clock.advance(h.lease_ms + 1)
    await h.ok(orch, "agent.task_get", task_id="t1")
    for step_id in ("b", "c", "d"):
        wx = h.worker("t1", name=f"x{step_id}")
        await h.ok(wx, "agent.task_claim_step", task_id="t1", step_id=step_id)
        await h.ok(wx, "agent.task_update_step", task_id="t1", step_id=step_id, status="completed")
    await h.ok(orch, "agent.task_complete", task_id="t1", result_summary="ok")
    await h.ok(
        orch, "agent.task_create", task_id="t2", wal_name="two", title="T", summary="S", steps=[step("a")]
    )
    await h.ok(orch, "agent.task_fail", task_id="t2")
    await h.ok(
        orch, "agent.task_create", task_id="t3", wal_name="three", title="T", summary="S", steps=[step("a")]
    )
    await h.ok(orch, "agent.task_cancel", task_id="t3")
    lines = h.lines() + h.lines("two") + h.lines("three")
    seen = {x["event_type"] for x in lines}
    assert seen == set(PAYLOAD_MODELS), set(PAYLOAD_MODELS) - seen
    fixed = {
        "task_running": "running",
        "task_step_started": "running",
        "task_reopened": "pending",
        "task_step_reopened": "pending",
        "task_step_ready": "ready",
    }
    for line in lines:
        assert set(line["payload"]) == set(PAYLOAD_MODELS[line["event_type"]].model_fields), line[
            "event_type"
        ]
        if line["event_type"] in fixed:
            assert line["payload"]["status"] == fixed[line["event_type"]]
