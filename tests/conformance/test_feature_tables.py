"""Conformance: pending approvals, background jobs and schedules on every backend."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from agent_core._ids import new_id
from agent_core._storage.approvals import ApprovalStore
from agent_core._storage.protocol import SessionStore
from agent_core._storage.writer import Txn
from agent_core.jobs._store import JobRecord, JobStore
from agent_core.schedules._store import ScheduleStore
from agent_core.types.base import format_ts
from agent_core.types.inbox import InboxEntry
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from tests.conformance.helpers import new_run, new_session


def _request(session_id: str, agent_id: str, run_id: str) -> PermissionRequest:
    return PermissionRequest(
        request_id=new_id("perm_"),
        session_id=session_id,
        agent_id=agent_id,
        run_id=run_id,
        agent_role="main",
        tool_name="code.run_command",
        permission="write",
        tags=[],
        args_summary="ls",
        cwd="/project",
        env_summary={},
        dangerous=False,
        suggested_decision="deny",
    )


async def test_approvals_first_answer_wins_and_expire(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    rid = await new_run(store, sid, aid)
    approvals = ApprovalStore(store)
    req, other = _request(sid, aid, rid), _request(sid, aid, rid)
    await approvals.insert(req)
    await approvals.insert(other)
    outcomes = await asyncio.gather(
        *(
            approvals.answer(req.request_id, PermissionDecision(decision=d))
            for d in ("allow_once", "deny") * 4
        )
    )
    assert sorted(outcomes) == ["answered"] * 7 + ["won"]
    row = await approvals.get(req.request_id)
    assert row is not None and row.status == "answered" and row.answer is not None
    assert row.answer.decision == "allow_once"
    assert await approvals.expire(run_id=rid) == 1
    assert await approvals.answer(other.request_id, PermissionDecision(decision="allow_once")) == "expired"
    assert await approvals.answer("perm_missing", PermissionDecision(decision="deny")) == "missing"
    assert [r.request_id for r in await approvals.list(("answered", "expired"))] == [
        req.request_id,
        other.request_id,
    ]
    assert await approvals.delete_session(sid) == 2


async def test_background_jobs_finish_once_and_deliver_once(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    rid = await new_run(store, sid, aid)
    jobs = JobStore(store)
    now = format_ts()
    job = JobRecord(
        job_id=new_id("job_"),
        session_id=sid,
        agent_id=aid,
        run_id=rid,
        tool_call_id="call_1",
        tool_name="code.run_command",
        status="running",
        created_at=now,
        updated_at=now,
    )
    await jobs.insert(job)
    assert await jobs.finish(job.job_id, "completed", summary="done") is True
    assert await jobs.finish(job.job_id, "failed") is False
    waiting = await jobs.undelivered(sid)
    assert [(j.job_id, j.status, j.delivered) for j in waiting] == [(job.job_id, "completed", False)]

    def mark(txn: Txn) -> bool:  # the inbox delivery's guard: delivered once
        return (
            txn.execute(
                "UPDATE background_jobs SET delivered = 1 WHERE job_id = ? AND delivered = 0", (job.job_id,)
            )
            > 0
        )

    entry = InboxEntry.model_validate(
        {
            "entry_id": new_id("inbox_"),
            "kind": "job_result",
            "from": "job:x",
            "content": "done",
            "created_at": datetime.now(UTC),
        }
    )
    delivered = await asyncio.gather(
        *(
            store.deliver_inbox(
                sid, aid, [entry.model_copy(update={"entry_id": new_id("inbox_")})], max_entries=9, guard=mark
            )
            for _ in range(3)
        )
    )
    assert sorted(delivered, key=str) == [1, None, None]
    assert await jobs.undelivered(sid) == []
    got = await jobs.get(job.job_id)
    assert got is not None and got.delivered is True


async def test_schedules_fire_each_due_time_once(store: SessionStore, tmp_path: Path) -> None:
    async def storage() -> SessionStore:
        return store

    schedules = ScheduleStore(storage)
    start = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    sched = await schedules.add(
        cron="*/5 * * * *", message="hi", project=tmp_path, session_id=None, now=start
    )
    assert [s.schedule_id for s in await schedules.list(tmp_path)] == [sched.schedule_id]
    later = datetime(2026, 1, 1, 13, 0, tzinfo=UTC)
    claims = await asyncio.gather(*(schedules.claim_due(sched, later) for _ in range(5)))
    assert sum(c is not None for c in claims) == 1
    await schedules.record_outcome(sched.schedule_id, session_id="sess_x", run_id="run_x")
    got = await schedules.get(sched.schedule_id)
    assert got is not None and got.last_run_id == "run_x" and got.next_due_at > later
    await schedules.remove(sched.schedule_id)
    assert await schedules.list() == []
