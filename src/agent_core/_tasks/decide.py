"""Pure Task decisions: validate one operation against a DAG and return the WAL records to append.

Every decision builds its records on a private copy of the DAG through :class:`RecordBuilder`, which applies
each record with the same :meth:`TaskDag.apply` that replay uses; the live DAG is changed only later, by
applying the returned records after a successful WAL append. Derived auto-advance records
(``task_step_ready`` in step creation order, then ``task_running``) are appended last
(docs/task-board.md#commit-protocol, docs/task-board.md#task-transitions). Business errors raise
:class:`AgentCoreError` with the docs/task-board.md code; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from agent_core._ids import new_id
from agent_core._tasks.dag import Actor, TaskDag, find_cycle
from agent_core._tasks.inputs import (
    StepInput,
    TaskUpdateStepInput,
    dedupe,
)
from agent_core._tasks.models import (
    HELD_STEP_STATUSES,
    UNFINISHED_STEP_STATUSES,
    StepBlockedPayload,
    StepCancelledPayload,
    StepClaimedPayload,
    StepCompletedPayload,
    StepFailedPayload,
    StepLeaseExpiredPayload,
    StepReadyPayload,
    StepReopenedPayload,
    StepSnapshot,
    StepStartedPayload,
    StepUpdatedPayload,
    TaskCancelledPayload,
    TaskCompletedPayload,
    TaskCreatedPayload,
    TaskFailedPayload,
    TaskRunningPayload,
    TaskSnapshot,
    TaskStep,
    TaskWalEvent,
    make_wal_event,
)
from agent_core.errors import AgentCoreError, ErrorCode, error_for
from agent_core.types.base import StrictModel, format_ts_ms, parse_ts
from agent_core.types.enums import StepStatus, TaskStatus

PoolCheck = Callable[[str], bool]
"""True when a non-null ``worker_pool_id`` names a valid configured pool."""
WORKER_END_REASONS = (
    "worker_finished_without_terminal_step_status",
    "worker_cancelled",
    "worker_timeout",
)


def error(code: ErrorCode, message: str, **details: Any) -> AgentCoreError:
    """A business error carrying ``details`` (the pipeline turns it into an error result)."""
    return error_for(code, message, details=details)


def lease_until(now: datetime, lease_ms: int) -> str:
    return format_ts_ms(now + timedelta(milliseconds=lease_ms))


class RecordBuilder:
    """Accumulates the records of one commit, applying each to a private working copy."""

    def __init__(
        self,
        dag: TaskDag,
        *,
        actor: Actor,
        now: datetime,
        new_event_id: Callable[[], str] | None = None,
        records: Sequence[TaskWalEvent] = (),
    ) -> None:
        self.work = dag.clone()
        self.actor = actor
        self.ts = format_ts_ms(now)
        self.records: list[TaskWalEvent] = list(records)
        self._new_event_id = new_event_id or (lambda: new_id("evt_"))

    def add(self, event_type: str, step_id: str | None, payload: StrictModel) -> TaskWalEvent:
        record = make_wal_event(
            event_type,
            wal_seq=self.work.last_wal_seq + 1,
            session_id=self.work.session_id,
            event_id=self._new_event_id(),
            actor_agent_id=self.actor.agent_id,
            actor_run_id=self.actor.run_id,
            task_id=self.work.task_id,
            step_id=step_id,
            payload=payload,
            created_at=self.ts,
        )
        self.work.apply(record)
        self.records.append(record)
        return record

    def derive(self) -> None:
        """Ready advance then Task running advance (suspended while blocked or terminal)."""
        work = self.work
        if work.task.terminal or work.status == TaskStatus.blocked:
            return
        for step in list(work.steps()):
            if step.status == StepStatus.pending and work.deps_completed(step):
                self.add(
                    "task_step_ready",
                    step.step_id,
                    StepReadyPayload(
                        previous_status=StepStatus.pending,
                        status="ready",
                        depends_on_step_ids=list(step.depends_on_step_ids),
                    ),
                )
        active = (StepStatus.ready, StepStatus.claimed, StepStatus.running)
        if work.status == TaskStatus.pending and any(s.status in active for s in work.steps()):
            self.add(
                "task_running",
                None,
                TaskRunningPayload(
                    previous_status=TaskStatus.pending, status="running", reason="auto_advance"
                ),
            )


# ---------------------------------------------------------------------------------------- create


def decide_create(
    *,
    session_id: str,
    task_id: str,
    wal_path: str,
    title: str,
    summary: str,
    steps: Sequence[StepInput],
    actor: Actor,
    now: datetime,
    pool_ok: PoolCheck,
) -> list[TaskWalEvent]:
    """``task_created`` (all pending) followed by the root ``task_step_ready`` records and ``task_running``."""
    if actor.run_id is None:
        raise error(ErrorCode.permission_denied, "a Task is created by an Orchestrator run")
    seen: set[str] = set()
    for step in steps:
        if step.step_id in seen:
            raise error(
                ErrorCode.validation_error, f"duplicate step_id {step.step_id!r}", step_id=step.step_id
            )
        seen.add(step.step_id)
    for step in steps:
        for dep in step.depends_on_step_ids:
            if dep not in seen:
                raise error(
                    ErrorCode.validation_error,
                    f"step {step.step_id} depends on unknown step {dep!r}",
                    step_id=step.step_id,
                    depends_on_step_id=dep,
                )
    ts = format_ts_ms(now)
    probe = [
        TaskStep(
            step_id=s.step_id,
            title=s.title,
            summary=s.summary,
            depends_on_step_ids=dedupe(s.depends_on_step_ids),
            created_at=ts,
            updated_at=ts,
        )
        for s in steps
    ]
    cycle = find_cycle(probe)
    if cycle is not None:
        raise error(ErrorCode.dependency_cycle, f"dependency cycle: {' -> '.join(cycle)}", cycle=cycle)
    for step in steps:
        if step.worker_pool_id is not None and not pool_ok(step.worker_pool_id):
            raise error(
                ErrorCode.validation_error,
                f"unknown worker_pool_id {step.worker_pool_id!r}",
                step_id=step.step_id,
            )
    snapshot = TaskSnapshot(
        task_id=task_id,
        wal_path=wal_path,
        title=title,
        summary=summary,
        status=TaskStatus.pending,
        root_step_ids=[s.step_id for s in probe if not s.depends_on_step_ids],
        steps=[
            StepSnapshot(
                step_id=s.step_id,
                title=s.title,
                summary=s.summary,
                status=StepStatus.pending,
                depends_on_step_ids=dedupe(s.depends_on_step_ids),
                required=s.required,
                worker_pool_id=s.worker_pool_id,
                claimed_by_agent_id=None,
                claimed_by_run_id=None,
                lease_expires_at=None,
                result_summary=None,
                artifact_ids=[],
                updated_at=ts,
            )
            for s in steps
        ],
        created_by_agent_id=actor.agent_id,
        created_by_run_id=actor.run_id,
        created_at=ts,
        updated_at=ts,
    )
    created = make_wal_event(
        "task_created",
        wal_seq=1,
        session_id=session_id,
        event_id=new_id("evt_"),
        actor_agent_id=actor.agent_id,
        actor_run_id=actor.run_id,
        task_id=task_id,
        step_id=None,
        payload=TaskCreatedPayload(task=snapshot),
        created_at=ts,
    )
    builder = RecordBuilder(
        TaskDag.from_created(created, wal_path=wal_path), actor=actor, now=now, records=[created]
    )
    builder.derive()
    return builder.records


# ---------------------------------------------------------------------------------------- core-driven


def decide_lease_expiry(dag: TaskDag, *, now: datetime, actor: Actor) -> list[TaskWalEvent]:
    """``task_step_lease_expired`` for every held step whose lease ended before ``now``, then ready advance."""
    if dag.task.terminal:
        return []
    expired = [
        s
        for s in dag.steps()
        if s.status in HELD_STEP_STATUSES and s.lease_expires_at and parse_ts(s.lease_expires_at) < now
    ]
    if not expired:
        return []
    builder = RecordBuilder(dag, actor=actor, now=now)
    for step in expired:
        builder.add(
            "task_step_lease_expired",
            step.step_id,
            StepLeaseExpiredPayload(
                previous_status=step.status,
                claimed_by_agent_id=step.claimed_by_agent_id or "",
                claimed_by_run_id=step.claimed_by_run_id or "",
                expired_at=step.lease_expires_at or "",
            ),
        )
    builder.derive()
    return builder.records


def decide_heal(dag: TaskDag, *, now: datetime, actor: Actor) -> list[TaskWalEvent]:
    """Missing auto-advance records after restore (docs/task-board.md#restore-and-replay)."""
    if dag.task.terminal:
        return []
    builder = RecordBuilder(dag, actor=actor, now=now)
    builder.derive()
    return builder.records


def decide_run_end(
    dag: TaskDag, run_id: str, reason: str, *, actor: Actor, now: datetime
) -> list[TaskWalEvent]:
    """Worker-run-end fallback (docs/task-board.md#worker-run-end-fallback): fails the step ``run_id`` still
    holds, if any."""
    if reason not in WORKER_END_REASONS:
        raise error(ErrorCode.validation_error, f"unknown worker run end reason {reason!r}")
    if dag.task.terminal:
        return []
    held = [s for s in dag.steps() if s.claimed_by_run_id == run_id and s.status in HELD_STEP_STATUSES]
    if not held:
        return []
    builder = RecordBuilder(dag, actor=actor, now=now)
    step = held[0]
    builder.add(
        "task_step_failed",
        step.step_id,
        StepFailedPayload(
            previous_status=step.status,
            reason=reason,
            result_summary=step.result_summary or reason,
            artifact_ids=list(step.artifact_ids),
        ),
    )
    builder.derive()
    return builder.records


# ---------------------------------------------------------------------------------------- claims


def precheck_claim(
    dag: TaskDag, step_id: str, *, run_id: str, in_scope: Callable[[TaskStep], bool]
) -> TaskStep:
    """Claim–5 of docs/task-board.md#claims-and-leases (before lease reconciliation)."""
    if run_id in dag.run_claims:
        raise error(
            ErrorCode.step_already_claimed_by_run,
            f"this worker run already claimed step {dag.run_claims[run_id]!r}; a run claims at most one step",
            step_id=step_id,
        )
    step = dag.step(step_id)
    if step is None:
        raise error(ErrorCode.step_not_found, f"unknown step {step_id!r}", step_id=step_id)
    if not in_scope(step):
        raise error(ErrorCode.permission_denied, f"step {step_id!r} is outside this worker's scope")
    return step


def decide_claim(
    dag: TaskDag, step_id: str, *, actor: Actor, now: datetime, lease_ms: int
) -> list[TaskWalEvent]:
    """Claim and the ``task_step_claimed`` record (status ``claimed``, not ``running``)."""
    step = dag.step(step_id)
    if step is None:
        raise error(ErrorCode.step_not_found, f"unknown step {step_id!r}", step_id=step_id)
    if step.status in HELD_STEP_STATUSES:
        raise error(ErrorCode.step_already_claimed, f"step {step_id!r} is already claimed", step_id=step_id)
    if step.status != StepStatus.ready or not dag.deps_completed(step):
        raise error(
            ErrorCode.step_not_ready, f"step {step_id!r} is {step.status}, not ready", step_id=step_id
        )
    if actor.run_id is None:
        raise error(ErrorCode.permission_denied, "claims are made by worker runs")
    builder = RecordBuilder(dag, actor=actor, now=now)
    builder.add(
        "task_step_claimed",
        step_id,
        StepClaimedPayload(
            previous_status=StepStatus.ready,
            claimed_by_agent_id=actor.agent_id,
            claimed_by_run_id=actor.run_id,
            lease_expires_at=lease_until(now, lease_ms),
        ),
    )
    builder.derive()
    return builder.records


# ---------------------------------------------------------------------------------------- update_step


def decide_update_step(
    dag: TaskDag,
    inp: TaskUpdateStepInput,
    *,
    actor: Actor,
    is_worker: bool,
    now: datetime,
    lease_ms: int,
) -> list[TaskWalEvent]:
    """``agent.task_update_step`` (docs/task-board.md#step-transitions, docs/task-board.md#task-tools);
    ``inp.artifact_ids`` are already verified."""
    step = dag.step(inp.step_id)
    if step is None:
        raise error(ErrorCode.step_not_found, f"unknown step {inp.step_id!r}", step_id=inp.step_id)
    status = inp.status
    has_results = inp.result_summary is not None or inp.artifact_ids is not None
    summary = inp.result_summary if inp.result_summary is not None else step.result_summary
    artifacts = dedupe([*step.artifact_ids, *(inp.artifact_ids or [])])
    builder = RecordBuilder(dag, actor=actor, now=now)
    current = step.status
    bad = error(
        ErrorCode.validation_error,
        f"step {step.step_id} cannot go from {current} to {status or current} this way",
        step_id=step.step_id,
        status=current.value,
    )

    if is_worker:
        if status == StepStatus.pending:
            raise error(ErrorCode.permission_denied, "only the Orchestrator reopens a step")
        if not (current in HELD_STEP_STATUSES and step.claimed_by_run_id == actor.run_id):
            if step.claimed_by_run_id == actor.run_id and current not in UNFINISHED_STEP_STATUSES:
                raise error(ErrorCode.validation_error, f"step {step.step_id} is {current} and closed")
            raise error(ErrorCode.permission_denied, f"this worker run does not hold step {step.step_id}")
        lease = lease_until(now, lease_ms)
        if status is None or status == current:
            builder.add("task_step_updated", step.step_id, _updated(current, summary, artifacts, lease))
        elif status == StepStatus.running:
            builder.add(
                "task_step_started",
                step.step_id,
                StepStartedPayload(previous_status=current, status="running", lease_expires_at=lease),
            )
            if has_results:
                builder.add(
                    "task_step_updated", step.step_id, _updated(StepStatus.running, summary, artifacts, lease)
                )
        elif status == StepStatus.claimed:
            raise bad
        else:
            if status == StepStatus.cancelled and inp.artifact_ids is not None:
                builder.add("task_step_updated", step.step_id, _updated(current, summary, artifacts, lease))
            _close_step(builder, step.step_id, current, status, inp.reason, summary, artifacts)
    else:
        if current in HELD_STEP_STATUSES or current in (StepStatus.completed, StepStatus.cancelled):
            raise bad
        if status in (StepStatus.claimed, StepStatus.running):
            raise bad
        if current == StepStatus.failed and (status != StepStatus.pending or has_results):
            raise bad
        if status is None or status == current:
            builder.add("task_step_updated", step.step_id, _updated(current, summary, artifacts, None))
        elif status == StepStatus.pending:
            if current not in (StepStatus.blocked, StepStatus.failed) or has_results:
                raise bad
            builder.add(
                "task_step_reopened",
                step.step_id,
                StepReopenedPayload(previous_status=current, status="pending", reason=inp.reason),
            )
        elif status == StepStatus.completed:
            if current != StepStatus.ready:
                raise bad
            _close_step(builder, step.step_id, current, status, inp.reason, summary, artifacts)
        else:
            if current not in (StepStatus.pending, StepStatus.ready):
                raise bad
            if status == StepStatus.cancelled and inp.artifact_ids is not None:
                builder.add("task_step_updated", step.step_id, _updated(current, summary, artifacts, None))
            _close_step(builder, step.step_id, current, status, inp.reason, summary, artifacts)
    builder.derive()
    return builder.records


def _updated(status: StepStatus, summary: str | None, artifacts: list[str], lease: str | None) -> StrictModel:
    return StepUpdatedPayload(
        previous_status=status,
        status=status,
        result_summary=summary,
        artifact_ids=list(artifacts),
        lease_expires_at=lease,
    )


def _close_step(
    builder: RecordBuilder,
    step_id: str,
    current: StepStatus,
    status: StepStatus,
    reason: str | None,
    summary: str | None,
    artifacts: list[str],
) -> None:
    """Writes the blocked / completed / failed / cancelled record of a step."""
    if status == StepStatus.blocked:
        payload: StrictModel = StepBlockedPayload(
            previous_status=current, reason=reason, result_summary=summary, artifact_ids=artifacts
        )
    elif status == StepStatus.completed:
        payload = StepCompletedPayload(
            previous_status=current, result_summary=summary, artifact_ids=artifacts
        )
    elif status == StepStatus.failed:
        payload = StepFailedPayload(
            previous_status=current, reason=reason, result_summary=summary, artifact_ids=artifacts
        )
    else:
        payload = StepCancelledPayload(previous_status=current, reason=reason, result_summary=summary)
    builder.add(f"task_step_{status.value}", step_id, payload)


# ---------------------------------------------------------------------------------------- task closers


def decide_complete(
    dag: TaskDag, result_summary: str | None, *, actor: Actor, now: datetime
) -> list[TaskWalEvent]:
    """``agent.task_complete`` (docs/task-board.md#task-tools)."""
    held = [s.step_id for s in dag.steps() if s.status in HELD_STEP_STATUSES]
    if held:
        raise error(ErrorCode.validation_error, f"steps {held} are still claimed/running", step_ids=held)
    missing = [s.step_id for s in dag.steps() if s.required and s.status != StepStatus.completed]
    if missing:
        raise error(
            ErrorCode.validation_error, f"required steps {missing} are not completed", step_ids=missing
        )
    builder = RecordBuilder(dag, actor=actor, now=now)
    cancelled: list[str] = []
    for step in dag.steps():
        if not step.required and step.status in (StepStatus.pending, StepStatus.ready):
            builder.add(
                "task_step_cancelled",
                step.step_id,
                StepCancelledPayload(
                    previous_status=step.status,
                    reason="task_completed",
                    result_summary=step.result_summary or "task_completed",
                ),
            )
            cancelled.append(step.step_id)
    builder.add(
        "task_completed",
        None,
        TaskCompletedPayload(result_summary=result_summary, cancelled_optional_step_ids=cancelled),
    )
    return builder.records


def decide_terminate(
    dag: TaskDag,
    kind: Literal["failed", "cancelled"],
    reason: str | None,
    *,
    actor: Actor,
    now: datetime,
) -> list[TaskWalEvent]:
    """``agent.task_fail`` / ``agent.task_cancel`` step 4–5: every unfinished step, then the Task record."""
    code = f"task_{kind}"
    builder = RecordBuilder(dag, actor=actor, now=now)
    ended: list[str] = []
    for step in dag.steps():
        if step.status not in UNFINISHED_STEP_STATUSES:
            continue
        summary = step.result_summary or code
        if kind == "failed":
            payload: StrictModel = StepFailedPayload(
                previous_status=step.status,
                reason=code,
                result_summary=summary,
                artifact_ids=list(step.artifact_ids),
            )
        else:
            payload = StepCancelledPayload(previous_status=step.status, reason=code, result_summary=summary)
        builder.add(f"task_step_{kind}", step.step_id, payload)
        ended.append(step.step_id)
    if kind == "failed":
        builder.add("task_failed", None, TaskFailedPayload(reason=reason, failed_step_ids=ended))
    else:
        builder.add("task_cancelled", None, TaskCancelledPayload(reason=reason, cancelled_step_ids=ended))
    return builder.records
