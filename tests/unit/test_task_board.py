"""Task board summary content, ordering, budget and recent changes (docs/task-board.md#the-board-summary,
docs/task-board.md; docs/context.md#the-task-board-summary; case K48 content part)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core._tasks import TaskCaller
from agent_core._tasks.board import default_token_estimate
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, step


@pytest.fixture
def h(tmp_path: Path) -> TaskHarness:
    return TaskHarness(project=tmp_path.resolve(), session_id="sess_board", clock=ManualClock())


async def board_state(h: TaskHarness) -> None:
    await create(
        h,
        step("blk"),
        step("run"),
        step("rdy1"),
        step("rdy2", worker_pool_id="other"),
        step("pend", "rdy1"),
        step("done"),
    )
    await h.ok(
        h.orchestrator(),
        "agent.task_update_step",
        task_id="t1",
        step_id="blk",
        status="blocked",
        reason="needs credentials",
    )
    worker = await claim(h, "run")
    await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="run", status="running")
    await finish(h, "done")


async def test_orchestrator_board_order_and_fields(h: TaskHarness) -> None:
    """Case K48."""
    await board_state(h)
    text = h.service.board_summary(TaskCaller.from_run_scope(h.orchestrator()))
    assert text is not None
    lines = text.splitlines()
    assert lines[0].startswith("Active Tasks: 1")
    assert lines[1].startswith("Task t1 [running]") and "blocked: 1" in lines[1] and "ready: 2" in lines[1]
    blocked_at = lines.index("Blocked:")
    running_at = lines.index("Claimed/running:")
    ready_at = lines.index("Ready steps:")
    recent_at = lines.index("Recent changes (newest first):")
    assert blocked_at < running_at < ready_at < recent_at
    item = lines[blocked_at + 1]
    for key in (
        "task_id=t1",
        "step_id=blk",
        "status=blocked",
        "worker_pool_id=default",
        "claimed_by_agent_id=none",
        "lease_expires_at=none",
        "artifact_ids=none",
        "summary='Do blk'",
    ):
        assert key in item
    running = lines[running_at + 1]
    assert (
        "step_id=run" in running and "status=running" in running and "claimed_by_agent_id=agent_w1" in running
    )
    assert "lease_expires_at=2026-06-12T15:35:00.000Z" in running
    ready_lines = lines[ready_at + 1 : recent_at]
    assert [x.split("step_id=")[1].split()[0] for x in ready_lines] == ["rdy1", "rdy2"]
    assert "pend" not in "".join(lines[:recent_at]).replace("pending", "")


async def test_viewer_sees_own_claims_in_their_own_section(h: TaskHarness) -> None:
    await create(h, step("a"), step("b"))
    mine = await claim(h, "a")
    await claim(h, "b", name="w2")
    text = h.service.board_summary(TaskCaller.from_run_scope(mine))
    assert text is not None
    lines = text.splitlines()
    own = lines.index("Your claimed/running steps:")
    assert "step_id=a" in lines[own + 1]
    assert "step_id=b" in lines[lines.index("Claimed/running:") + 1]


async def test_tiny_budget_keeps_blocked_and_running(h: TaskHarness) -> None:
    """Case K48."""
    await board_state(h)
    await create(h, *(step(f"r{i}") for i in range(10)), task_id="t2", wal_name="two")
    caller = TaskCaller.from_run_scope(h.orchestrator())
    full = h.service.board_summary(caller, token_budget=100_000)
    assert full is not None and "step_id=r9" in full
    essential = [x for x in full.splitlines() if "status=blocked" in x or "status=running" in x]
    budget = sum(default_token_estimate(x) + 1 for x in full.splitlines()[:3] + essential) + 40
    small = h.service.board_summary(caller, token_budget=budget)
    assert small is not None
    assert default_token_estimate(small) <= budget + 30
    assert "step_id=blk" in small and "step_id=run" in small
    assert "step_id=r9" not in small
    assert "Task t2 [running]" in small and "ready: 10" in small
    assert "Trimmed to status counts" in small and "t2:" in small


async def test_recent_changes_limit_and_window(h: TaskHarness) -> None:
    await create(h, step("old"))
    h.clock.advance(31 * 60 * 1000)
    await create(h, *(step(f"s{i}") for i in range(30)), task_id="t2", wal_name="two")
    caller = TaskCaller.from_run_scope(h.orchestrator())
    text = h.service.board_summary(caller, token_budget=100_000, recent_limit=20, recent_window_minutes=30)
    assert text is not None
    lines = text.splitlines()
    recent = lines[lines.index("Recent changes (newest first):") + 1 :]
    recent = [x for x in recent if x.startswith("- 2026")]
    assert len(recent) == 20 and all(" t2" in x for x in recent)
    assert all(x.split()[1] == "2026-06-12T16:01:00.000Z" for x in recent)
    wide = h.service.board_summary(caller, token_budget=100_000, recent_limit=100, recent_window_minutes=60)
    assert wide is not None and " t1 task_created" in wide


async def test_completed_tasks_only_in_recent_changes_and_none_without_active(h: TaskHarness) -> None:
    caller = TaskCaller.from_run_scope(h.orchestrator())
    assert h.service.board_summary(caller) is None
    await create(h, step("a"))
    await finish(h, "a")
    await h.ok(h.orchestrator(), "agent.task_complete", task_id="t1")
    assert h.service.board_summary(caller) is None
    await create(h, step("x"), task_id="t2", wal_name="two")
    text = h.service.board_summary(caller)
    assert text is not None and "Task t1" not in text and "t1 task_completed" in text
    assert h.service.has_attention_items() is True


async def test_worker_board_is_scoped_to_dispatch_task_and_steps(h: TaskHarness) -> None:
    await create(h, step("mine"), step("theirs"), step("pooled", worker_pool_id="other"))
    await create(h, step("elsewhere"), task_id="t2", wal_name="two")
    worker = h.worker("t1", allowed=["mine"])
    text = h.service.board_summary(TaskCaller.from_run_scope(worker))
    assert text is not None
    assert "step_id=mine" in text and "theirs" not in text and "pooled" not in text
    assert "t2" not in text and "Active Tasks: 1" in text
