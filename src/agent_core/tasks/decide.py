"""Pure Task decisions: validate one operation against a DAG and return the WAL records to append.

Every decision builds its records on a private copy of the DAG through :class:`RecordBuilder`, which applies
each record with the same :meth:`TaskDag.apply` that replay uses; the live DAG is changed only later, by
applying the returned records after a successful WAL append. Derived auto-advance records
(``task_step_ready`` in step creation order, then ``task_running``) are appended last (task-board.md §2.4,
§4.4). Business errors raise :class:`AgentCoreError` with the task-board.md code; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.storage.ids import new_id
from agent_core.tasks.dag import Actor, TaskDag, find_cycle
from agent_core.tasks.inputs import (
    AddDependencyOp,
    AddStepOp,
    CancelStepOp,
    DeleteStepOp,
    RemoveDependencyOp,
    ReopenStepOp,
    StepInput,
    TaskOperation,
    TaskUpdateStepInput,
    UpdateStepOp,
    UpdateTaskOp,
    dedupe,
)
from agent_core.tasks.models import (
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
    TaskReopenedPayload,
    TaskRunningPayload,
    TaskSnapshot,
    TaskStep,
    TaskUpdatedPayload,
    TaskWalEvent,
    make_wal_event,
)
from agent_core.types.base import StrictModel, format_ts_ms, parse_ts
from agent_core.types.enums import StepStatus, TaskStatus

PoolCheck = Callable[[str], bool]
"""True when a non-null ``worker_pool_id`` names a valid configured pool."""
WORKER_END_REASONS = (
    "worker_finished_without_terminal_step_status",
    "worker_cancelled",
    "worker_timeout",
)
_EDITABLE_FOR_DELETE = (StepStatus.pending, StepStatus.ready, StepStatus.cancelled)
_FROZEN_TOPOLOGY = (StepStatus.completed, StepStatus.cancelled)


def _err(code: ErrorCode, message: str, **details: Any) -> AgentCoreError:
    return AgentCoreError(code, message, details=details)


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
        raise _err(ErrorCode.permission_denied, "a Task is created by an Orchestrator run")
    seen: set[str] = set()
    for step in steps:
        if step.step_id in seen:
            raise _err(
                ErrorCode.validation_error, f"duplicate step_id {step.step_id!r}", step_id=step.step_id
            )
        seen.add(step.step_id)
    for step in steps:
        for dep in step.depends_on_step_ids:
            if dep not in seen:
                raise _err(
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
        raise _err(ErrorCode.dependency_cycle, f"dependency cycle: {' -> '.join(cycle)}", cycle=cycle)
    for step in steps:
        if step.worker_pool_id is not None and not pool_ok(step.worker_pool_id):
            raise _err(
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
    """Missing auto-advance records after restore (task-board.md §2.5)."""
    if dag.task.terminal:
        return []
    builder = RecordBuilder(dag, actor=actor, now=now)
    builder.derive()
    return builder.records


def decide_run_end(
    dag: TaskDag, run_id: str, reason: str, *, actor: Actor, now: datetime
) -> list[TaskWalEvent]:
    """Worker-run-end fallback (task-board.md §6): fails the step ``run_id`` still holds, if any."""
    if reason not in WORKER_END_REASONS:
        raise _err(ErrorCode.validation_error, f"unknown worker run end reason {reason!r}")
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
    """Claim checks 3–5 of task-board.md §5.8 (before lease reconciliation)."""
    if run_id in dag.run_claims:
        raise _err(
            ErrorCode.step_already_claimed_by_run,
            f"this worker run already claimed step {dag.run_claims[run_id]!r}; a run claims at most one step",
            step_id=step_id,
        )
    step = dag.step(step_id)
    if step is None:
        raise _err(ErrorCode.step_not_found, f"unknown step {step_id!r}", step_id=step_id)
    if not in_scope(step):
        raise _err(ErrorCode.permission_denied, f"step {step_id!r} is outside this worker's scope")
    return step


def decide_claim(
    dag: TaskDag, step_id: str, *, actor: Actor, now: datetime, lease_ms: int
) -> list[TaskWalEvent]:
    """Claim checks 7–8 and the ``task_step_claimed`` record (status ``claimed``, not ``running``)."""
    step = dag.step(step_id)
    if step is None:
        raise _err(ErrorCode.step_not_found, f"unknown step {step_id!r}", step_id=step_id)
    if step.status in HELD_STEP_STATUSES:
        raise _err(ErrorCode.step_already_claimed, f"step {step_id!r} is already claimed", step_id=step_id)
    if step.status != StepStatus.ready or not dag.deps_completed(step):
        raise _err(ErrorCode.step_not_ready, f"step {step_id!r} is {step.status}, not ready", step_id=step_id)
    if actor.run_id is None:
        raise _err(ErrorCode.permission_denied, "claims are made by worker runs")
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
    """``agent.task_update_step`` (task-board.md §4.2, §5.9); ``inp.artifact_ids`` are already verified."""
    step = dag.step(inp.step_id)
    if step is None:
        raise _err(ErrorCode.step_not_found, f"unknown step {inp.step_id!r}", step_id=inp.step_id)
    status = inp.status
    has_results = inp.result_summary is not None or inp.artifact_ids is not None
    summary = inp.result_summary if inp.result_summary is not None else step.result_summary
    artifacts = dedupe([*step.artifact_ids, *(inp.artifact_ids or [])])
    builder = RecordBuilder(dag, actor=actor, now=now)
    current = step.status
    bad = _err(
        ErrorCode.validation_error,
        f"step {step.step_id} cannot go from {current} to {status or current} this way",
        step_id=step.step_id,
        status=current.value,
    )

    if is_worker:
        if status == StepStatus.pending:
            raise _err(ErrorCode.permission_denied, "only the Orchestrator reopens a step")
        if not (current in HELD_STEP_STATUSES and step.claimed_by_run_id == actor.run_id):
            if step.claimed_by_run_id == actor.run_id and current not in UNFINISHED_STEP_STATUSES:
                raise _err(ErrorCode.validation_error, f"step {step.step_id} is {current} and closed")
            raise _err(ErrorCode.permission_denied, f"this worker run does not hold step {step.step_id}")
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


# ---------------------------------------------------------------------------------------- task_update


def decide_update(
    dag: TaskDag,
    ops: Sequence[TaskOperation],
    raw_ops: list[dict[str, Any]],
    *,
    actor: Actor,
    now: datetime,
    pool_ok: PoolCheck,
) -> tuple[list[TaskWalEvent], list[str]]:
    """``agent.task_update``: returns the records and ``updated_after_dispatch_step_ids``.

    Ops are checked in order on a scratch copy (errors carry ``details.op_index``); then one
    ``task_updated`` is written, followed in op order by ``task_step_cancelled`` / ``task_step_reopened`` /
    ``task_reopened``, then derived records. ``task_summary`` describes the state after the whole commit.
    Decision (keeps replay order-independent): a patch may change the Task status at most once.
    """
    targeted = {op.step_id for op in ops if isinstance(op, CancelStepOp | ReopenStepOp)}
    status_changes = 0
    for index, op in enumerate(ops):
        if isinstance(op, DeleteStepOp) and op.step_id in targeted:
            raise _err(
                ErrorCode.validation_error,
                f"step {op.step_id} is cancelled/reopened and deleted in the same patch",
                op_index=index,
            )
        if isinstance(op, UpdateTaskOp) and op.status is not None:
            status_changes += 1
            if status_changes > 1:
                raise _err(
                    ErrorCode.validation_error, "a patch may change the Task status once", op_index=index
                )
    ts = format_ts_ms(now)
    scratch = dag.clone()
    touched: set[str] = set()
    after_dispatch: list[str] = []
    dep_origin: dict[str, int] = {}
    for index, op in enumerate(ops):
        try:
            _check_op(scratch, op, pool_ok)
            target = getattr(op, "step_id", None)
            step = scratch.step(target) if isinstance(target, str) else None
            if (
                isinstance(op, UpdateStepOp | AddDependencyOp | RemoveDependencyOp)
                and step is not None
                and step.status in HELD_STEP_STATUSES
                and step.step_id not in after_dispatch
            ):
                after_dispatch.append(step.step_id)
            scratch.apply_operation(op, ts, replay=False, touched=touched)
            if isinstance(op, AddStepOp):
                dep_origin[op.step.step_id] = index
            elif isinstance(op, AddDependencyOp | RemoveDependencyOp) or (
                isinstance(op, UpdateStepOp) and "depends_on_step_ids" in op.fields.model_fields_set
            ):
                dep_origin[op.step_id] = index
            cycle = find_cycle(scratch.steps())
            if cycle is not None:
                raise _err(ErrorCode.dependency_cycle, f"dependency cycle: {' -> '.join(cycle)}", cycle=cycle)
        except AgentCoreError as exc:
            exc.details.setdefault("op_index", index)
            raise
    try:
        scratch.finish_operations(ts)
    except AgentCoreError as exc:
        origin = dep_origin.get(str(exc.details.get("step_id")), len(ops) - 1)
        exc.details.setdefault("op_index", origin)
        raise

    builder = RecordBuilder(dag, actor=actor, now=now)
    updated = builder.add(
        "task_updated",
        None,
        TaskUpdatedPayload(
            operations=raw_ops,
            updated_after_dispatch_step_ids=after_dispatch,
            task_summary=dag.task_summary_payload(),
        ),
    )
    for op in ops:
        if isinstance(op, CancelStepOp):
            step = _must(builder.work.step(op.step_id))
            builder.add(
                "task_step_cancelled",
                op.step_id,
                StepCancelledPayload(
                    previous_status=step.status, reason=op.reason, result_summary=step.result_summary
                ),
            )
        elif isinstance(op, ReopenStepOp):
            step = _must(builder.work.step(op.step_id))
            builder.add(
                "task_step_reopened",
                op.step_id,
                StepReopenedPayload(previous_status=step.status, status="pending", reason=op.reason),
            )
        elif isinstance(op, UpdateTaskOp) and op.status == "pending":
            builder.add(
                "task_reopened",
                None,
                TaskReopenedPayload(previous_status=TaskStatus.blocked, status="pending", reason=op.reason),
            )
    builder.derive()
    payload = updated.payload
    assert isinstance(payload, TaskUpdatedPayload)
    payload.task_summary = builder.work.task_summary_payload()
    return builder.records, after_dispatch


def _must(step: TaskStep | None) -> TaskStep:
    if step is None:  # pragma: no cover - guarded by the scratch validation
        raise _err(ErrorCode.internal_error, "step vanished while building a patch")
    return step


def _check_op(dag: TaskDag, op: TaskOperation, pool_ok: PoolCheck) -> None:
    """Orchestrator rules of task-board.md §4.7–§4.8 at the op's position (structure is checked by
    :meth:`TaskDag.apply_operation`)."""
    if isinstance(op, UpdateTaskOp):
        if op.status == "blocked" and dag.status not in (TaskStatus.pending, TaskStatus.running):
            raise _err(ErrorCode.validation_error, f"a {dag.status} Task cannot be blocked")
        if op.status == "pending" and dag.status != TaskStatus.blocked:
            raise _err(ErrorCode.validation_error, f"a {dag.status} Task cannot be reopened")
        return
    if isinstance(op, AddStepOp):
        if dag.step(op.step.step_id) is not None:
            raise _err(ErrorCode.validation_error, f"step_id {op.step.step_id!r} already exists")
        pool = op.effective_pool()
        if pool is not None and not pool_ok(pool):
            raise _err(ErrorCode.validation_error, f"unknown worker_pool_id {pool!r}")
        return
    step = dag.step(op.step_id)
    if step is None:
        raise _err(ErrorCode.step_not_found, f"unknown step {op.step_id!r}", step_id=op.step_id)
    status = step.status
    if isinstance(op, UpdateStepOp):
        if op.fields.touches_scheduling and status in _FROZEN_TOPOLOGY:
            raise _err(
                ErrorCode.validation_error,
                f"a {status} step only allows title/summary edits",
                step_id=step.step_id,
            )
        pool = op.fields.worker_pool_id
        if pool is not None and not pool_ok(pool):
            raise _err(ErrorCode.validation_error, f"unknown worker_pool_id {pool!r}")
    elif isinstance(op, DeleteStepOp):
        if status not in _EDITABLE_FOR_DELETE:
            raise _err(ErrorCode.validation_error, f"a {status} step cannot be deleted", step_id=step.step_id)
        dependents = dag.dependents(step.step_id)
        if dependents:
            raise _err(
                ErrorCode.step_has_dependents,
                f"steps {dependents} depend on {step.step_id}",
                step_id=step.step_id,
                dependents=dependents,
            )
    elif isinstance(op, AddDependencyOp | RemoveDependencyOp):
        if status in _FROZEN_TOPOLOGY:
            raise _err(ErrorCode.validation_error, f"the dependencies of a {status} step are frozen")
        if isinstance(op, AddDependencyOp):
            if op.depends_on_step_id == op.step_id:
                raise _err(ErrorCode.dependency_cycle, f"step {op.step_id} cannot depend on itself")
            if dag.step(op.depends_on_step_id) is None:
                raise _err(ErrorCode.validation_error, f"unknown dependency {op.depends_on_step_id!r}")
            if op.depends_on_step_id in step.depends_on_step_ids:
                raise _err(ErrorCode.validation_error, "the dependency already exists")
        elif op.depends_on_step_id not in step.depends_on_step_ids:
            raise _err(ErrorCode.validation_error, "the dependency does not exist")
    elif isinstance(op, CancelStepOp):
        if status not in (StepStatus.pending, StepStatus.ready):
            raise _err(
                ErrorCode.validation_error, f"a {status} step cannot be cancelled", step_id=step.step_id
            )
    elif isinstance(op, ReopenStepOp) and status not in (StepStatus.blocked, StepStatus.failed):
        raise _err(ErrorCode.validation_error, f"a {status} step cannot be reopened", step_id=step.step_id)


# ---------------------------------------------------------------------------------------- task closers


def decide_complete(
    dag: TaskDag, result_summary: str | None, *, actor: Actor, now: datetime
) -> list[TaskWalEvent]:
    """``agent.task_complete`` (task-board.md §5.10)."""
    held = [s.step_id for s in dag.steps() if s.status in HELD_STEP_STATUSES]
    if held:
        raise _err(ErrorCode.validation_error, f"steps {held} are still claimed/running", step_ids=held)
    missing = [s.step_id for s in dag.steps() if s.required and s.status != StepStatus.completed]
    if missing:
        raise _err(
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
