"""Task WAL durability: append failures, replay after restart, torn tails, corrupt lines, inspect,
cleanup and replay speed (cases K20, K43, K44; docs/testing.md; docs/task-board.md; docs/storage.md)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from agent_core._tasks import replay_wal
from agent_core._tasks import wal as wal_mod
from agent_core._tasks.wal import WalReplayError
from agent_core._tasks.wal_cleanup import cleanup_task_wals
from agent_core.errors import ErrorCode
from agent_core.types.enums import EventType
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, statuses, step


@pytest.fixture
def h(tmp_path: Path) -> TaskHarness:
    return TaskHarness(project=tmp_path.resolve(), session_id="sess_wal", clock=ManualClock(), lease_ms=1000)


def fail_writes(monkeypatch: pytest.MonkeyPatch, *, truncate_fails: bool = False) -> list[int]:
    """Makes the next low-level WAL write write half its bytes and raise ``OSError``."""
    calls: list[int] = []

    def broken(fd: int, data: bytes, fsync: bool) -> None:
        calls.append(len(data))
        os.write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wal_mod, "write_and_sync", broken)
    if truncate_fails:

        def no_truncate(fd: int, size: int) -> None:
            raise OSError(5, "I/O error")

        monkeypatch.setattr(wal_mod.os, "ftruncate", no_truncate)
    return calls


async def test_append_failure_leaves_memory_and_file_unchanged(
    h: TaskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case K43."""
    await create(h, step("a"), step("b", "a"))
    worker = await claim(h, "a")
    before = h.service.active_dags()[0].snapshot()
    size = h.wal().stat().st_size
    calls = fail_writes(monkeypatch)
    sink = h.sink_for(worker)
    n_events = len(sink.events)
    exc = await h.err(worker, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    assert exc.code == ErrorCode.storage_error and calls
    assert h.service.active_dags()[0].snapshot() == before
    assert h.wal().stat().st_size == size
    new = sink.events[n_events:]
    assert [e.event_type for e in new] == [EventType.task_wal_failed]
    assert new[0].payload["phase"] == "append" and new[0].payload["task_id"] == "t1"
    assert new[0].payload["error"]["code"] == "storage_error" and new[0].payload["error"]["redacted"] is True
    monkeypatch.undo()
    await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    assert [x["wal_seq"] for x in h.lines()] == list(range(1, len(h.lines()) + 1))
    assert statuses(h) == {"a": "completed", "b": "ready"}


async def test_failed_truncation_makes_the_task_unavailable(
    h: TaskHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case K43."""
    await create(h, step("a"))
    await create(h, step("x"), task_id="t2", wal_name="two")
    fail_writes(monkeypatch, truncate_fails=True)
    exc = await h.err(
        h.orchestrator(), "agent.task_update", task_id="t1", operations=[{"op": "update_task", "title": "x"}]
    )
    assert exc.code == ErrorCode.storage_error
    monkeypatch.undo()
    exc = await h.err(h.orchestrator(), "agent.task_get", task_id="t1")
    assert exc.code == ErrorCode.task_wal_unavailable
    await h.ok(
        h.orchestrator(), "agent.task_update", task_id="t2", operations=[{"op": "update_task", "title": "y"}]
    )


async def test_create_failure_leaves_no_file(h: TaskHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case K43."""
    fail_writes(monkeypatch)
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a")],
    )
    assert exc.code == ErrorCode.storage_error
    assert not h.wal().exists() and h.service.active_dags() == []
    failed = h.events(h.orchestrator(), EventType.task_wal_failed)
    assert failed and failed[0].payload["phase"] == "append"
    monkeypatch.undo()
    await create(h, step("a"))


async def test_replay_after_restart_reproduces_the_dag(h: TaskHarness, tmp_path: Path) -> None:
    """Case K20."""
    h.artifacts.add("artifact_1")
    await create(h, step("a"), step("b", "a"), step("c"), step("d"), step("e"))
    await update_ops(
        h,
        {"op": "add_step", "step": step("f", "c")},
        {"op": "update_step", "step_id": "e", "fields": {"summary": "changed"}},
    )
    await finish(h, "a", result_summary="A done", artifact_ids=["artifact_1"])
    wb = await claim(h, "b")
    await h.ok(
        wb, "agent.task_update_step", task_id="t1", step_id="b", status="running", result_summary="half"
    )
    wc = await claim(h, "c")
    await h.ok(wc, "agent.task_update_step", task_id="t1", step_id="c", status="blocked", reason="stuck")
    await update_ops(h, {"op": "reopen_step", "step_id": "c"})
    await claim(h, "d")
    h.clock.advance(2000)
    await h.ok(h.orchestrator(), "agent.task_query_steps", task_id="t1")  # d and b leases expire
    wd = await claim(h, "d", name="w9")
    await h.ok(wd, "agent.task_update_step", task_id="t1", step_id="d", status="running")
    await update_ops(h, {"op": "update_step", "step_id": "d", "fields": {"title": "edited after dispatch"}})
    types = set(h.types())
    assert {
        "task_step_started",
        "task_step_blocked",
        "task_step_reopened",
        "task_step_completed",
        "task_step_lease_expired",
        "task_updated",
    } <= types
    live = h.service.active_dags()[0].snapshot()
    # A fresh process with no SQLite database anywhere: replay uses only the WAL.
    assert not list(tmp_path.rglob("*.sqlite*"))
    service = h.restart()
    await service.load()
    assert service.active_dags()[0].snapshot() == live
    # The same WAL copied into another project replays identically (c38).
    other = tmp_path / "elsewhere" / ".soong-agent" / "tasks" / "sess_wal"
    other.mkdir(parents=True)
    shutil.copy(h.wal(), other / "work.wal.jsonl")
    copy = replay_wal(other / "work.wal.jsonl", session_id="sess_wal", repair=False).dag.snapshot()
    copy["task"]["wal_path"] = live["task"]["wal_path"]
    assert copy == live


async def update_ops(h: TaskHarness, *ops: dict[str, Any]) -> None:
    await h.ok(h.orchestrator(), "agent.task_update", task_id="t1", operations=list(ops))


async def test_torn_tail_is_truncated(h: TaskHarness) -> None:
    await create(h, step("a"))
    await claim(h, "a")
    good = h.wal().read_bytes()
    h.wal().write_bytes(good + b'{"wal_seq":6,"session_id":"sess_wal","event_id":"evt_x","event_ty')
    service = h.restart()
    await service.load()
    replayed = [e for e in h.service_events if e.event_type == EventType.task_wal_replayed]
    assert replayed[0].payload == {
        "task_id": "t1",
        "wal_path": str(h.wal()),
        "records": 4,
        "last_wal_seq": 4,
        "torn_tail_truncated": True,
    }
    assert h.wal().read_bytes() == good
    assert statuses(h) == {"a": "claimed"}
    await h.ok(
        h.orchestrator(), "agent.task_update", task_id="t1", operations=[{"op": "update_task", "title": "x"}]
    )
    assert h.lines()[-1]["wal_seq"] == 5


async def test_unterminated_but_complete_tail_is_kept(h: TaskHarness) -> None:
    await create(h, step("a"))
    await claim(h, "a")
    h.wal().write_bytes(h.wal().read_bytes()[:-1])
    service = h.restart()
    await service.load()
    assert h.wal().read_bytes().endswith(b"}\n") and statuses(h) == {"a": "claimed"}
    assert h.service_events[0].payload["torn_tail_truncated"] is False


@pytest.mark.parametrize(
    "corruption",
    ["not json", "unknown_type", "seq_gap", "other_session", "illegal", "extra_field", "empty_line"],
)
async def test_corrupt_middle_line_makes_only_that_task_unavailable(h: TaskHarness, corruption: str) -> None:
    """Case K44."""
    await create(h, step("a"), step("b"))
    await claim(h, "a")
    await create(h, step("x"), task_id="t2", wal_name="zz-other")
    lines = h.wal().read_text().splitlines()
    record = json.loads(lines[2])
    if corruption == "not json":
        lines[2] = "{not json"
    elif corruption == "unknown_type":
        record["event_type"] = "task_exploded"
        lines[2] = json.dumps(record)
    elif corruption == "seq_gap":
        record["wal_seq"] = 9
        lines[2] = json.dumps(record)
    elif corruption == "other_session":
        record["session_id"] = "sess_other"
        lines[2] = json.dumps(record)
    elif corruption == "illegal":
        lines[2] = lines[4]  # a claim before the steps are ready / wrong sequence
        record = json.loads(lines[4])
        record["wal_seq"] = 3
        lines[2] = json.dumps(record)
    elif corruption == "extra_field":
        record["note"] = "x"
        lines[2] = json.dumps(record)
    else:
        lines[2] = ""
    h.wal().write_text("\n".join(lines) + "\n")
    service = h.restart()
    views = await service.load()
    failed = [e for e in h.service_events if e.event_type == EventType.task_wal_failed]
    assert len(failed) == 1 and failed[0].payload["phase"] == "replay"
    assert (
        failed[0].payload["wal_path"] == str(h.wal())
        and failed[0].payload["error"]["code"] == "task_wal_unavailable"
    )
    assert failed[0].actor.agent_id == "core"
    broken = next(v for v in views if v.wal_path == str(h.wal()))
    assert (
        broken.task is None
        and broken.error is not None
        and broken.error.code == ErrorCode.task_wal_unavailable
    )
    assert [d.task_id for d in service.active_dags()] == ["t2"]
    if corruption not in ("not json", "empty_line"):
        exc = await h.err(h.orchestrator(), "agent.task_get", task_id="t1")
        assert exc.code == ErrorCode.task_wal_unavailable and exc.details["error"]
        w = h.worker("t1")
        exc = await h.err(w, "agent.task_claim_step", task_id="t1", step_id="b")
        assert exc.code == ErrorCode.task_wal_unavailable
    await h.ok(
        h.orchestrator(), "agent.task_update", task_id="t2", operations=[{"op": "update_task", "title": "y"}]
    )
    listed = await h.ok(h.orchestrator(), "agent.task_list")
    entry = next(t for t in listed["tasks"] if t.get("error_code"))
    assert entry["wal_path"] == str(h.wal()) and entry["error_code"] == "task_wal_unavailable"
    views = await service.inspect_views()
    assert [(v.task_id, v.error.code if v.error else None) for v in views][1] == ("t2", None)
    assert views[0].error is not None and views[0].error.code == ErrorCode.task_wal_unavailable
    assert views[0].wal_events[0]["event_type"] == "task_created"


async def test_second_active_wal_with_the_same_task_id_fails(h: TaskHarness) -> None:
    await create(h, step("a"))
    shutil.copy(h.wal(), h.session_dir / "work2.wal.jsonl")
    service = h.restart()
    await service.load()
    assert [d.task_id for d in service.active_dags()] == ["t1"]
    failed = [e for e in h.service_events if e.event_type == EventType.task_wal_failed]
    assert [e.payload["wal_path"] for e in failed] == [str(h.session_dir / "work2.wal.jsonl")]


async def test_replay_rejects_structural_errors(tmp_path: Path) -> None:
    h = TaskHarness(project=tmp_path.resolve(), session_id="sess_struct", clock=ManualClock())
    await create(h, step("a"), step("b"))
    lines = h.lines()
    bad = json.loads(json.dumps(lines[0]))
    bad["payload"]["task"]["steps"][0]["depends_on_step_ids"] = ["b"]
    bad["payload"]["task"]["steps"][1]["depends_on_step_ids"] = ["a"]
    path = h.session_dir / "cyc.wal.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(WalReplayError) as info:
        replay_wal(path, session_id="sess_struct", repair=False)
    assert info.value.code == ErrorCode.task_wal_unavailable and info.value.details["line"] == 1
    path.write_text(json.dumps(lines[1]) + "\n")
    with pytest.raises(WalReplayError):
        replay_wal(path, session_id="sess_struct", repair=False)


async def test_inspect_views_cover_active_and_terminal(h: TaskHarness) -> None:
    await create(h, step("a"), task_id="done", wal_name="a-done")
    await h.ok(h.orchestrator(), "agent.task_cancel", task_id="done")
    await create(h, step("a"), step("b"))
    w = await claim(h, "a")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", status="running")
    await update_ops(h, {"op": "update_step", "step_id": "a", "fields": {"summary": "now different"}})
    views = await h.service.inspect_views()
    assert [(v.task_id, v.status) for v in views] == [("done", "cancelled"), ("t1", "running")]
    assert views[0].task is not None and views[0].task["read_only"] is True
    assert [e["event_type"] for e in views[0].wal_events][-1] == "task_cancelled"
    step_a = next(s for s in views[1].task["steps"] if s["step_id"] == "a")  # type: ignore[index]
    assert step_a["summary"] == "now different"
    assert step_a["metadata"]["dispatch_snapshot"]["summary"] == "Do a"
    assert step_a["metadata"]["updated_after_dispatch"] is True
    assert len(views[1].wal_events) == len(h.lines())
    assert h.service.active_wal_paths() == [h.wal()]


async def test_cleanup_of_the_wals_the_service_writes(h: TaskHarness) -> None:
    await create(h, step("a"), task_id="c1", wal_name="completed")
    await finish(h, "a", task_id="c1")
    await h.ok(h.orchestrator(), "agent.task_complete", task_id="c1")
    await create(h, step("a"), task_id="f1", wal_name="failed")
    await h.ok(h.orchestrator(), "agent.task_fail", task_id="f1")
    await create(h, step("a"), task_id="x1", wal_name="cancelled")
    await h.ok(h.orchestrator(), "agent.task_cancel", task_id="x1")
    await create(h, step("a"), task_id="live", wal_name="active")
    root, active = h.service.wal_root, h.service.active_wal_paths()
    dry = await cleanup_task_wals(root, active_wal_paths=active)
    assert dry.dry_run is True and [c.id for c in dry.candidates] == ["c1"] and dry.deleted == []
    assert h.wal("completed").exists()
    both = await cleanup_task_wals(root, include_failed=True, include_cancelled=True, active_wal_paths=active)
    assert sorted(c.id or "" for c in both.candidates) == ["c1", "f1", "x1"]
    real = await cleanup_task_wals(root, dry_run=False, include_failed=True, active_wal_paths=active)
    assert sorted(c.id or "" for c in real.deleted) == ["c1", "f1"]
    assert h.wal("cancelled").exists() and h.wal("active").exists()
    # The service still resolves the remaining Tasks afterwards.
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="x1")
    assert got["read_only"] is True
    exc = await h.err(h.orchestrator(), "agent.task_get", task_id="zz")
    assert exc.code == ErrorCode.task_not_found


