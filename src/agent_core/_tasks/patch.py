"""The ``agent.task_update`` decision: ordered, atomic patch operations
(docs/task-board.md#orchestrator-edits-by-step-status, docs/task-board.md#agenttask_update-operations).

Ops are checked in order on a scratch copy with the Orchestrator's edit rules; the records are then built
with :class:`~agent_core._tasks.decide.RecordBuilder`, i.e. applied with the same ``TaskDag.apply`` as replay.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent_core._tasks.dag import Actor, TaskDag, find_cycle
from agent_core._tasks.decide import PoolCheck, RecordBuilder, error
from agent_core._tasks.inputs import (
    AddDependencyOp,
    AddStepOp,
    CancelStepOp,
    DeleteStepOp,
    RemoveDependencyOp,
    ReopenStepOp,
    TaskOperation,
    UpdateStepOp,
    UpdateTaskOp,
)
from agent_core._tasks.models import (
    HELD_STEP_STATUSES,
    StepCancelledPayload,
    StepReopenedPayload,
    TaskReopenedPayload,
    TaskStep,
    TaskUpdatedPayload,
    TaskWalEvent,
)
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.base import format_ts_ms
from agent_core.types.enums import StepStatus, TaskStatus

_EDITABLE_FOR_DELETE = (StepStatus.pending, StepStatus.ready, StepStatus.cancelled)
_FROZEN_TOPOLOGY = (StepStatus.completed, StepStatus.cancelled)


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
            raise error(
                ErrorCode.validation_error,
                f"step {op.step_id} is cancelled/reopened and deleted in the same patch",
                op_index=index,
            )
        if isinstance(op, UpdateTaskOp) and op.status is not None:
            status_changes += 1
            if status_changes > 1:
                raise error(
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
                raise error(
                    ErrorCode.dependency_cycle, f"dependency cycle: {' -> '.join(cycle)}", cycle=cycle
                )
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
        raise error(ErrorCode.internal_error, "step vanished while building a patch")
    return step


def _check_op(dag: TaskDag, op: TaskOperation, pool_ok: PoolCheck) -> None:
    """Orchestrator rules of docs/task-board.md#orchestrator-edits-by-step-status at the op's position
    (structure is checked by :meth:`TaskDag.apply_operation`)."""
    if isinstance(op, UpdateTaskOp):
        if op.status == "blocked" and dag.status not in (TaskStatus.pending, TaskStatus.running):
            raise error(ErrorCode.validation_error, f"a {dag.status} Task cannot be blocked")
        if op.status == "pending" and dag.status != TaskStatus.blocked:
            raise error(ErrorCode.validation_error, f"a {dag.status} Task cannot be reopened")
        return
    if isinstance(op, AddStepOp):
        if dag.step(op.step.step_id) is not None:
            raise error(ErrorCode.validation_error, f"step_id {op.step.step_id!r} already exists")
        pool = op.effective_pool()
        if pool is not None and not pool_ok(pool):
            raise error(ErrorCode.validation_error, f"unknown worker_pool_id {pool!r}")
        return
    step = dag.step(op.step_id)
    if step is None:
        raise error(ErrorCode.step_not_found, f"unknown step {op.step_id!r}", step_id=op.step_id)
    status = step.status
    if isinstance(op, UpdateStepOp):
        if op.fields.touches_scheduling and status in _FROZEN_TOPOLOGY:
            raise error(
                ErrorCode.validation_error,
                f"a {status} step only allows title/summary edits",
                step_id=step.step_id,
            )
        pool = op.fields.worker_pool_id
        if pool is not None and not pool_ok(pool):
            raise error(ErrorCode.validation_error, f"unknown worker_pool_id {pool!r}")
    elif isinstance(op, DeleteStepOp):
        if status not in _EDITABLE_FOR_DELETE:
            raise error(
                ErrorCode.validation_error, f"a {status} step cannot be deleted", step_id=step.step_id
            )
        dependents = dag.dependents(step.step_id)
        if dependents:
            raise error(
                ErrorCode.step_has_dependents,
                f"steps {dependents} depend on {step.step_id}",
                step_id=step.step_id,
                dependents=dependents,
            )
    elif isinstance(op, AddDependencyOp | RemoveDependencyOp):
        if status in _FROZEN_TOPOLOGY:
            raise error(ErrorCode.validation_error, f"the dependencies of a {status} step are frozen")
        if isinstance(op, AddDependencyOp):
            if op.depends_on_step_id == op.step_id:
                raise error(ErrorCode.dependency_cycle, f"step {op.step_id} cannot depend on itself")
            if dag.step(op.depends_on_step_id) is None:
                raise error(ErrorCode.validation_error, f"unknown dependency {op.depends_on_step_id!r}")
            if op.depends_on_step_id in step.depends_on_step_ids:
                raise error(ErrorCode.validation_error, "the dependency already exists")
        elif op.depends_on_step_id not in step.depends_on_step_ids:
            raise error(ErrorCode.validation_error, "the dependency does not exist")
    elif isinstance(op, CancelStepOp):
        if status not in (StepStatus.pending, StepStatus.ready):
            raise error(
                ErrorCode.validation_error, f"a {status} step cannot be cancelled", step_id=step.step_id
            )
    elif isinstance(op, ReopenStepOp) and status not in (StepStatus.blocked, StepStatus.failed):
        raise error(ErrorCode.validation_error, f"a {status} step cannot be reopened", step_id=step.step_id)
