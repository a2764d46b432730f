"""Property test: random valid and invalid Task operations keep the DAG invariants, and replaying the
resulting WAL reproduces the live DAG exactly (full snapshot equality)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_core._tasks import TaskDag, replay_wal
from agent_core._tasks.dag import find_cycle
from agent_core._tasks.models import HELD_STEP_STATUSES
from agent_core.errors import AgentCoreError
from agent_core.types.base import parse_ts
from agent_core.types.enums import StepStatus, TaskStatus
from tests.fixtures.task_harness import ManualClock, TaskHarness, step

NEW_IDS = [f"n{i}" for i in range(6)]
idx = st.integers(0, 30)
idxs = st.lists(idx, max_size=2)

patch_op = st.one_of(
    st.tuples(st.just("add_step"), st.sampled_from(NEW_IDS), idxs),
    st.tuples(st.just("delete_step"), idx),
    st.tuples(st.just("add_dependency"), idx, idx),
    st.tuples(st.just("remove_dependency"), idx, idx),
    st.tuples(st.just("cancel_step"), idx),
    st.tuples(st.just("reopen_step"), idx),
    st.tuples(st.just("update_deps"), idx, idxs, st.booleans()),
    st.tuples(st.just("rename"), idx),
    st.tuples(st.just("update_task"), st.sampled_from(["blocked", "pending"])),
)
worker_statuses = st.sampled_from(
    [
        None,
        "running",
        "running",
        "completed",
        "completed",
        "completed",
        "failed",
        "blocked",
        "cancelled",
        "claimed",
    ]
)
orch_statuses = st.sampled_from([None, "blocked", "cancelled", "failed", "completed", "pending", "running"])

operation = st.one_of(
    st.tuples(st.just("patch"), st.lists(patch_op, min_size=1, max_size=3)),
    st.tuples(st.just("patch"), st.lists(patch_op, min_size=1, max_size=1)),
    st.tuples(st.just("claim"), st.integers(0, 3), idx),
    st.tuples(st.just("claim"), st.integers(0, 3), idx),
    st.tuples(st.just("worker_update"), st.integers(0, 3), worker_statuses, st.booleans()),
    st.tuples(st.just("worker_update"), st.integers(0, 3), worker_statuses, st.booleans()),
    st.tuples(st.just("orch_update"), idx, orch_statuses),
    st.tuples(st.just("advance"), st.integers(0, 1500)),
    st.tuples(st.just("query"), st.booleans()),
    st.tuples(st.just("run_end"), st.integers(0, 3), st.sampled_from(["completed", "cancelled", "timeout"])),
    st.tuples(st.just("new_run"), st.integers(0, 3)),
    st.tuples(st.just("complete"), st.booleans()),
    st.tuples(st.just("reopen_any"), idx, st.booleans()),
    st.tuples(st.just("task_status"), st.sampled_from(["blocked", "pending"])),
)
final = st.sampled_from([None, None, "agent.task_fail", "agent.task_cancel"])
initial = st.lists(st.lists(st.integers(0, 6), max_size=2), min_size=2, max_size=6)


def materialize(spec: tuple[Any, ...], dag: TaskDag) -> dict[str, Any]:
    """Turns an index-based patch op into a concrete op against the current steps (may stay invalid)."""
    ids = [s.step_id for s in dag.steps()] or ["s0"]

    def pick(i: int) -> str:
        return ids[i % len(ids)]

    kind = spec[0]
    if kind == "add_step":
        return {"op": "add_step", "step": step(spec[1], *dict.fromkeys(pick(i) for i in spec[2]))}
    if kind in ("delete_step", "cancel_step", "reopen_step"):
        return {"op": kind, "step_id": pick(spec[1])}
    if kind == "add_dependency":
        return {"op": kind, "step_id": pick(spec[1]), "depends_on_step_id": pick(spec[2])}
    if kind == "remove_dependency":
        target = dag.step(pick(spec[1]))
        deps = target.depends_on_step_ids if target is not None else []
        dep = deps[spec[2] % len(deps)] if deps else pick(spec[2])
        return {"op": kind, "step_id": pick(spec[1]), "depends_on_step_id": dep}
    if kind == "update_deps":
        deps = list(dict.fromkeys(pick(i) for i in spec[2]))
        return {
            "op": "update_step",
            "step_id": pick(spec[1]),
            "fields": {"depends_on_step_ids": deps, "required": spec[3]},
        }
    if kind == "rename":
        return {"op": "update_step", "step_id": pick(spec[1]), "fields": {"title": "renamed"}}
    return {"op": "update_task", "status": spec[1]}


def check_invariants(dag: TaskDag) -> None:
    steps = {s.step_id: s for s in dag.steps()}
    assert len(steps) == len(dag.steps())
    for s in dag.steps():
        assert all(d in steps for d in s.depends_on_step_ids)
        assert len(set(s.depends_on_step_ids)) == len(s.depends_on_step_ids)
        held = s.status in HELD_STEP_STATUSES
        assert (s.lease_expires_at is not None) == held
        if held:
            assert s.claimed_by_run_id and s.claimed_by_agent_id
            assert dag.run_claims.get(s.claimed_by_run_id) == s.step_id
            assert dag.deps_completed(s) or s.metadata.get("updated_after_dispatch")
            assert s.metadata["dispatch_snapshot"]["title"]
        else:
            assert s.metadata == {}
        if s.status in (StepStatus.pending, StepStatus.ready, StepStatus.blocked):
            assert s.claimed_by_run_id is None and s.claimed_by_agent_id is None
        if s.status == StepStatus.ready:
            assert dag.deps_completed(s)
        if s.status == StepStatus.pending and dag.status in (TaskStatus.pending, TaskStatus.running):
            assert not dag.deps_completed(s), f"{s.step_id} should have been advanced to ready"
    if dag.status == TaskStatus.pending:
        assert not any(s.status in (StepStatus.ready, *HELD_STEP_STATUSES) for s in dag.steps())
    assert find_cycle(dag.steps()) is None
    assert dag.task.root_step_ids == [s.step_id for s in dag.steps() if not s.depends_on_step_ids]
    assert len(set(dag.run_claims.values())) <= len(dag.run_claims)


async def scenario(root: Path, shape: list[list[int]], ops: list[tuple[Any, ...]], last: str | None) -> None:
    h = TaskHarness(project=root, session_id="sess_prop", clock=ManualClock(), lease_ms=1000)
    orch = h.orchestrator()
    steps = [step(f"s{i}", *sorted({f"s{d}" for d in deps if d < i})) for i, deps in enumerate(shape)]
    await h.ok(orch, "agent.task_create", task_id="t1", wal_name="work", title="T", summary="S", steps=steps)
    workers = [h.worker("t1", name=f"w{i}") for i in range(4)]
    for op in [*ops, ("final", last)]:
        kind = op[0]
        dags = h.service.active_dags()
        if not dags:
            break
        dag = dags[0]
        ids = [s.step_id for s in dag.steps()] or ["s0"]
        try:
            if kind == "patch":
                patch = [materialize(spec, dag) for spec in op[1]]
                await h.call(orch, "agent.task_update", task_id="t1", operations=patch)
            elif kind == "claim":
                ready = [s.step_id for s in dag.steps() if s.status == StepStatus.ready] or ids
                target = ready[op[2] % len(ready)]
                await h.call(workers[op[1]], "agent.task_claim_step", task_id="t1", step_id=target)
            elif kind == "worker_update":
                holders = [w for w in workers if any(s.claimed_by_run_id == w.run_id for s in dag.steps())]
                w = holders[op[1] % len(holders)] if holders else workers[op[1]]
                held = [s for s in dag.steps() if s.claimed_by_run_id == w.run_id]
                target = held[0].step_id if held else ids[0]
                extra = {"result_summary": "r"} if op[3] or op[2] is None else {}
                if op[2] is not None:
                    extra["status"] = op[2]
                await h.call(w, "agent.task_update_step", task_id="t1", step_id=target, **extra)
            elif kind == "orch_update":
                extra = {"status": op[2]} if op[2] is not None else {"result_summary": "note"}
                await h.call(
                    orch, "agent.task_update_step", task_id="t1", step_id=ids[op[1] % len(ids)], **extra
                )
            elif kind == "advance":
                h.clock.advance(op[1])
            elif kind == "query":
                tool = "agent.task_query_steps" if op[1] else "agent.task_get"
                await h.call(orch, tool, task_id="t1")
            elif kind == "run_end":
                w = workers[op[1]]
                await h.service.on_worker_run_end(w.run_id, agent_id=w.agent_id, task_id="t1", ending=op[2])
            elif kind == "new_run":
                workers[op[1]] = h.worker("t1", name=f"w{op[1]}")
            elif kind == "reopen_any":
                closed = [
                    s.step_id for s in dag.steps() if s.status in (StepStatus.blocked, StepStatus.failed)
                ]
                target = closed[op[1] % len(closed)] if closed else ids[0]
                if op[2]:
                    patch = [{"op": "reopen_step", "step_id": target, "reason": "again"}]
                    await h.call(orch, "agent.task_update", task_id="t1", operations=patch)
                else:
                    await h.call(
                        orch, "agent.task_update_step", task_id="t1", step_id=target, status="pending"
                    )
            elif kind == "task_status":
                patch = [{"op": "update_task", "status": op[1], "title": "retitled"}]
                await h.call(orch, "agent.task_update", task_id="t1", operations=patch)
            elif kind == "complete":
                await h.call(orch, "agent.task_complete", task_id="t1")
            elif kind == "final" and op[1] is not None:
                await h.call(orch, op[1], task_id="t1", reason="stop")
        except AgentCoreError:
            pass
        dags = h.service.active_dags()
        if dags:
            check_invariants(dags[0])
    live = h.service.active_dags()
    if live:
        live_dag = live[0]
    else:
        tomb = h.service.store.tombstones["t1"]
        assert tomb.dag is not None
        live_dag = tomb.dag
    lines = h.wal().read_text().splitlines()
    assert [int(x.split(",")[0].split(":")[1]) for x in lines] == list(range(1, len(lines) + 1))
    replayed = replay_wal(h.wal(), session_id="sess_prop", repair=False).dag
    assert replayed.snapshot() == live_dag.snapshot()
    assert live_dag.last_wal_seq == len(lines)
    # A restarted service rebuilds the same active DAG (terminal Tasks are not restored).
    service = h.restart()
    await service.load()
    restored = service.active_dags()
    if live_dag.task.terminal:
        assert restored == []
    else:
        before = live_dag.snapshot()
        after = restored[0].snapshot()
        # Restore may append lease-expiry records (the clock is the same, so only already-expired leases).
        expired = [
            s.step_id
            for s in live_dag.steps()
            if s.lease_expires_at and parse_ts(s.lease_expires_at) < h.clock.now
        ]
        if not expired:
            assert after == before


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=initial, ops=st.lists(operation, min_size=8, max_size=30), last=final)
def test_random_operations_keep_invariants_and_replay_reproduces_live_dag(
    shape: list[list[int]], ops: list[tuple[Any, ...]], last: str | None
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp).resolve(), shape, ops, last))