def _benchmark_wal(path: Path, session_id: str, updates: int) -> None:
    created = {
        "wal_seq": 1,
        "session_id": session_id,
        "event_id": "evt_0",
        "event_type": "task_created",
        "actor_agent_id": "agent_o",
        "actor_run_id": "run_o",
        "task_id": "bench",
        "step_id": None,
        "payload": {
            "task": {
                "task_id": "bench",
                "wal_path": str(path),
                "title": "B",
                "summary": "B",
                "status": "pending",
                "root_step_ids": ["s"],
                "steps": [
                    {
                        "step_id": "s",
                        "title": "S",
                        "summary": "S",
                        "status": "pending",
                        "depends_on_step_ids": [],
                        "required": True,
                        "worker_pool_id": None,
                        "claimed_by_agent_id": None,
                        "claimed_by_run_id": None,
                        "lease_expires_at": None,
                        "result_summary": None,
                        "artifact_ids": [],
                        "updated_at": "2026-06-12T15:30:00.000Z",
                    }
                ],
                "created_by_agent_id": "agent_o",
                "created_by_run_id": "run_o",
                "created_at": "2026-06-12T15:30:00.000Z",
                "updated_at": "2026-06-12T15:30:00.000Z",
            }
        },
        "created_at": "2026-06-12T15:30:00.000Z",
    }
    head = [
        created,
        {
            "event_type": "task_step_ready",
            "step_id": "s",
            "payload": {"previous_status": "pending", "status": "ready", "depends_on_step_ids": []},
        },
        {
            "event_type": "task_running",
            "step_id": None,
            "payload": {"previous_status": "pending", "status": "running", "reason": "auto_advance"},
        },
        {
            "event_type": "task_step_claimed",
            "step_id": "s",
            "actor_agent_id": "agent_w",
            "actor_run_id": "run_w",
            "payload": {
                "previous_status": "ready",
                "claimed_by_agent_id": "agent_w",
                "claimed_by_run_id": "run_w",
                "lease_expires_at": "2026-06-12T15:35:00.000Z",
            },
        },
    ]
    common = {
        "session_id": session_id,
        "actor_agent_id": "agent_o",
        "actor_run_id": "run_o",
        "task_id": "bench",
        "created_at": "2026-06-12T15:30:00.000Z",
    }
    with path.open("w") as fh:
        for seq, record in enumerate(head, start=1):
            fh.write(json.dumps({**common, "wal_seq": seq, "event_id": f"evt_{seq}", **record}) + "\n")
        template = json.dumps(
            {
                **common,
                "actor_agent_id": "agent_w",
                "actor_run_id": "run_w",
                "wal_seq": 0,
                "event_id": "evt_@",
                "event_type": "task_step_updated",
                "step_id": "s",
                "payload": {
                    "previous_status": "claimed",
                    "status": "claimed",
                    "result_summary": "progress",
                    "artifact_ids": [],
                    "lease_expires_at": "2026-06-12T15:35:00.000Z",
                },
            }
        )
        first, rest = template.split('"wal_seq": 0')
        for seq in range(len(head) + 1, len(head) + 1 + updates):
            fh.write(first + f'"wal_seq": {seq}' + rest.replace("evt_@", f"evt_{seq}") + "\n")


