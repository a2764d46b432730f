"""Worker claims, leases, step execution updates, worker-run-end fallback and worker scope
(cases K5–K10, K12, K37, K41, K42, K45, J6, J8, J9, J19–J21; docs/task-board.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest

from agent_core._tasks import replay_wal
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._normalize import agent_error_result
from agent_core.types.base import format_ts_ms, parse_ts
from agent_core.types.enums import EventType
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, statuses, step


@pytest.fixture
def h(tmp_path: Path) -> TaskHarness:
    return TaskHarness(
        project=tmp_path.resolve(), session_id="sess_claims", clock=ManualClock(), lease_ms=60_000
    )


async def test_concurrent_claims_of_one_step(h: TaskHarness) -> None:
    """Case K5."""
    await create(h, step("s1"))
    w1, w2 = h.worker("t1", name="w1"), h.worker("t1", name="w2")
    results = await asyncio.gather(
        h.call(w1, "agent.task_claim_step", task_id="t1", step_id="s1"),
        h.call(w2, "agent.task_claim_step", task_id="t1", step_id="s1"),
        return_exceptions=True,
    )
    wins = [r for r in results if not isinstance(r, BaseException)]
    losses = [r for r in results if isinstance(r, AgentCoreError)]
    assert len(wins) == 1 and len(losses) == 1 and losses[0].code == ErrorCode.step_already_claimed
    assert h.types().count("task_step_claimed") == 1 and len(h.lines()) == 4
    loser = w2 if wins[0].content[0].data["step"]["claimed_by_run_id"] == w1.run_id else w1  # type: ignore[union-attr]
    skipped = h.events(loser, EventType.task_step_claim_skipped)
    assert [e.payload for e in skipped] == [
        {
            "task_id": "t1",
            "step_id": "s1",
            "code": "step_already_claimed",
            "worker_agent_id": loser.task_scope.worker_agent_id,  # type: ignore[union-attr]
            "worker_run_id": loser.run_id,
        }
    ]
    result = agent_error_result(losses[0], "call_x", "agent.task_claim_step")
    assert (
        result.is_error is True
        and result.error is not None
        and result.error.code == ErrorCode.step_already_claimed
    )


async def test_sixteen_workers_claim_each_step_exactly_once(h: TaskHarness) -> None:
    await create(h, *(step(f"s{i}") for i in range(10)))
    workers = [h.worker("t1", name=f"w{i}") for i in range(16)]

    async def work(worker: object) -> str | None:
        while True:
            query = await h.ok(worker, "agent.task_query_steps", task_id="t1", limit=5)  # type: ignore[arg-type]
            if not query["steps"]:
                return None
            try:
                got = await h.ok(
                    worker,
                    "agent.task_claim_step",
                    task_id="t1",  # type: ignore[arg-type]
                    step_id=query["steps"][0]["step_id"],
                )
            except AgentCoreError as exc:
                assert exc.code == ErrorCode.step_already_claimed
                await asyncio.sleep(0)
                continue
            return str(got["step"]["step_id"])

    claimed = await asyncio.gather(*(work(w) for w in workers))
    got = [c for c in claimed if c is not None]
    assert sorted(got) == sorted(f"s{i}" for i in range(10)) and claimed.count(None) == 6
    claim_lines = [x for x in h.lines() if x["event_type"] == "task_step_claimed"]
    assert sorted(x["step_id"] for x in claim_lines) == sorted(got)
    assert len({x["actor_run_id"] for x in claim_lines}) == 10
    assert [x["wal_seq"] for x in h.lines()] == list(range(1, len(h.lines()) + 1))


async def test_claim_then_start(h: TaskHarness) -> None:
    """Case K6."""
    await create(h, step("s1"))
    worker = h.worker("t1")
    claimed = await h.ok(worker, "agent.task_claim_step", task_id="t1", step_id="s1")
    expected_lease = format_ts_ms(h.clock.now + timedelta(milliseconds=60_000))
    assert claimed["lease_expires_at"] == expected_lease and claimed["step"]["status"] == "claimed"
    line = h.lines()[-1]
    assert line["event_type"] == "task_step_claimed" and line["payload"] == {
        "previous_status": "ready",
        "claimed_by_agent_id": worker.agent_id,
        "claimed_by_run_id": worker.run_id,
        "lease_expires_at": expected_lease,
    }
    h.clock.advance(1000)
    started = await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="s1", status="running")
    line = h.lines()[-1]
    assert line["event_type"] == "task_step_started"
    assert line["payload"]["previous_status"] == "claimed" and line["payload"]["status"] == "running"
    assert parse_ts(started["lease_expires_at"]) > parse_ts(expected_lease)
    assert "task_step_updated" not in h.types()
    exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="s1", status="claimed")
    assert exc.code == ErrorCode.validation_error


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled", "blocked"])
async def test_claimed_to_terminal_or_blocked_directly(h: TaskHarness, status: str) -> None:
    """Case K7."""
    await create(h, step("s1"))
    h.artifacts.add("artifact_1")
    worker = await claim(h, "s1")
    extra = {} if status == "cancelled" else {"artifact_ids": ["artifact_1"]}
    await h.ok(
        worker,
        "agent.task_update_step",
        task_id="t1",
        step_id="s1",
        status=status,
        result_summary="r",
        reason="why",
        **extra,
    )
    line = h.lines()[-1]
    assert line["event_type"] == f"task_step_{status}" and "task_step_updated" not in h.types()
    assert line["payload"]["previous_status"] == "claimed" and line["payload"]["result_summary"] == "r"
    if status != "cancelled":
        assert line["payload"]["artifact_ids"] == ["artifact_1"]
    step_state = h.service.active_dags()[0].step("s1")
    assert step_state is not None and step_state.lease_expires_at is None
    if status == "blocked":  # k08 / a38: claim cleared
        assert step_state.claimed_by_agent_id is None and step_state.claimed_by_run_id is None
    else:  # claimed_by_* kept as history
        assert step_state.claimed_by_run_id == worker.run_id


async def test_blocked_step_is_out_of_the_workers_hands(h: TaskHarness) -> None:
    """Case K8."""
    await create(h, step("s1"))
    worker = await claim(h, "s1")
    await h.ok(
        worker, "agent.task_update_step", task_id="t1", step_id="s1", status="blocked", reason="need input"
    )
    n = len(h.lines())
    for status in ("running", "completed", "pending"):
        exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="s1", status=status)
        assert exc.code == ErrorCode.permission_denied
    other = h.worker("t1", name="w2")
    exc = await h.err(other, "agent.task_claim_step", task_id="t1", step_id="s1")
    assert exc.code == ErrorCode.step_not_ready
    assert len(h.lines()) == n
    # a34 / j9: the first worker run may never claim again, even after its step was released.
    await h.ok(h.orchestrator(), "agent.task_update_step", task_id="t1", step_id="s1", status="pending")
    exc = await h.err(worker, "agent.task_claim_step", task_id="t1", step_id="s1")
    assert exc.code == ErrorCode.step_already_claimed_by_run
    assert (
        h.events(worker, EventType.task_step_claim_skipped)[-1].payload["code"]
        == "step_already_claimed_by_run"
    )


async def test_one_claim_per_worker_run(h: TaskHarness) -> None:
    """Case J9."""
    await create(h, step("s1"), step("s2"))
    worker = await claim(h, "s1")
    exc = await h.err(worker, "agent.task_claim_step", task_id="t1", step_id="s2")
    assert exc.code == ErrorCode.step_already_claimed_by_run and statuses(h)["s2"] == "ready"


async def test_workers_cannot_change_content_or_foreign_steps(h: TaskHarness) -> None:
    """Case K12."""
    await create(h, step("s1"), step("s2"))
    worker = await claim(h, "s1")
    other = await claim(h, "s2", name="w2")
    n = len(h.lines())
    before = h.service.active_dags()[0].snapshot()
    exc = await h.err(
        worker, "agent.task_update", task_id="t1", operations=[{"op": "update_task", "title": "x"}]
    )
    assert exc.code == ErrorCode.permission_denied
    for field, value in [
        ("title", "x"),
        ("summary", "x"),
        ("depends_on_step_ids", ["s2"]),
        ("worker_pool_id", "other"),
        ("required", False),
    ]:
        for scope in (worker, h.orchestrator()):
            exc = await h.err(scope, "agent.task_update_step", task_id="t1", step_id="s1", **{field: value})
            assert exc.code == ErrorCode.validation_error
    exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="s2", status="completed")
    assert exc.code == ErrorCode.permission_denied
    exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="s1", status="pending")
    assert exc.code == ErrorCode.permission_denied
    assert len(h.lines()) == n and h.service.active_dags()[0].snapshot() == before
    assert other.run_id != worker.run_id


async def test_lease_expiry(tmp_path: Path) -> None:
    """Case K9."""
    h = TaskHarness(project=tmp_path.resolve(), session_id="sess_lease", clock=ManualClock(), lease_ms=100)
    await create(h, step("s1"), step("s2"))
    worker = await claim(h, "s1")
    claimed_lease = h.service.active_dags()[0].step("s1").lease_expires_at  # type: ignore[union-attr]
    h.clock.advance(150)
    await h.ok(h.orchestrator(), "agent.task_query_steps", task_id="t1")
    expired, ready = h.lines()[-2:]
    assert expired["event_type"] == "task_step_lease_expired" and ready["event_type"] == "task_step_ready"
    assert expired["payload"] == {
        "previous_status": "claimed",
        "claimed_by_agent_id": worker.agent_id,
        "claimed_by_run_id": worker.run_id,
        "expired_at": claimed_lease,
    }
    assert (expired["actor_agent_id"], expired["actor_run_id"]) == ("agent_orch", "run_orch")
    s1 = h.service.active_dags()[0].step("s1")
    assert s1 is not None and s1.status.value == "ready" and s1.claimed_by_run_id is None
    replayed = replay_wal(h.wal(), session_id="sess_lease", repair=False).dag.step("s1")
    assert replayed is not None and replayed.status.value == "ready" and replayed.claimed_by_agent_id is None
    n = len(h.lines())
    exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="s1", status="completed")
    assert exc.code == ErrorCode.permission_denied and len(h.lines()) == n
    assert h.service.active_dags()[0].status.value == "running"
    # Restore reconciles an expired lease with actor "core".
    w2 = await claim(h, "s2", name="w2")
    h.clock.advance(500)
    service = h.restart()
    await service.load()
    expired, ready = h.lines()[-2:]
    assert expired["event_type"] == "task_step_lease_expired" and expired["step_id"] == "s2"
    assert (expired["actor_agent_id"], expired["actor_run_id"]) == ("core", None)
    assert ready["event_type"] == "task_step_ready" and w2.run_id == expired["payload"]["claimed_by_run_id"]
    replayed_events = [e for e in h.service_events if e.event_type == EventType.task_wal_replayed]
    assert len(replayed_events) == 1


async def test_lease_renewal(h: TaskHarness) -> None:
    """Case K42."""
    await create(h, step("s1"))
    worker = await claim(h, "s1")
    leases = [h.service.active_dags()[0].step("s1").lease_expires_at]  # type: ignore[union-attr]
    for kwargs in (
        {"status": "running"},
        {"result_summary": "half"},
        {"status": "running", "result_summary": "more"},
    ):
        h.clock.advance(1000)
        out = await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="s1", **kwargs)
        leases.append(out["lease_expires_at"])
    assert leases == sorted(leases) and len(set(leases)) == 4
    assert h.types()[-3:] == ["task_step_started", "task_step_updated", "task_step_updated"]
    h.clock.advance(1000)
    done = await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="s1", status="completed")
    assert done["lease_expires_at"] is None


async def test_artifact_ids_are_appended_and_must_exist(h: TaskHarness) -> None:
    await create(h, step("s1"))
    worker = await claim(h, "s1")
    exc = await h.err(
        worker, "agent.task_update_step", task_id="t1", step_id="s1", artifact_ids=["artifact_nope"]
    )
    assert exc.code == ErrorCode.validation_error
    exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="s1", artifact_ids=["../x"])
    assert exc.code == ErrorCode.validation_error
    h.artifacts.update({"artifact_a", "artifact_b"})
    await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="s1", artifact_ids=["artifact_a"])
    out = await h.ok(
        worker,
        "agent.task_update_step",
        task_id="t1",
        step_id="s1",
        artifact_ids=["artifact_b", "artifact_a"],
        status="running",
        result_summary="r",
    )
    assert out["step"]["artifact_ids"] == ["artifact_a", "artifact_b"]
    assert h.types()[-2:] == ["task_step_started", "task_step_updated"]


async def test_worker_run_end_fallback(h: TaskHarness) -> None:
    """Case K10."""
    await create(h, step("a"), step("b"), step("c"), step("d"))
    wa = await claim(h, "a")
    wb = await claim(h, "b", name="w2")
    await h.ok(
        wb, "agent.task_update_step", task_id="t1", step_id="b", status="running", result_summary="half"
    )
    wc = await claim(h, "c", name="w3")
    wd = await claim(h, "d", name="w4")
    for worker, ending, reason in [
        (wa, "completed", "worker_finished_without_terminal_step_status"),
        (wb, "cancelled", "worker_cancelled"),
        (wc, "timeout", "worker_timeout"),
    ]:
        end = await h.service.on_worker_run_end(
            worker.run_id, agent_id=worker.agent_id, task_id="t1", ending=ending
        )  # type: ignore[arg-type]
        line = h.lines()[-1]
        assert line["event_type"] == "task_step_failed" and line["payload"]["reason"] == reason
        assert (line["actor_agent_id"], line["actor_run_id"]) == (worker.agent_id, worker.run_id)
        assert end.step_status == "failed" and end.no_step_claimed is False
        assert end.wal_event_ids == [line["event_id"]]
    assert h.lines()[-2]["payload"]["result_summary"] == "half"  # existing summary kept
    assert h.lines()[-1]["payload"]["result_summary"] == "worker_timeout"
    assert statuses(h)["d"] == "claimed" and wd.run_id  # other claims untouched


async def test_fallback_skips_released_and_terminal(h: TaskHarness) -> None:
    await create(h, step("a"), step("b"), step("c"))
    wa = await finish(h, "a")
    wb = await finish(h, "b", "blocked")
    wc = await claim(h, "c")
    n = len(h.lines())
    for worker in (wa, wb):
        end = await h.service.on_worker_run_end(
            worker.run_id, agent_id=worker.agent_id, task_id="t1", ending="completed"
        )
        assert end.wal_event_ids == [] and end.no_step_claimed is False
    assert len(h.lines()) == n
    await h.ok(h.orchestrator(), "agent.task_cancel", task_id="t1")
    n = len(h.lines())
    end = await h.service.on_worker_run_end(wc.run_id, agent_id=wc.agent_id, task_id="t1", ending="cancelled")
    assert end.wal_event_ids == [] and end.step_status == "cancelled" and len(h.lines()) == n


async def test_scope_enforcement(h: TaskHarness) -> None:
    """Cases J6, J20."""
    await create(h, step("s1"), step("s2"), step("p", worker_pool_id="other"))
    await create(h, step("x"), task_id="t2", wal_name="two")
    worker = h.worker("t1", allowed=["s2"])
    query = await h.ok(worker, "agent.task_query_steps", task_id="t1")
    assert [s["step_id"] for s in query["steps"]] == ["s2"]
    n = len(h.lines())
    for target in ("s1", "p"):
        exc = await h.err(worker, "agent.task_claim_step", task_id="t1", step_id=target)
        assert exc.code == ErrorCode.permission_denied
    for tool, args in [
        ("agent.task_claim_step", {"step_id": "x"}),
        ("agent.task_query_steps", {}),
        ("agent.task_get", {}),
        ("agent.task_update_step", {"step_id": "x", "status": "running"}),
    ]:
        exc = await h.err(worker, tool, task_id="t2", **args)
        assert exc.code == ErrorCode.permission_denied, tool
    exc = await h.err(worker, "agent.task_query_steps", task_id="t1", worker_pool_id="other")
    assert exc.code == ErrorCode.permission_denied
    assert len(h.lines()) == n and statuses(h, "t2") == {"x": "ready"}
    got = await h.ok(worker, "agent.task_get", task_id="t1")  # whole dispatch Task, read-only view
    assert [s["step_id"] for s in got["steps"]] == ["s1", "s2", "p"]
    assert "updated_after_dispatch" not in got["steps"][0]
    pool_worker = h.worker("t1", pool="other", name="wp")
    query = await h.ok(pool_worker, "agent.task_query_steps", task_id="t1")
    assert [s["step_id"] for s in query["steps"]] == ["p"]


async def test_no_ready_step_ends_with_no_step_claimed(h: TaskHarness) -> None:
    """Case J8."""
    await create(h, step("a"), step("b", "a"), step("c", "a"))
    worker = h.worker("t1", allowed=["b", "c"])
    n = len(h.lines())
    query = await h.ok(worker, "agent.task_query_steps", task_id="t1")
    assert query["steps"] == [] and query["total"] == 0
    exc = await h.err(worker, "agent.task_claim_step", task_id="t1", step_id="b")
    assert exc.code == ErrorCode.step_not_ready
    end = await h.service.on_worker_run_end(
        worker.run_id, agent_id=worker.agent_id, task_id="t1", ending="completed", worker_agent_id="w1"
    )
    assert end.no_step_claimed is True and end.claimed_step_id is None and end.step_status is None
    assert len(h.lines()) == n
    skipped = [e for e in h.service_events if e.event_type == EventType.task_step_claim_skipped]
    assert [e.payload for e in skipped] == [
        {
            "task_id": "t1",
            "step_id": None,
            "code": "no_step_claimed",
            "worker_agent_id": "w1",
            "worker_run_id": worker.run_id,
        }
    ]


async def test_check_dispatchable(h: TaskHarness) -> None:
    """Case J19."""
    await create(h, step("s1"), step("s2", "s1"), step("p", worker_pool_id="other"))
    check = await h.service.check_dispatchable("t1", allowed_step_ids=["s2", "s2"])
    assert check.allowed_step_ids == ("s2",) and check.worker_pool_id == "default"
    assert (await h.service.check_dispatchable("t1")).allowed_step_ids is None
    for kwargs, code in [
        ({"allowed_step_ids": []}, ErrorCode.validation_error),
        ({"allowed_step_ids": ["zz"]}, ErrorCode.validation_error),
        ({"allowed_step_ids": ["p"]}, ErrorCode.permission_denied),
        ({"worker_pool_id": "nope"}, ErrorCode.validation_error),
    ]:
        with pytest.raises(AgentCoreError) as info:
            await h.service.check_dispatchable("t1", **kwargs)  # type: ignore[arg-type]
        assert info.value.code == code
    assert (
        await h.service.check_dispatchable("t1", worker_pool_id="other", allowed_step_ids=["p"])
    ).worker_pool_id == "other"
    with pytest.raises(AgentCoreError) as info:
        await h.service.check_dispatchable("nope")
    assert info.value.code == ErrorCode.task_not_found


async def test_worker_ready_query_defaults(h: TaskHarness) -> None:
    """Case J21."""
    await create(
        h, *(step(f"s{i}") for i in range(7)), step("blocked-by", "s0"), step("p", worker_pool_id="other")
    )
    worker = h.worker("t1")
    query = await h.ok(worker, "agent.task_query_steps", task_id="t1")
    assert [s["step_id"] for s in query["steps"]] == ["s0", "s1", "s2", "s3", "s4"]
    assert query["limit"] == 5 and query["total"] == 7 and query["has_more"] is True
    await claim(h, "s0", name="w2")
    query = await h.ok(worker, "agent.task_query_steps", task_id="t1", limit=10)
    assert [s["step_id"] for s in query["steps"]] == ["s1", "s2", "s3", "s4", "s5", "s6"]


async def test_orchestrator_query_filters(h: TaskHarness) -> None:
    """Case K37."""
    await create(h, *(step(f"s{i:02d}") for i in range(60)))
    orch = h.orchestrator()
    await h.ok(orch, "agent.task_update_step", task_id="t1", step_id="s05", status="blocked")
    await finish(h, "s01")
    await finish(h, "s02", "failed")
    w = await claim(h, "s03", name="w3")
    query = await h.ok(orch, "agent.task_query_steps", task_id="t1")
    assert query["limit"] == 50 and query["total"] == 58 and query["has_more"] and query["next_offset"] == 50
    ids = [s["step_id"] for s in query["steps"]]
    assert ids == sorted(ids) and "s01" not in ids and "s02" not in ids
    page2 = await h.ok(orch, "agent.task_query_steps", task_id="t1", offset=50)
    assert len(page2["steps"]) == 8 and page2["has_more"] is False and page2["next_offset"] is None
    both = await h.ok(orch, "agent.task_query_steps", task_id="t1", statuses=["ready", "blocked"], limit=200)
    assert {s["status"] for s in both["steps"]} == {"ready", "blocked"} and both["total"] == 57
    exc = await h.err(orch, "agent.task_query_steps", task_id="t1", statuses=["failed"])
    assert exc.code == ErrorCode.validation_error
    failed = await h.ok(
        orch, "agent.task_query_steps", task_id="t1", statuses=["failed"], include_terminal_steps=True
    )
    assert [s["step_id"] for s in failed["steps"]] == ["s02"]
    everything = await h.ok(
        orch, "agent.task_query_steps", task_id="t1", include_terminal_steps=True, limit=200
    )
    assert everything["total"] == 60
    mine = await h.ok(orch, "agent.task_query_steps", task_id="t1", claimed_by_agent_id=w.agent_id)
    assert [s["step_id"] for s in mine["steps"]] == ["s03"]
    pooled = await h.ok(orch, "agent.task_query_steps", task_id="t1", worker_pool_id="other")
    assert pooled["steps"] == []
    exc = await h.err(orch, "agent.task_query_steps", task_id="t1", limit=201)
    assert exc.code == ErrorCode.validation_error


async def test_claim_errors_write_nothing(h: TaskHarness) -> None:
    """Case K41."""
    await create(h, step("s1"), step("s2", "s1"))
    worker = h.worker("t1")
    n = len(h.lines())
    for step_id, code in [("s2", ErrorCode.step_not_ready), ("zz", ErrorCode.step_not_found)]:
        exc = await h.err(worker, "agent.task_claim_step", task_id="t1", step_id=step_id)
        assert exc.code == code
    ghost = h.worker("nope")
    exc = await h.err(ghost, "agent.task_claim_step", task_id="nope", step_id="s1")
    assert exc.code == ErrorCode.task_not_found
    assert len(h.lines()) == n
    codes = [e.payload["code"] for e in h.events(worker, EventType.task_step_claim_skipped)]
    assert codes == ["step_not_ready"]


async def test_single_writer_under_concurrent_updates(h: TaskHarness) -> None:
    """Case K45."""
    await create(h, step("a"), step("b"))
    wa, wb = await claim(h, "a"), await claim(h, "b", name="w2")
    n = len(h.lines())
    calls = [
        h.call(w, "agent.task_update_step", task_id="t1", step_id=s, result_summary=f"r{i}")
        for i in range(10)
        for w, s in ((wa, "a"), (wb, "b"))
    ]
    await asyncio.gather(*calls)
    raw = h.wal().read_text().splitlines()
    assert len(raw) == n + 20
    assert [x["wal_seq"] for x in h.lines()] == list(range(1, n + 21))
    assert all(x["event_type"] == "task_step_updated" for x in h.lines()[n:])
