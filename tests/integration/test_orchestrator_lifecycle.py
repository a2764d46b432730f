"""Worker run ends, Task-level termination of live workers and worker state
(docs/task-board.md#failing-and-cancelling-a-task, docs/task-board.md#worker-run-end-fallback;
docs/multi-agent.md#worker-runs, docs/multi-agent.md#cancellation-and-timeouts, docs/multi-agent.md; cases
K10, K15 and K34 runtime halves)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.orchestrator import (
    Router,
    Stubborn,
    create_args,
    error_code,
    events,
    finish,
    result_json,
    result_of,
    roomy,
    step,
    two_workers,
    wal_lines,
    watch,
)
from tests.fixtures.runtime import open_runtime, rows

DONE = '{"status": "completed", "summary": "worker finished"}'


def claim(step_id: str, call_id: str) -> Any:
    return tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": step_id}, call_id))


def update(step_id: str, call_id: str, **fields: Any) -> Any:
    return tool_calls(("agent.task_update_step", {"task_id": "t1", "step_id": step_id, **fields}, call_id))


def dispatch(call_id: str, **args: Any) -> tuple[str, dict[str, Any], str]:
    return ("agent.dispatch_worker", {"task_id": "t1", "instruction": "work", **args}, call_id)


def failures(env: SoongEnv, session_id: str) -> list[tuple[str, str]]:
    return [
        (r["step_id"], r["payload"]["reason"])
        for r in wal_lines(env, session_id, "t1-work")
        if r["event_type"] == "task_step_failed"
    ]


async def test_worker_ends_without_closing_its_step(soong_env: SoongEnv) -> None:
    """Case K10."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2"), step("s3")), "c1")),
        tool_calls(dispatch("d_claimed", allowed_step_ids=["s1"], instruction="job:claimed")),
        tool_calls(dispatch("d_running", allowed_step_ids=["s2"], instruction="job:running")),
        text("done"),
    )
    router.job("claimed", claim("s1", "a1"), text("forgot to close the step"))
    router.job("running", claim("s2", "b1"), update("s2", "b2", status="running"), text(DONE))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    reason = "worker_finished_without_terminal_step_status"
    assert failures(soong_env, run.session_id) == [("s1", reason), ("s2", reason)]
    for call_id, step_id in (("d_claimed", "s1"), ("d_running", "s2")):
        res = result_json(result_of(router, call_id))
        assert (res["claimed_step_id"], res["step_status"]) == (step_id, "failed")
        assert res["step_result_summary"] == reason
    failed = [
        r for r in wal_lines(soong_env, run.session_id, "t1-work") if r["event_type"] == "task_step_failed"
    ]
    worker_runs = [result_json(result_of(router, c))["child_run_id"] for c in ("d_claimed", "d_running")]
    assert [r["actor_run_id"] for r in failed] == worker_runs  # actor = the ending worker run
    # s3 (another step) is untouched
    s3 = [r["event_type"] for r in wal_lines(soong_env, run.session_id, "t1-work") if r["step_id"] == "s3"]
    assert s3 == ["task_step_ready"]


async def test_worker_timeout_fails_its_step(soong_env: SoongEnv) -> None:
    """Case K10."""
    gate = asyncio.Event()
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c1")),
        tool_calls(dispatch("d", timeout_ms=300, instruction="job:slow")),
        text("done"),
    )
    router.job("slow", claim("s1", "c_s1"), hang(gate))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    block = result_of(router, "d")
    assert error_code(block) == "timeout"
    res = result_json(block)
    assert (res["claimed_step_id"], res["step_status"]) == ("s1", "failed")
    assert res["worker_result"]["status"] == "failed" and res["worker_result"]["step_id"] == "s1"
    assert failures(soong_env, run.session_id) == [("s1", "worker_timeout")]
    requested = events(soong_env, run.session_id, "child_agent_cancel_requested")
    assert [e["payload"]["reason"] for e in requested] == ["timeout"]


async def test_parent_cancel_cancels_the_worker(soong_env: SoongEnv) -> None:
    """Case K10."""
    gate = asyncio.Event()
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c1")),
        tool_calls(dispatch("d", instruction="job:slow")),
    )
    router.job("slow", claim("s1", "c_s1"), hang(gate))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        for _ in range(500):
            if any(len(r) >= 2 for r in router.worker_requests.values()):
                break
            await asyncio.sleep(0.01)
        result = await run.cancel()
        assert result.cancelled
        await finish(run)
        await asyncio.sleep(0.05)
    assert failures(soong_env, run.session_id) == [("s1", "worker_cancelled")]
    kinds = [
        e["event_type"]
        for e in events(soong_env, run.session_id, "child_agent_cancel_requested", "child_agent_cancelled")
    ]
    assert kinds == ["child_agent_cancel_requested", "child_agent_cancelled"]
    requested = events(soong_env, run.session_id, "child_agent_cancel_requested")[0]
    assert requested["payload"]["reason"] == "parent_cancelled"


