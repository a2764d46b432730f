"""Task WAL replay rejects exactly the lines a plain model-by-model replay rejects (same line, code and
message) and rebuilds the same state; the reference is the replay loop as it was before it was tuned."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_core._tasks.dag import IllegalTransition, TaskDag
from agent_core._tasks.models import parse_wal_event
from agent_core._tasks.wal import WalReplayError, replay_bytes
from agent_core.errors import AgentCoreError, ErrorCode

TS = "2026-06-12T15:30:00.000Z"
PAYLOADS: dict[str, dict[str, Any]] = {
    "task_running": {"previous_status": "pending", "status": "running", "reason": None},
    "task_reopened": {"previous_status": "blocked", "status": "pending", "reason": "again"},
    "task_completed": {"result_summary": "done", "cancelled_optional_step_ids": []},
    "task_failed": {"reason": None, "failed_step_ids": ["a"]},
    "task_cancelled": {"reason": "stop", "cancelled_step_ids": ["a", "b"]},
    "task_step_ready": {"previous_status": "pending", "status": "ready", "depends_on_step_ids": []},
    "task_step_claimed": {
        "previous_status": "ready",
        "claimed_by_agent_id": "agent_w",
        "claimed_by_run_id": "run_w",
        "lease_expires_at": TS,
    },
    "task_step_started": {"previous_status": "claimed", "status": "running", "lease_expires_at": TS},
    "task_step_updated": {
        "previous_status": "running",
        "status": "running",
        "result_summary": "half",
        "artifact_ids": ["art_1"],
        "lease_expires_at": TS,
    },
    "task_step_blocked": {
        "previous_status": "running",
        "reason": "waiting",
        "result_summary": None,
        "artifact_ids": [],
    },
    "task_step_completed": {"previous_status": "running", "result_summary": "ok", "artifact_ids": []},
    "task_step_failed": {
        "previous_status": "running",
        "reason": "boom",
        "result_summary": None,
        "artifact_ids": [],
    },
    "task_step_cancelled": {"previous_status": "ready", "reason": None, "result_summary": None},
    "task_step_reopened": {"previous_status": "failed", "status": "pending", "reason": None},
    "task_step_lease_expired": {
        "previous_status": "claimed",
        "claimed_by_agent_id": "agent_w",
        "claimed_by_run_id": "run_w",
        "expired_at": TS,
    },
}


def reference_replay(data: bytes, path: Path, session_id: str) -> TaskDag:
    """Replay through the record models only (the implementation before the dict validator)."""
    dag: TaskDag | None = None
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        task_id = dag.task_id if dag is not None else None
        try:
            event = parse_wal_event(line)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = "/".join(str(p) for p in first["loc"])
            raise WalReplayError(
                path, f"line {number} is invalid: {where}: {first['msg']}", task_id=task_id, line=number
            ) from exc
        try:
            if dag is None:
                if event.session_id != session_id:
                    raise IllegalTransition(message="record session_id differs from the directory session")
                dag = TaskDag.from_created(event, wal_path=str(path))
            else:
                dag.apply(event)
        except (AgentCoreError, ValueError) as exc:
            message = exc.message if isinstance(exc, AgentCoreError) else str(exc)
            raise WalReplayError(
                path, f"line {number}: {message}", task_id=task_id or event.task_id, line=number
            ) from exc
    assert dag is not None
    return dag


def _wal() -> list[dict[str, Any]]:
    common = {"session_id": "sess_1", "task_id": "t1", "created_at": TS}
    orch = {"actor_agent_id": "agent_o", "actor_run_id": "run_o"}
    step = {
        "step_id": "a",
        "title": "A",
        "summary": "Do A",
        "status": "pending",
        "depends_on_step_ids": [],
        "required": True,
        "worker_pool_id": None,
        "claimed_by_agent_id": None,
        "claimed_by_run_id": None,
        "lease_expires_at": None,
        "result_summary": None,
        "artifact_ids": [],
        "updated_at": TS,
    }
    task = {
        "task_id": "t1",
        "wal_path": "x.wal.jsonl",
        "title": "T",
        "summary": "S",
        "status": "pending",
        "root_step_ids": ["a", "b"],
        "steps": [step, step | {"step_id": "b", "title": "B"}],
        "created_by_agent_id": "agent_o",
        "created_by_run_id": "run_o",
        "created_at": TS,
        "updated_at": TS,
    }
    rows: list[dict[str, Any]] = [
        {**orch, "event_type": "task_created", "step_id": None, "payload": {"task": task}},
        {**orch, "event_type": "task_step_ready", "step_id": "a", "payload": PAYLOADS["task_step_ready"]},
        {**orch, "event_type": "task_running", "step_id": None, "payload": PAYLOADS["task_running"]},
        {"event_type": "task_step_claimed", "step_id": "a", "payload": PAYLOADS["task_step_claimed"]},
        {"event_type": "task_step_started", "step_id": "a", "payload": PAYLOADS["task_step_started"]},
        {"event_type": "task_step_updated", "step_id": "a", "payload": PAYLOADS["task_step_updated"]},
        {"event_type": "task_step_completed", "step_id": "a", "payload": PAYLOADS["task_step_completed"]},
    ]
    worker = {"actor_agent_id": "agent_w", "actor_run_id": "run_w"}
    return [
        {**common, **worker, **row, "wal_seq": n, "event_id": f"evt_{n}"} for n, row in enumerate(rows, 1)
    ]


CORRUPTIONS: list[tuple[int, dict[str, Any]]] = [
    (1, {"session_id": "sess_2"}),
    (1, {"wal_seq": 2}),
    (4, {"actor_run_id": None}),  # the record-level actor rule
    (4, {"actor_agent_id": "core"}),
    (5, {"wal_seq": 9}),
    (5, {"wal_seq": 0}),
    (5, {"session_id": "sess_2"}),
    (5, {"task_id": "t2"}),
    (5, {"step_id": "b"}),  # illegal: b was never claimed
    (5, {"step_id": "zz"}),
    (5, {"step_id": None}),
    (5, {"event_id": "evt-5"}),
    (5, {"created_at": "2026-06-12 15:30:00"}),
    (5, {"event_type": "task_step_blocked"}),
    (6, {"payload": PAYLOADS["task_step_updated"] | {"status": "claimed"}}),
    (6, {"payload": PAYLOADS["task_step_updated"] | {"lease_expires_at": None}}),
    (6, {"payload": PAYLOADS["task_step_updated"] | {"artifact_ids": None}}),
    (7, {"event_type": "task_step_reopened", "payload": PAYLOADS["task_step_reopened"]}),
    (2, {"event_type": "task_created"}),
    (3, {"payload": PAYLOADS["task_running"] | {"previous_status": "nope"}}),
]


@pytest.mark.parametrize("recent", [1, 64])
@pytest.mark.parametrize(("line", "change"), CORRUPTIONS)
def test_replay_rejects_a_bad_line_as_the_models_do(
    tmp_path: Path, line: int, change: dict[str, Any], recent: int
) -> None:
    rows = _wal()
    rows[line - 1] = rows[line - 1] | change
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    path = tmp_path / "x.wal.jsonl"
    with pytest.raises(WalReplayError) as expected:
        reference_replay(data, path, "sess_1")
    with pytest.raises(WalReplayError) as actual:
        replay_bytes(data, path, session_id="sess_1", recent=recent)
    assert actual.value.code == ErrorCode.task_wal_unavailable
    assert (actual.value.message, actual.value.details) == (expected.value.message, expected.value.details)
    assert actual.value.details["line"] == line


def test_a_valid_wal_replays_to_the_reference_state_and_recent_records(tmp_path: Path) -> None:
    data = b"".join(json.dumps(r).encode() + b"\n" for r in _wal())
    path = tmp_path / "x.wal.jsonl"
    outcome, _, _, _ = replay_bytes(data, path, session_id="sess_1", recent=3)
    assert outcome.dag.snapshot() == reference_replay(data, path, "sess_1").snapshot()
    assert [r.to_line() for r in outcome.recent] == [
        parse_wal_event(x).to_line() for x in data.split(b"\n")[4:7]
    ]
    assert [type(r).__name__ for r in outcome.recent] == [
        "StepStartedEvent",
        "StepUpdatedEvent",
        "StepCompletedEvent",
    ]


@pytest.mark.parametrize("bad", [False, True])
def test_replay_leaves_the_garbage_collector_alone(
    tmp_path: Path, bad: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replay never switches the host's collector off, not even while it builds the DAG (issue 35); also
    not on a bad line."""
    calls: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
        monkeypatch.setattr(gc, name, lambda *args, _name=name: calls.append(_name))
    rows = _wal()
    if bad:
        rows[4] = rows[4] | {"wal_seq": 9}
    data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
    if bad:
        with pytest.raises(WalReplayError):
            replay_bytes(data, tmp_path / "x.wal.jsonl", session_id="sess_1")
    else:
        replay_bytes(data, tmp_path / "x.wal.jsonl", session_id="sess_1")
    assert calls == []


