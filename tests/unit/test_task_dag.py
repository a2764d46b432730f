"""The pure Task DAG: decisions return records without touching the DAG, and ``apply`` (shared by replay
and the live path) rejects every record that is illegal in the current state
(docs/task-board.md#restore-and-replay, docs/task-board.md#status-model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_core._tasks.dag import Actor, IllegalTransition, TaskDag, find_cycle
from agent_core._tasks.decide import (
    decide_claim,
    decide_complete,
    decide_create,
    decide_heal,
    decide_lease_expiry,
    decide_run_end,
    decide_terminate,
    decide_update_step,
)
from agent_core._tasks.inputs import StepInput, TaskUpdateInput, TaskUpdateStepInput
from agent_core._tasks.models import TaskStep, TaskWalEvent, make_wal_event, parse_wal_event
from agent_core._tasks.patch import decide_update
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import StepStatus, TaskStatus

NOW = datetime(2026, 6, 12, 15, 30, tzinfo=UTC)
ORCH = Actor(agent_id="agent_o", run_id="run_o")
W1 = Actor(agent_id="agent_w", run_id="run_w1")
W2 = Actor(agent_id="agent_w", run_id="run_w2")


def steps(*spec: tuple[str, list[str]]) -> list[StepInput]:
    return [StepInput(step_id=s, title=s, summary=s, depends_on_step_ids=d) for s, d in spec]


def new_dag(*spec: tuple[str, list[str]]) -> TaskDag:
    records = decide_create(
        session_id="sess_u",
        task_id="t1",
        wal_path="/w",
        title="T",
        summary="S",
        steps=steps(*spec),
        actor=ORCH,
        now=NOW,
        pool_ok=lambda p: p == "default",
    )
    dag = TaskDag.from_created(records[0])
    for r in records[1:]:
        dag.apply(r)
    return dag


def commit(dag: TaskDag, records: list[TaskWalEvent]) -> TaskDag:
    for r in records:
        dag.apply(r)
    return dag


def test_decisions_do_not_mutate_the_dag() -> None:
    dag = new_dag(("a", []), ("b", ["a"]))
    before = dag.snapshot()
    records = decide_claim(dag, "a", actor=W1, now=NOW, lease_ms=1000)
    assert [r.event_type for r in records] == ["task_step_claimed"] and dag.snapshot() == before
    commit(dag, records)
    done = decide_update_step(
        dag,
        TaskUpdateStepInput(task_id="t1", step_id="a", status=StepStatus.completed),
        actor=W1,
        is_worker=True,
        now=NOW,
        lease_ms=1000,
    )
    assert [r.event_type for r in done] == ["task_step_completed", "task_step_ready"]
    assert [r.wal_seq for r in done] == [5, 6] and dag.last_wal_seq == 4
    assert {r.created_at for r in done} == {"2026-06-12T15:30:00.000Z"}


def test_find_cycle() -> None:
    def s(step_id: str, *deps: str) -> TaskStep:
        return TaskStep(
            step_id=step_id,
            title="t",
            summary="s",
            depends_on_step_ids=list(deps),
            created_at="x",
            updated_at="x",
        )

    assert find_cycle([s("a"), s("b", "a"), s("c", "a", "b")]) is None
    assert find_cycle([s("a", "a")]) == ["a", "a"]
    cycle = find_cycle([s("a", "c"), s("b", "a"), s("c", "b"), s("d", "zz")])
    assert cycle is not None and cycle[0] == cycle[-1] and set(cycle) == {"a", "b", "c"}


def _record(
    dag: TaskDag,
    event_type: str,
    step_id: str | None,
    payload: dict[str, object],
    actor: Actor = ORCH,
    seq: int | None = None,
) -> TaskWalEvent:
    return parse_wal_event(
        {
            "wal_seq": seq if seq is not None else dag.last_wal_seq + 1,
            "session_id": "sess_u",
            "event_id": "evt_test",
            "event_type": event_type,
            "actor_agent_id": actor.agent_id,
            "actor_run_id": actor.run_id,
            "task_id": "t1",
            "step_id": step_id,
            "payload": payload,
            "created_at": "2026-06-12T15:31:00.000Z",
        }
    )


@pytest.mark.parametrize(
    ("event_type", "step_id", "payload"),
    [
        (
            "task_step_ready",
            "b",
            {"previous_status": "pending", "status": "ready", "depends_on_step_ids": ["a"]},
        ),
        (
            "task_step_started",
            "a",
            {
                "previous_status": "claimed",
                "status": "running",
                "lease_expires_at": "2026-06-12T15:40:00.000Z",
            },
        ),
        (
            "task_step_claimed",
            "b",
            {
                "previous_status": "ready",
                "claimed_by_agent_id": "agent_w",
                "claimed_by_run_id": "run_w1",
                "lease_expires_at": "2026-06-12T15:40:00.000Z",
            },
        ),
        (
            "task_step_completed",
            "b",
            {"previous_status": "pending", "result_summary": None, "artifact_ids": []},
        ),
        ("task_step_reopened", "a", {"previous_status": "ready", "status": "pending", "reason": None}),
        (
            "task_step_lease_expired",
            "a",
            {
                "previous_status": "claimed",
                "claimed_by_agent_id": "x",
                "claimed_by_run_id": "run_x",
                "expired_at": "2026-06-12T15:00:00.000Z",
            },
        ),
        (
            "task_step_updated",
            "a",
            {
                "previous_status": "ready",
                "status": "blocked",
                "result_summary": None,
                "artifact_ids": [],
                "lease_expires_at": None,
            },
        ),
        (
            "task_step_updated",
            "a",
            {
                "previous_status": "ready",
                "status": "ready",
                "result_summary": None,
                "artifact_ids": [],
                "lease_expires_at": "2026-06-12T15:40:00.000Z",
            },
        ),
        ("task_running", None, {"previous_status": "pending", "status": "running", "reason": None}),
        ("task_reopened", None, {"previous_status": "blocked", "status": "pending", "reason": None}),
        ("task_completed", None, {"result_summary": None, "cancelled_optional_step_ids": []}),
        (
            "task_step_ready",
            "zz",
            {"previous_status": "pending", "status": "ready", "depends_on_step_ids": []},
        ),
        (
            "task_updated",
            None,
            {
                "operations": [{"op": "delete_step", "step_id": "a"}],
                "updated_after_dispatch_step_ids": [],
                "task_summary": {
                    "task_id": "t1",
                    "title": "T",
                    "status": "running",
                    "step_status_counts": {},
                },
            },
        ),
        (
            "task_updated",
            None,
            {
                "operations": [{"op": "explode"}],
                "updated_after_dispatch_step_ids": [],
                "task_summary": {
                    "task_id": "t1",
                    "title": "T",
                    "status": "running",
                    "step_status_counts": {},
                },
            },
        ),
        (
            "task_updated",
            None,
            {
                "operations": [],
                "updated_after_dispatch_step_ids": ["a"],
                "task_summary": {
                    "task_id": "t1",
                    "title": "T",
                    "status": "running",
                    "step_status_counts": {},
                },
            },
        ),
    ],
)
def test_apply_rejects_illegal_transitions(
    event_type: str, step_id: str | None, payload: dict[str, object]
) -> None:
    dag = new_dag(("a", []), ("b", ["a"]))
    before = dag.snapshot()
    with pytest.raises(IllegalTransition):
        dag.apply(_record(dag, event_type, step_id, payload))
    assert dag.snapshot()["last_wal_seq"] == before["last_wal_seq"]


def test_apply_checks_sequence_session_task_and_terminal() -> None:
    dag = new_dag(("a", []))
    ok = {
        "previous_status": "ready",
        "claimed_by_agent_id": "agent_w",
        "claimed_by_run_id": "run_w1",
        "lease_expires_at": "2026-06-12T15:40:00.000Z",
    }
    with pytest.raises(IllegalTransition):
        dag.apply(_record(dag, "task_step_claimed", "a", ok, W1, seq=dag.last_wal_seq + 2))
    with pytest.raises(IllegalTransition):
        dag.apply(_record(dag, "task_step_claimed", "a", ok, W1, seq=dag.last_wal_seq))
    other = _record(dag, "task_step_claimed", "a", ok, W1).model_copy(update={"session_id": "sess_x"})
    with pytest.raises(IllegalTransition):
        dag.apply(other)
    other = _record(dag, "task_step_claimed", "a", ok, W1).model_copy(update={"task_id": "t9"})
    with pytest.raises(IllegalTransition):
        dag.apply(other)
    created = decide_create(
        session_id="sess_u",
        task_id="t1",
        wal_path="/w",
        title="T",
        summary="S",
        steps=steps(("a", [])),
        actor=ORCH,
        now=NOW,
        pool_ok=lambda p: True,
    )[0]
    with pytest.raises(IllegalTransition):
        dag.apply(created.model_copy(update={"wal_seq": dag.last_wal_seq + 1}))
    commit(dag, decide_terminate(dag, "cancelled", None, actor=ORCH, now=NOW))
    with pytest.raises(IllegalTransition):
        dag.apply(_record(dag, "task_step_claimed", "a", ok, W1))
    # One claim per run is part of the replayed state.
    dag = new_dag(("a", []), ("b", []))
    commit(dag, decide_claim(dag, "a", actor=W1, now=NOW, lease_ms=1000))
    again = {**ok, "claimed_by_run_id": "run_w1"}
    with pytest.raises(IllegalTransition):
        dag.apply(_record(dag, "task_step_claimed", "b", again, W1))


def test_from_created_validation() -> None:
    created = decide_create(
        session_id="sess_u",
        task_id="t1",
        wal_path="/w",
        title="T",
        summary="S",
        steps=steps(("a", [])),
        actor=ORCH,
        now=NOW,
        pool_ok=lambda p: True,
    )[0]
    data = created.to_dict()
    data["wal_seq"] = 2
    with pytest.raises(IllegalTransition):
        TaskDag.from_created(parse_wal_event(data))
    data = created.to_dict()
    data["payload"]["task"]["steps"][0]["status"] = "ready"
    with pytest.raises(IllegalTransition):
        TaskDag.from_created(parse_wal_event(data))
    data = created.to_dict()
    data["payload"]["task"]["steps"].append(dict(data["payload"]["task"]["steps"][0]))
    with pytest.raises(IllegalTransition):
        TaskDag.from_created(parse_wal_event(data))
    dag = TaskDag.from_created(created, wal_path="/actual/path")
    assert dag.task.wal_path == "/actual/path"


def test_lease_expiry_heal_and_run_end_decisions() -> None:
    dag = new_dag(("a", []), ("b", []))
    commit(dag, decide_claim(dag, "a", actor=W1, now=NOW, lease_ms=1000))
    commit(dag, decide_claim(dag, "b", actor=W2, now=NOW + timedelta(seconds=5), lease_ms=1000))
    assert decide_lease_expiry(dag, now=NOW + timedelta(milliseconds=1000), actor=ORCH) == []
    records = decide_lease_expiry(dag, now=NOW + timedelta(milliseconds=1001), actor=ORCH)
    assert [(r.event_type, r.step_id) for r in records] == [
        ("task_step_lease_expired", "a"),
        ("task_step_ready", "a"),
    ]
    commit(dag, records)
    assert decide_heal(dag, now=NOW, actor=ORCH) == []
    assert decide_run_end(dag, "run_w1", "worker_cancelled", actor=W1, now=NOW) == []
    ended = decide_run_end(dag, "run_w2", "worker_timeout", actor=W2, now=NOW)
    assert [r.event_type for r in ended] == ["task_step_failed"]
    assert ended[0].payload.model_dump() == {
        "previous_status": "claimed",
        "reason": "worker_timeout",  # type: ignore[union-attr]
        "result_summary": "worker_timeout",
        "artifact_ids": [],
    }
    with pytest.raises(AgentCoreError):
        decide_run_end(dag, "run_w2", "bored", actor=W2, now=NOW)


def test_update_decision_ordering_and_summary() -> None:
    dag = new_dag(("a", []), ("b", ["a"]), ("c", []))
    commit(dag, decide_terminate(dag, "failed", None, actor=ORCH, now=NOW)[:1])  # a failed
    inp = TaskUpdateInput(
        task_id="t1",
        operations=[
            {"op": "cancel_step", "step_id": "c"},
            {"op": "reopen_step", "step_id": "a"},
            {"op": "update_task", "status": "blocked"},
        ],
    )
    records, after = decide_update(
        dag, inp.parsed_operations(), inp.operations, actor=ORCH, now=NOW, pool_ok=lambda p: True
    )
    assert [(r.event_type, r.step_id) for r in records] == [
        ("task_updated", None),
        ("task_step_cancelled", "c"),
        ("task_step_reopened", "a"),
    ]
    summary = records[0].payload.task_summary  # type: ignore[union-attr]
    assert summary.status == "blocked" and summary.step_status_counts["cancelled"] == 1 and after == []
    commit(dag, records)
    assert dag.step("a").status == StepStatus.pending  # type: ignore[union-attr]
    twice = TaskUpdateInput(
        task_id="t1",
        operations=[{"op": "update_task", "status": "pending"}, {"op": "update_task", "status": "blocked"}],
    )
    with pytest.raises(AgentCoreError) as info:
        decide_update(
            dag, twice.parsed_operations(), twice.operations, actor=ORCH, now=NOW, pool_ok=lambda p: True
        )
    assert info.value.code == ErrorCode.validation_error and info.value.details["op_index"] == 1


def test_complete_decision_refusals() -> None:
    dag = new_dag(("a", []))
    with pytest.raises(AgentCoreError) as info:
        decide_complete(dag, None, actor=ORCH, now=NOW)
    assert info.value.details["step_ids"] == ["a"]


def test_make_wal_event_rejects_mismatched_payload() -> None:
    dag = new_dag(("a", []))
    payload = decide_claim(dag, "a", actor=W1, now=NOW, lease_ms=1).pop().payload
    with pytest.raises(ValueError):
        make_wal_event(
            "task_step_started",
            wal_seq=5,
            session_id="s",
            event_id="evt_1",
            actor_agent_id="a",
            actor_run_id="r",
            task_id="t1",
            step_id="a",
            payload=payload,
            created_at="2026-06-12T15:30:00Z",
        )


def test_created_step_equals_the_validated_step() -> None:
    from agent_core._tasks.dag import created_step
    from agent_core._tasks.models import StepSnapshot

    snapshot = StepSnapshot(
        step_id="a",
        title="A",
        summary="Do A",
        status=StepStatus.pending,
        depends_on_step_ids=["b", "c", "b"],
        required=False,
        worker_pool_id="pool_1",
        claimed_by_agent_id=None,
        claimed_by_run_id=None,
        lease_expires_at=None,
        result_summary=None,
        artifact_ids=[],
        updated_at="2026-06-12T15:30:00.000Z",
    )
    validated = TaskStep(
        step_id="a",
        title="A",
        summary="Do A",
        depends_on_step_ids=["b", "c"],
        required=False,
        worker_pool_id="pool_1",
        updated_at="2026-06-12T15:30:00.000Z",
        created_at="2026-06-12T15:31:00.000Z",
    )
    built = created_step(snapshot.__dict__, "2026-06-12T15:31:00.000Z")
    assert built == validated
    assert list(built.__dict__) == list(validated.__dict__)
    assert built.model_dump() == validated.model_dump()
    assert built.model_fields_set == validated.model_fields_set
    assert built.depends_on_step_ids is not snapshot.depends_on_step_ids
    built.result_summary = "half"  # an ordinary, mutable model: its field set grows as the validated one's
    assert "result_summary" in built.model_fields_set
    assert "result_summary" not in validated.model_fields_set


def test_a_status_set_by_attribute_is_seen_by_the_next_apply() -> None:
    """apply_fields reads the Task's fields from its __dict__; attribute writes land there too."""
    from agent_core._tasks.models import TaskCancelledPayload, TaskRunningPayload

    dag = new_dag(("a", []))
    seq = dag.last_wal_seq
    common = {"session_id": "sess_u", "actor_agent_id": "agent_o", "actor_run_id": "run_o", "task_id": "t1"}
    ts = "2026-06-12T15:30:00.000Z"
    dag.task.status = TaskStatus.cancelled  # as _on_task_terminal does
    running = make_wal_event(
        "task_running",
        wal_seq=seq + 1,
        event_id="evt_r",
        step_id=None,
        payload=TaskRunningPayload(previous_status=TaskStatus.pending, status="running", reason=None),
        created_at=ts,
        **common,
    )
    with pytest.raises(IllegalTransition, match="already cancelled"):
        dag.apply(running)
    dag.task.status = TaskStatus.pending
    dag.apply(running)
    assert dag.status == TaskStatus.running and dag.task.updated_at == ts
    cancelled = make_wal_event(
        "task_cancelled",
        wal_seq=seq + 2,
        event_id="evt_c",
        step_id=None,
        payload=TaskCancelledPayload(reason=None, cancelled_step_ids=[]),
        created_at=ts,
        **common,
    )
    dag.apply(cancelled)
    with pytest.raises(IllegalTransition, match="already cancelled"):
        dag.apply(running.model_copy(update={"wal_seq": seq + 3}))