async def test_replay_scales_linearly(tmp_path: Path) -> None:
    path = tmp_path / "bench.wal.jsonl"
    _benchmark_wal(path, "sess_bench", 5_000)
    outcome = replay_wal(path, session_id="sess_bench", repair=False)
    assert outcome.records == 5_004 and outcome.dag.last_wal_seq == 5_004
    assert outcome.dag.step("s").status.value == "claimed"  # type: ignore[union-attr]


@pytest.mark.slow
async def test_replay_of_100k_lines_benchmark(tmp_path: Path) -> None:
    path = tmp_path / "bench.wal.jsonl"
    _benchmark_wal(path, "sess_bench", 100_000 - 4)
    start, cpu = time.perf_counter(), time.process_time()
    outcome = replay_wal(path, session_id="sess_bench", repair=False)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"replayed {outcome.records} WAL lines in {elapsed:.3f} s wall, {cpu:.3f} s CPU")
    assert outcome.records == 100_000
    assert elapsed < 3.0


async def test_default_writer_fsyncs_every_commit(h: TaskHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        synced.append(fd)
        real(fd)

    monkeypatch.setattr(wal_mod.os, "fsync", counting)
    h.service = h.new_service(writer=wal_mod.WalWriter())
    await create(h, step("a"), step("b"))
    await claim(h, "a")
    assert len(synced) == 2  # one create commit, one claim commit


async def test_secret_values_never_reach_the_wal(h: TaskHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEPLOY_TOKEN", "s3cr3t-value-123456")
    await create(h, step("a"), summary="use s3cr3t-value-123456 to deploy")
    worker = await claim(h, "a")
    await h.ok(
        worker,
        "agent.task_update_step",
        task_id="t1",
        step_id="a",
        result_summary="token s3cr3t-value-123456",
    )
    raw = h.wal().read_text()
    assert "s3cr3t-value-123456" not in raw and raw.count("[REDACTED]") == 2