def _data(rows: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def test_a_good_wal_takes_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The checked loop runs only when some line is bad (so the fast path cannot silently fall back)."""
    import agent_core._tasks.wal as wal

    def checked(*args: Any) -> Any:
        raise AssertionError("the checked loop ran for a good WAL")

    monkeypatch.setattr(wal, "_replay_lines", checked)
    data = _data(_wal())
    outcome, tail, torn, add_newline = replay_bytes(data, tmp_path / "x.wal.jsonl", session_id="sess_1")
    assert (outcome.records, tail, torn, add_newline) == (7, b"", False, False)


@pytest.mark.parametrize("last", ["torn", "unterminated", "none"])
def test_a_corrupt_middle_line_is_named_whatever_the_tail(tmp_path: Path, last: str) -> None:
    rows = _wal()
    rows[4] = rows[4] | {"created_at": "yesterday"}
    data = _data(rows)
    if last == "torn":
        data += b'{"wal_seq": 8, "sess'
    elif last == "unterminated":
        data += json.dumps(rows[6] | {"wal_seq": 8}).encode()
    path = tmp_path / "x.wal.jsonl"
    with pytest.raises(WalReplayError) as expected:
        reference_replay(data + (b"\n" if last == "unterminated" else b""), path, "sess_1")
    with pytest.raises(WalReplayError) as actual:
        replay_bytes(data, path, session_id="sess_1")
    assert (actual.value.message, actual.value.details) == (expected.value.message, expected.value.details)
    assert actual.value.details["line"] == 5


@pytest.mark.parametrize("blank", [b"", b"   ", b"\r"])
def test_a_blank_middle_line_is_rejected_as_before(tmp_path: Path, blank: bytes) -> None:
    lines = _data(_wal()).split(b"\n")
    data = b"\n".join([*lines[:3], blank, *lines[3:]])
    path = tmp_path / "x.wal.jsonl"
    with pytest.raises(WalReplayError) as expected:
        reference_replay(data, path, "sess_1")
    with pytest.raises(WalReplayError) as actual:
        replay_bytes(data, path, session_id="sess_1")
    assert (actual.value.message, actual.value.details) == (expected.value.message, expected.value.details)


def test_a_torn_last_line_is_set_apart_and_the_rest_replays(tmp_path: Path) -> None:
    good = _data(_wal())
    data = good + b'{"wal_seq": 8, "session_id": "se'
    path = tmp_path / "x.wal.jsonl"
    outcome, tail, torn, add_newline = replay_bytes(data, path, session_id="sess_1", recent=2)
    assert (tail, torn, add_newline) == (b'{"wal_seq": 8, "session_id": "se', True, False)
    assert outcome.records == 7
    assert outcome.dag.snapshot() == reference_replay(good, path, "sess_1").snapshot()
    assert [r.wal_seq for r in outcome.recent] == [6, 7]


def test_a_whole_unterminated_last_record_is_kept(tmp_path: Path) -> None:
    rows = _wal()
    data = _data(rows[:-1]) + json.dumps(rows[-1]).encode()
    path = tmp_path / "x.wal.jsonl"
    outcome, tail, torn, add_newline = replay_bytes(data, path, session_id="sess_1")
    assert (torn, add_newline, outcome.records) == (False, True, 7)
    assert tail == json.dumps(rows[-1]).encode()
    assert outcome.dag.snapshot() == reference_replay(data + b"\n", path, "sess_1").snapshot()


@pytest.mark.parametrize("data", [b"", b"\n", b'{"wal_seq": 1, "sess'])
def test_no_complete_record_is_reported_as_before(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "x.wal.jsonl"
    with pytest.raises(WalReplayError) as actual:
        replay_bytes(data, path, session_id="sess_1")
    if data == b"\n":
        with pytest.raises(WalReplayError) as expected:
            reference_replay(data, path, "sess_1")
        assert actual.value.message == expected.value.message
    else:
        assert "no complete record" in actual.value.message
