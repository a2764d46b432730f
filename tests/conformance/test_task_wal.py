"""Conformance: the Task WAL (docs/task-board.md#wal-records) on both media — JSONL files (sqlite) and a table
(postgres)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_core._tasks.dag import Actor
from agent_core._tasks.decide import decide_claim
from agent_core._tasks.wal import WalWriter, replay_bytes
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import StepStatus, TaskStatus
from tests.conformance.task_wal_support import T0, create_records, make_pg_wal
from tests.fixtures.postgres_server import DSN_ENV

SID = "sess_conformance"
WORKER = Actor(agent_id="agent_w", run_id="run_w")


@pytest.fixture
def wal(backend: str, tmp_path: Path) -> Iterator[WalWriter]:
    writer = WalWriter(fsync=False) if backend == "sqlite" else make_pg_wal(DSN_ENV)
    yield writer
    close = getattr(writer, "close", None)
    if close is not None:
        close()


def _session_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tasks" / SID
    d.mkdir(parents=True)
    return d


def test_create_append_replay_and_export(wal: WalWriter, tmp_path: Path) -> None:
    session_dir = _session_dir(tmp_path)
    path = session_dir / "plan.wal.jsonl"
    created = create_records(SID, path, steps=3)
    wal.create(path, created)
    dag = wal.replay(path, session_id=SID, repair=True).dag
    claim = decide_claim(dag, "s0001", actor=WORKER, now=T0, lease_ms=60_000)
    wal.append(path, claim)
    outcome = wal.replay(path, session_id=SID, repair=True)
    assert outcome.records == len(created) + len(claim) and not outcome.torn_tail_truncated
    step = outcome.dag.step("s0001")
    assert step is not None and step.status == StepStatus.claimed
    assert outcome.dag.status == TaskStatus.running and outcome.dag.last_wal_seq == claim[-1].wal_seq
    exported = wal.export_jsonl(path)
    assert exported == b"".join(r.to_line() for r in created + claim)  # the JSONL form, byte for byte
    assert replay_bytes(exported, path, session_id=SID)[0].dag.last_wal_seq == outcome.dag.last_wal_seq
    assert wal.list_wal_files(session_dir) == [path] and wal.exists(path)
    assert wal.read_first_task_id(path) == "task-one"
    tail = wal.read_tail(path)
    assert tail.event_type == claim[-1].event_type and tail.terminal_status is None
    assert [e["wal_seq"] for e in wal.read_timeline(path)] == list(range(1, outcome.records + 1))
    assert wal.mtime_ns(path) > 0 and not wal.uncommitted_create(path)


def test_create_is_exclusive_and_remove_forgets(wal: WalWriter, tmp_path: Path) -> None:
    session_dir = _session_dir(tmp_path)
    path = session_dir / "x.wal.jsonl"
    wal.create(path, create_records(SID, path, steps=1))
    with pytest.raises(AgentCoreError) as info:
        wal.create(path, create_records(SID, path, steps=1, task_id="task-two"))
    assert info.value.code == ErrorCode.path_conflict
    other = session_dir / "y.wal.jsonl"
    wal.create(other, create_records(SID, other, steps=1, task_id="task-two"))
    assert wal.list_wal_files(session_dir) == [path, other]
    wal.remove(path)
    assert wal.list_wal_files(session_dir) == [other] and not wal.exists(path)
    assert wal.list_wal_files(session_dir.parent / "sess_other") == []


def test_records_after_sees_other_writers_only_on_shared_media(wal: WalWriter, tmp_path: Path) -> None:
    session_dir = _session_dir(tmp_path)
    path = session_dir / "shared.wal.jsonl"
    created = create_records(SID, path, steps=2)
    wal.create(path, created)
    if wal.SHARED:
        assert [r.wal_seq for r in wal.records_after(path, 1)] == [r.wal_seq for r in created[1:]]
    else:
        assert wal.records_after(path, 1) == []  # one writer per file: nothing to catch up with


async def test_cleanup_removes_terminal_wals_only(wal: WalWriter, tmp_path: Path) -> None:
    from agent_core._tasks.decide import decide_terminate
    from agent_core._tasks.wal_cleanup import cleanup_task_wals

    session_dir = _session_dir(tmp_path)
    done, running = session_dir / "done.wal.jsonl", session_dir / "running.wal.jsonl"
    wal.create(done, create_records(SID, done, steps=1, task_id="task-done"))
    wal.create(running, create_records(SID, running, steps=1, task_id="task-running"))
    dag = wal.replay(done, session_id=SID, repair=True).dag
    wal.append(done, decide_terminate(dag, "cancelled", "stop", actor=WORKER, now=T0))
    root = session_dir.parent
    dry = await cleanup_task_wals(root, dry_run=True, include_cancelled=True, writer=wal)
    assert [(c.id, c.reason) for c in dry.candidates] == [("task-done", "cancelled_task_wal")]
    assert dry.candidates[0].size_bytes == len(wal.export_jsonl(done)) and wal.exists(done)
    assert (await cleanup_task_wals(root, dry_run=True, writer=wal)).candidates == []  # needs the flag
    real = await cleanup_task_wals(root, dry_run=False, include_cancelled=True, writer=wal)
    assert [d.id for d in real.deleted] == ["task-done"] and not real.partial_failure
    assert wal.list_wal_files(session_dir) == [running]
