"""Task closers and terminal Tasks: complete / fail / cancel, late workers, terminal listing and reads
(cases K15–K19, K34–K36, K40; docs/task-board.md)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from agent_core._tasks import wal as wal_mod
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import EventType
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, statuses, step


@pytest.fixture
def h(tmp_path: Path) -> TaskHarness:
    return TaskHarness(project=tmp_path.resolve(), session_id="sess_close", clock=ManualClock())


async def mixed_task(h: TaskHarness) -> tuple[Any, Any]:
    """Steps in every status: pend, rdy, blk, clm (w1), run (w2), cmp, fal."""
    await create(
        h,
        step("gate"),
        step("pend", "gate"),
        step("rdy"),
        step("blk"),
        step("clm"),
        step("run"),
        step("cmp"),
        step("fal"),
    )
    await h.ok(h.orchestrator(), "agent.task_update_step", task_id="t1", step_id="blk", status="blocked")
    await finish(h, "cmp")
    await finish(h, "fal", "failed")
    w1 = await claim(h, "clm", name="w1")
    w2 = await claim(h, "run", name="w2")
    await h.ok(w2, "agent.task_update_step", task_id="t1", step_id="run", status="running")
    await claim(h, "gate", name="w3")
    await h.ok(
        h.orchestrator(),
        "agent.task_update",
        task_id="t1",
        operations=[{"op": "update_step", "step_id": "gate", "fields": {"title": "g"}}],
    )
    return w1, w2


async def test_task_cancel(h: TaskHarness) -> None:
    """Case K15."""
    w1, w2 = await mixed_task(h)
    n = len(h.lines())
    result = await h.ok(h.orchestrator(), "agent.task_cancel", task_id="t1", reason="user changed plans")
    assert h.cancel_requests == [(sorted_holders(h), "task_cancelled")]
    assert {w1.run_id, w2.run_id} < set(h.cancel_requests[0][0])
    new = h.lines()[n:]
    assert [(x["event_type"], x["step_id"]) for x in new] == [
        ("task_step_cancelled", "gate"),
        ("task_step_cancelled", "pend"),
        ("task_step_cancelled", "rdy"),
        ("task_step_cancelled", "blk"),
        ("task_step_cancelled", "clm"),
        ("task_step_cancelled", "run"),
        ("task_cancelled", None),
    ]
    assert all(x["payload"]["reason"] == "task_cancelled" for x in new[:-1])
    assert new[0]["payload"]["result_summary"] == "task_cancelled"
    assert new[-1]["payload"] == {
        "reason": "user changed plans",
        "cancelled_step_ids": ["gate", "pend", "rdy", "blk", "clm", "run"],
    }
    assert result["cancelled_step_ids"] == ["gate", "pend", "rdy", "blk", "clm", "run"]
    assert result["task"]["status"] == "cancelled" and result["task"]["read_only"] is True
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="t1", include_terminal_steps=True)
    assert {s["step_id"]: s["status"] for s in got["steps"]}["cmp"] == "completed"
    assert {s["step_id"]: s["status"] for s in got["steps"]}["fal"] == "failed"
    # No worker_cancelled fallback for runs cancelled by the Task-level termination.
    n = len(h.lines())
    for worker in (w1, w2):
        end = await h.service.on_worker_run_end(
            worker.run_id, agent_id=worker.agent_id, task_id="t1", ending="cancelled"
        )
        assert end.wal_event_ids == [] and end.step_status == "cancelled"
    assert len(h.lines()) == n


def sorted_holders(h: TaskHarness) -> list[str]:
    """Holder runs in step creation order (gate was claimed by w3)."""
    snapshot = h.lines()
    runs: dict[str, str] = {}
    for line in snapshot:
        if line["event_type"] == "task_step_claimed":
            runs[line["step_id"]] = line["actor_run_id"]
    return [runs[s] for s in ("gate", "clm", "run")]


async def test_task_fail(h: TaskHarness) -> None:
    """Case K16."""
    await mixed_task(h)
    n = len(h.lines())
    result = await h.ok(h.orchestrator(), "agent.task_fail", task_id="t1")
    assert h.cancel_requests == [(sorted_holders(h), "task_failed")]
    new = h.lines()[n:]
    assert [x["event_type"] for x in new] == ["task_step_failed"] * 6 + ["task_failed"]
    assert all(x["payload"]["reason"] == "task_failed" for x in new[:-1])
    assert new[-1]["payload"] == {
        "reason": None,
        "failed_step_ids": ["gate", "pend", "rdy", "blk", "clm", "run"],
    }
    assert result["failed_step_ids"] == new[-1]["payload"]["failed_step_ids"]
    assert "fal" not in result["failed_step_ids"] and "cmp" not in result["failed_step_ids"]


async def test_holders_may_finish_while_the_termination_waits(tmp_path: Path) -> None:
    h = TaskHarness(project=tmp_path.resolve(), session_id="sess_race", clock=ManualClock())
    await create(h, step("a"), step("b"))
    wa = await claim(h, "a")

    async def cancel(run_ids: list[str], reason: str) -> None:
        # The worker writes its own final status during the wait (the Task lock is not held).
        await h.ok(wa, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
        other = h.worker("t1", name="late")
        exc = await h.err(other, "agent.task_claim_step", task_id="t1", step_id="b")
        assert exc.code == ErrorCode.task_not_dispatchable
        with pytest.raises(AgentCoreError) as info:
            await h.service.check_dispatchable("t1")
        assert info.value.code == ErrorCode.task_not_dispatchable

    h.service = h.new_service(cancel_worker_runs=cancel)
    await h.ok(h.orchestrator(), "agent.task_cancel", task_id="t1")
    assert h.types()[-4:] == [
        "task_step_claimed",
        "task_step_completed",
        "task_step_cancelled",
        "task_cancelled",
    ]
    assert h.lines()[-1]["payload"]["cancelled_step_ids"] == ["b"]


async def test_ignored_cancellation_does_not_block_termination(tmp_path: Path) -> None:
    """Case K34."""
    h = TaskHarness(project=tmp_path.resolve(), session_id="sess_slow", clock=ManualClock())
    await create(h, step("a"))
    wa = await claim(h, "a")
    emitted: list[tuple[EventType, dict[str, Any]]] = []

    async def cancel(run_ids: list[str], reason: str) -> None:
        # Stand-in for the multi-agent child cancel: request, wait child_cancel_timeout_ms, report timeout.
        for run_id in run_ids:
            emitted.append(
                (EventType.child_agent_cancel_requested, {"child_run_id": run_id, "reason": reason})
            )
        await asyncio.sleep(0.2)
        for run_id in run_ids:
            emitted.append(
                (
                    EventType.child_agent_cancel_timeout,
                    {"child_run_id": run_id, "child_cancel_timeout_ms": 200},
                )
            )

    h.service = h.new_service(cancel_worker_runs=cancel, child_cancel_timeout_ms=200)
    await h.ok(h.orchestrator(), "agent.task_cancel", task_id="t1")
    assert [e[0] for e in emitted] == [
        EventType.child_agent_cancel_requested,
        EventType.child_agent_cancel_timeout,
    ]
    assert h.types()[-2:] == ["task_step_cancelled", "task_cancelled"]
    n = len(h.lines())
    exc = await h.err(wa, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    assert exc.code == ErrorCode.task_terminal
    end = await h.service.on_worker_run_end(wa.run_id, agent_id=wa.agent_id, task_id="t1", ending="cancelled")
    assert end.wal_event_ids == [] and len(h.lines()) == n


async def test_a_hanging_cancel_hook_is_bounded(tmp_path: Path) -> None:
    """Case K34."""
    h = TaskHarness(project=tmp_path.resolve(), session_id="sess_hang", clock=ManualClock())
    await create(h, step("a"))
    await claim(h, "a")
    never = asyncio.Event()

    async def cancel(run_ids: list[str], reason: str) -> None:
        await never.wait()

    h.service = h.new_service(cancel_worker_runs=cancel, child_cancel_timeout_ms=50)
    await asyncio.wait_for(h.ok(h.orchestrator(), "agent.task_fail", task_id="t1"), timeout=4)
    assert h.types()[-1] == "task_failed"


async def test_complete_cancels_open_optional_steps(h: TaskHarness) -> None:
    """Case K17."""
    await create(
        h,
        step("req"),
        step("opt1", required=False),
        step("opt2", "req", required=False),
        step("opt3", required=False),
        step("opt4", required=False),
    )
    await finish(h, "req")
    await finish(h, "opt3")
    await finish(h, "opt4", "failed")
    assert statuses(h) == {
        "req": "completed",
        "opt1": "ready",
        "opt2": "ready",
        "opt3": "completed",
        "opt4": "failed",
    }
    n = len(h.lines())
    result = await h.ok(h.orchestrator(), "agent.task_complete", task_id="t1", result_summary="all good")
    new = h.lines()[n:]
    assert [(x["event_type"], x["step_id"]) for x in new] == [
        ("task_step_cancelled", "opt1"),
        ("task_step_cancelled", "opt2"),
        ("task_completed", None),
    ]
    assert all(x["payload"]["reason"] == "task_completed" for x in new[:2])
    assert new[-1]["payload"] == {
        "result_summary": "all good",
        "cancelled_optional_step_ids": ["opt1", "opt2"],
    }
    assert (
        result["cancelled_optional_step_ids"] == ["opt1", "opt2"] and result["task"]["status"] == "completed"
    )


async def test_complete_preconditions(h: TaskHarness) -> None:
    """Case K40."""
    await create(h, step("req"), step("opt", required=False))
    n = len(h.lines())
    exc = await h.err(h.orchestrator(), "agent.task_complete", task_id="t1")
    assert exc.code == ErrorCode.validation_error and exc.details["step_ids"] == ["req"]
    await finish(h, "req")
    w = await claim(h, "opt")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="opt", status="running")
    n = len(h.lines())
    exc = await h.err(h.orchestrator(), "agent.task_complete", task_id="t1")
    assert exc.code == ErrorCode.validation_error and exc.details["step_ids"] == ["opt"]
    assert len(h.lines()) == n
    # From blocked is allowed.
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="opt", status="completed")
    await h.ok(
        h.orchestrator(),
        "agent.task_update",
        task_id="t1",
        operations=[{"op": "update_task", "status": "blocked"}],
    )
    await h.ok(h.orchestrator(), "agent.task_complete", task_id="t1")
    assert h.types()[-1] == "task_completed"


@pytest.mark.parametrize("closer", ["agent.task_complete", "agent.task_fail", "agent.task_cancel"])
async def test_terminal_is_irreversible(h: TaskHarness, closer: str) -> None:
    """Cases K18, K35."""
    await create(h, step("a", required=False), step("b", required=False))
    w = await claim(h, "a")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    late = await claim(h, "b", name="late")
    if closer == "agent.task_complete":
        await h.ok(late, "agent.task_update_step", task_id="t1", step_id="b", status="blocked")
    await h.ok(h.orchestrator(), closer, task_id="t1")
    n = len(h.lines())
    orch = h.orchestrator()
    for scope, tool, args in [
        (late, "agent.task_update_step", {"step_id": "b", "status": "completed"}),
        (h.worker("t1", name="new"), "agent.task_claim_step", {"step_id": "b"}),
        (orch, "agent.task_update", {"operations": [{"op": "update_task", "title": "x"}]}),
        (orch, "agent.task_update_step", {"step_id": "b", "status": "pending"}),
        (orch, "agent.task_complete", {}),
        (orch, "agent.task_fail", {}),
        (orch, "agent.task_cancel", {}),
    ]:
        exc = await h.err(scope, tool, task_id="t1", **args)
        assert exc.code == ErrorCode.task_terminal, tool
    with pytest.raises(AgentCoreError) as info:
        await h.service.check_dispatchable("t1")
    assert info.value.code == ErrorCode.task_not_dispatchable
    assert len(h.lines()) == n


async def test_restart_skips_terminal_tasks(h: TaskHarness) -> None:
    """Case K36."""
    await create(h, step("a"), task_id="done", wal_name="done")
    await finish(h, "a", task_id="done", result_summary="ok")
    await h.ok(h.orchestrator(), "agent.task_complete", task_id="done")
    await create(h, step("a"), step("b", "a"), task_id="live", wal_name="live")
    await finish(h, "a", task_id="live")
    before = h.service.active_dags()[0].snapshot()
    service = h.restart()
    views = await service.load()
    assert [v.task_id for v in views] == ["live"]
    assert [d.task_id for d in service.active_dags()] == ["live"]
    assert service.active_dags()[0].snapshot() == before
    listed = await h.ok(h.orchestrator(), "agent.task_list")
    assert [t["task_id"] for t in listed["tasks"]] == ["live"]
    listed = await h.ok(h.orchestrator(), "agent.task_list", include_terminal=True)
    assert [(t["task_id"], t["read_only"]) for t in listed["tasks"]] == [("live", False), ("done", True)]
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="done", include_terminal_steps=True)
    assert got["read_only"] is True and got["status"] == "completed"
    assert [(s["step_id"], s["status"], s["result_summary"]) for s in got["steps"]] == [
        ("a", "completed", "ok")
    ]
    assert [d.task_id for d in service.active_dags()] == ["live"]
    assert h.wal("done").exists()
    replayed = [e for e in h.service_events if e.event_type == EventType.task_wal_replayed]
    assert [e.payload["task_id"] for e in replayed] == ["live"]
    assert replayed[0].payload["records"] == len(h.lines("live"))


async def test_terminal_paging(h: TaskHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case K19."""
    for i in range(60):
        await h.ok(
            h.orchestrator(),
            "agent.task_create",
            task_id=f"t{i}",
            wal_name=f"w{i:02d}",
            title="T",
            summary="S",
            steps=[step("a")],
        )
        if i % 2:
            await h.ok(h.orchestrator(), "agent.task_cancel", task_id=f"t{i}")
        else:
            await finish(h, "a", task_id=f"t{i}")
            await h.ok(h.orchestrator(), "agent.task_complete", task_id=f"t{i}")
        os.utime(h.wal(f"w{i:02d}"), ns=(1_700_000_000_000_000_000 + i * 10**9,) * 2)
    await create(h, step("a"), task_id="blocked-one", wal_name="blk")
    await h.ok(
        h.orchestrator(),
        "agent.task_update",
        task_id="blocked-one",
        operations=[{"op": "update_task", "status": "blocked"}],
    )
    h.clock.advance(1000)
    await create(h, step("a"), task_id="running-one", wal_name="run")
    h.restart()
    calls: list[Path] = []
    real = wal_mod.replay_wal

    def spy(path: Path, **kwargs: Any) -> Any:
        calls.append(path)
        return real(path, **kwargs)

    await h.service.load()
    monkeypatch.setattr(wal_mod, "replay_wal", spy)
    page = await h.ok(h.orchestrator(), "agent.task_list", include_terminal=True)
    assert page["returned"] == 50 and page["has_more"] is True and page["next_offset"] == 50
    ids = [t["task_id"] for t in page["tasks"]]
    assert ids[:2] == ["running-one", "blocked-one"]
    assert ids[2:] == [f"t{i}" for i in range(59, 11, -1)]
    assert len(calls) == 48
    calls.clear()
    rest = await h.ok(h.orchestrator(), "agent.task_list", include_terminal=True, offset=50)
    assert [t["task_id"] for t in rest["tasks"]] == [f"t{i}" for i in range(11, -1, -1)]
    assert rest["has_more"] is False and len(calls) == 12
    calls.clear()
    default = await h.ok(h.orchestrator(), "agent.task_list")
    assert {t["task_id"] for t in default["tasks"]} == {"running-one", "blocked-one"} and calls == []
    blocked = await h.ok(h.orchestrator(), "agent.task_list", status="blocked")
    assert [t["task_id"] for t in blocked["tasks"]] == ["blocked-one"]
    cancelled = await h.ok(h.orchestrator(), "agent.task_list", status="cancelled", limit=200)
    assert [t["task_id"] for t in cancelled["tasks"]] == [f"t{i}" for i in range(59, 0, -2)]
    assert all(t["status"] == "cancelled" and t["read_only"] for t in cancelled["tasks"])
    completed = await h.ok(h.orchestrator(), "agent.task_list", status="completed", limit=10)
    assert [t["task_id"] for t in completed["tasks"]] == [f"t{i}" for i in range(58, 38, -2)]
    assert completed["has_more"] is True