@pytest.mark.parametrize("release_on", ["task_cancel_request", "task_terminal"], ids=["honoured", "ignored"])
async def test_task_cancel_stops_live_workers(soong_env: SoongEnv, release_on: str) -> None:
    """Cases K15, K34: Workers abandoned after their own timeout still hold claimed/running steps when the
    Orchestrator cancels the Task: their runs get a task_cancelled cancel request and every unfinished step
    ends."""
    stubborn = Stubborn()
    fake = FakeProvider()
    steps = [step("a"), step("b"), step("c"), step("f"), step("blk"), step("r"), step("p", "r")]
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", *steps), "c1")),
        update("blk", "blk", status="blocked", reason="needs input"),
        tool_calls(
            dispatch("d_c", allowed_step_ids=["c"], instruction="job:c"),
            dispatch("d_f", allowed_step_ids=["f"], instruction="job:f"),
        ),
        tool_calls(
            dispatch(
                "d_a",
                allowed_step_ids=["a"],
                timeout_ms=300,
                allowed_tools=[Stubborn.NAME],
                instruction="job:a",
            ),
            dispatch(
                "d_b",
                allowed_step_ids=["b"],
                timeout_ms=300,
                allowed_tools=[Stubborn.NAME],
                instruction="job:b",
            ),
        ),
        tool_calls(("agent.list_workers", {}, "list")),
        tool_calls(("agent.task_cancel", {"task_id": "t1", "reason": "stop"}, "cancel")),
        text("done"),
    )
    stub = tool_calls((Stubborn.NAME, {}))
    router.job(
        "c", claim("c", "c1"), update("c", "c2", status="completed", result_summary="c ok"), text(DONE)
    )
    router.job("f", claim("f", "f1"), update("f", "f2", status="failed", reason="bad"), text(DONE))
    router.job("a", claim("a", "a1"), stub, text(DONE))
    router.job("b", claim("b", "b1"), update("b", "b2", status="running"), stub, text(DONE))
    config = roomy(two_workers(child_cancel_timeout_ms=200))
    async with open_runtime(soong_env, fake, config=config) as rt:
        stubborn.register(rt)
        run = await rt.start("go", mode="orchestrator")

        def trigger(event: Any) -> bool:
            if release_on == "task_cancel_request":
                return (
                    event.event_type.value == "child_agent_cancel_requested"
                    and event.data.get("reason") == "task_cancelled"
                )
            return event.event_type.value == "task_cancelled"

        try:
            await asyncio.wait_for(watch(run, trigger, stubborn.release.set), 20)
            await finish(run)
        finally:
            stubborn.release.set()
        await asyncio.sleep(0.3)  # let the released workers end and their deferred fallbacks run
    assert stubborn.entered == 2
    for call_id, step_id, status in (("d_a", "a", "claimed"), ("d_b", "b", "running")):
        block = result_of(router, call_id)
        assert error_code(block) == "timeout"
        assert (result_json(block)["claimed_step_id"], result_json(block)["step_status"]) == (step_id, status)
    listed = {w["worker_agent_id"]: w["status"] for w in result_json(result_of(router, "list"))["workers"]}
    assert listed == {"w1": "unavailable", "w2": "unavailable"}
    lines = wal_lines(soong_env, run.session_id, "t1-work")
    cancelled = [
        (r["step_id"], r["payload"]["reason"]) for r in lines if r["event_type"] == "task_step_cancelled"
    ]
    assert cancelled == [(s, "task_cancelled") for s in ("a", "b", "blk", "r", "p")]
    assert lines[-1]["event_type"] == "task_cancelled"
    assert lines[-1]["payload"] == {"reason": "stop", "cancelled_step_ids": ["a", "b", "blk", "r", "p"]}
    assert failures(soong_env, run.session_id) == [("f", "bad")]  # no worker_cancelled/timeout fallback lines
    assert [r["step_id"] for r in lines if r["event_type"] == "task_step_completed"] == ["c"]
    result = result_json(result_of(router, "cancel"))
    assert sorted(result["cancelled_worker_run_ids"]) == sorted(
        result_json(result_of(router, c))["child_run_id"] for c in ("d_a", "d_b")
    )
    for call_id in ("d_a", "d_b"):
        child = result_json(result_of(router, call_id))["child_run_id"]
        # tb58: the worker's own transcript (its late tool result) is persisted in its run
        (row,) = rows(soong_env, "SELECT status FROM runs WHERE run_id = ?", child)
        assert row["status"] == "aborted"  # its own timeout came first
        tool_nodes = rows(
            soong_env,
            f"SELECT metadata_json FROM nodes_{run.session_id} WHERE run_id = ? AND role = 'tool'",
            child,
        )
        assert any(json.loads(n["metadata_json"]).get("tool_name") == Stubborn.NAME for n in tool_nodes)
        kinds = [
            (e["event_type"], e["payload"].get("reason"))
            for e in events(soong_env, run.session_id)
            if e["event_type"].startswith("child_agent_cancel") and e["payload"].get("child_run_id") == child
        ]
        final = (
            ("child_agent_cancelled", None)
            if release_on == "task_cancel_request"
            else ("child_agent_cancel_timeout", None)
        )
        assert kinds == [
            ("child_agent_cancel_requested", "timeout"),
            ("child_agent_cancel_timeout", None),
            ("child_agent_cancel_requested", "task_cancelled"),
            final,
        ]
