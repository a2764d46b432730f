"""The Task DAG state and its single mutation, :meth:`TaskDag.apply` (docs/task-board.md#status-model,
docs/task-board.md#wal-records).

``apply`` is used both by replay and by the live path (which applies the very records it has just appended),
so the two cannot drift. It verifies every record against the current state — sequence, session, task id and
the legality of the transition (docs/task-board.md#restore-and-replay) — and raises :class:`IllegalTransition`
otherwise; ``previous_status`` in payloads is informational and not compared. No I/O happens here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from agent_core._tasks.cycles import find_cycle as find_cycle
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
    dedupe,
    operation_adapter,
)
from agent_core._tasks.models import (
    CORE_ACTOR,
    HELD_STEP_STATUSES,
    TERMINAL_EVENT_STATUS,
    TERMINAL_TASK_STATUSES,
    UNFINISHED_STEP_STATUSES,
    Task,
    TaskCreatedEvent,
    TaskStep,
    TaskSummaryPayload,
    TaskWalEvent,
)
from agent_core.errors import ErrorCode, InvalidArgumentError, StepNotFoundError, TaskError
from agent_core.types.enums import StepStatus, TaskStatus

_UPDATABLE = (
    StepStatus.claimed,
    StepStatus.running,
    StepStatus.pending,
    StepStatus.ready,
    StepStatus.blocked,
)
_UNFINISHED = tuple(UNFINISHED_STEP_STATUSES)
# tuples, not the frozensets, on the replay path: an enum member's hash is a Python call, a tuple finds it
# by identity
_HELD = tuple(HELD_STEP_STATUSES)
_TERMINAL = tuple(TERMINAL_TASK_STATUSES)


def _set(model: BaseModel, **values: Any) -> None:
    """Assigns already-validated field values. The state models do not validate on assignment, so writing
    ``__dict__`` is equivalent to attribute assignment without pydantic's per-attribute overhead, which
    dominates the replay of long WALs."""
    model.__dict__.update(values)


_CREATED_STEP_FIELDS = frozenset(
    {
        "step_id",
        "title",
        "summary",
        "depends_on_step_ids",
        "required",
        "worker_pool_id",
        "updated_at",
        "created_at",
    }
)
_COPIED_FIELDS = ("step_id", "title", "summary", "required", "worker_pool_id", "updated_at")


def created_step(snapshot: dict[str, Any], created_at: str) -> TaskStep:
    """The :class:`TaskStep` that ``TaskStep(...)`` builds from a validated ``task_created`` snapshot step
    (``snapshot``, its ``__dict__``), without re-validating values already of their types
    (``model_construct`` with the constructor's fields set); ``tests/unit/test_task_dag.py`` checks the
    result equals the validated instance."""
    values: dict[str, Any] = {name: snapshot[name] for name in _COPIED_FIELDS}
    values.update(
        status=StepStatus.pending,
        depends_on_step_ids=dedupe(snapshot["depends_on_step_ids"]),
        artifact_ids=[],
        created_at=created_at,
        metadata={},
    )
    return TaskStep.model_construct(_fields_set=set(_CREATED_STEP_FIELDS), **values)


class IllegalTransition(InvalidArgumentError):
    """A record (or operation) that is not legal in the current DAG state (``validation_error``; an
    unknown step is a :class:`~agent_core.errors.StepNotFoundError`, a cycle a ``dependency_cycle``
    :class:`~agent_core.errors.TaskError`)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Actor:
    """Who triggers a commit; injected into ``actor_agent_id`` / ``actor_run_id`` of every record."""

    agent_id: str
    run_id: str | None


CORE = Actor(agent_id=CORE_ACTOR, run_id=None)


class TaskDag:
    """One Task DAG rebuilt from (and kept in step with) its WAL."""

    __slots__ = ("_steps", "_task_fields", "last_wal_seq", "run_claims", "session_id", "task")

    def __init__(
        self, task: Task, *, session_id: str, last_wal_seq: int, run_claims: dict[str, str] | None = None
    ) -> None:
        self.task = task
        self._task_fields: dict[str, Any] = task.__dict__
        """``task.__dict__`` (pydantic writes fields into it in place; see :meth:`apply_fields`)."""
        self.session_id = session_id
        self.last_wal_seq = last_wal_seq
        self.run_claims: dict[str, str] = dict(run_claims or {})
        """Worker run id → the one step it ever claimed (a run claims at most one step,
        docs/task-board.md#claims-and-leases)."""
        self._steps: dict[str, TaskStep] = {s.step_id: s for s in task.steps}

    # ------------------------------------------------------------------ construction / copies

    @classmethod
    def from_created(cls, event: TaskWalEvent, *, wal_path: str | None = None) -> TaskDag:
        """Initialises a DAG from its ``task_created`` record (``wal_seq`` 1); ``wal_path`` overrides the
        snapshot's value (replay trusts the actual file location)."""
        if not isinstance(event, TaskCreatedEvent):
            raise IllegalTransition(message="the first WAL record must be task_created")
        if event.wal_seq != 1:
            raise IllegalTransition(message="task_created must have wal_seq 1")
        snap = event.payload.task
        if snap.task_id != event.task_id:
            raise IllegalTransition(message="task_created snapshot task_id differs from the record")
        snapshots = [s.__dict__ for s in snap.steps]  # see apply_fields: no per-field __getattr__ hook
        if snap.status != TaskStatus.pending or any(s["status"] != StepStatus.pending for s in snapshots):
            raise IllegalTransition(message="a created Task and its steps must be pending")
        if not snapshots:
            raise IllegalTransition(message="a Task needs at least one step")
        created_at = event.created_at
        steps = [created_step(s, created_at) for s in snapshots]
        if len({s["step_id"] for s in snapshots}) != len(steps):
            raise IllegalTransition(message="duplicate step_id in task_created")
        task = Task(
            task_id=snap.task_id,
            wal_path=wal_path if wal_path is not None else snap.wal_path,
            title=snap.title,
            summary=snap.summary,
            status=TaskStatus.pending,
            steps=steps,
            created_by_agent_id=snap.created_by_agent_id,
            created_by_run_id=snap.created_by_run_id,
            created_at=snap.created_at,
            updated_at=event.created_at,
        )
        dag = cls(task, session_id=event.session_id, last_wal_seq=1)
        dag._check_structure()
        dag._recompute_roots()
        return dag

    def clone(self) -> TaskDag:
        steps = [
            s.model_copy(
                update={
                    "depends_on_step_ids": list(s.depends_on_step_ids),
                    "artifact_ids": list(s.artifact_ids),
                    "metadata": copy.deepcopy(s.metadata) if s.metadata else {},
                }
            )
            for s in self.task.steps
        ]
        task = self.task.model_copy(update={"steps": steps, "root_step_ids": list(self.task.root_step_ids)})
        return TaskDag(
            task, session_id=self.session_id, last_wal_seq=self.last_wal_seq, run_claims=self.run_claims
        )

    def snapshot(self) -> dict[str, Any]:
        """The full state (Task with runtime fields, sequence, per-run claims) for equality and inspect."""
        return {
            "task": self.task.model_dump(mode="json"),
            "last_wal_seq": self.last_wal_seq,
            "run_claims": dict(sorted(self.run_claims.items())),
        }

    # ------------------------------------------------------------------ queries

    @property
    def task_id(self) -> str:
        return self.task.task_id

    @property
    def status(self) -> TaskStatus:
        return self.task.status

    def step(self, step_id: str) -> TaskStep | None:
        return self._steps.get(step_id)

    def steps(self) -> list[TaskStep]:
        """Steps in creation order."""
        return self.task.steps

    def deps_completed(self, step: TaskStep) -> bool:
        steps = self._steps
        for dep in step.depends_on_step_ids:
            other = steps.get(dep)
            if other is None or other.status != StepStatus.completed:
                return False
        return True

    def dependents(self, step_id: str) -> list[str]:
        return [s.step_id for s in self.task.steps if step_id in s.depends_on_step_ids]

    def status_counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in StepStatus}
        for s in self.task.steps:
            counts[s.status.value] += 1
        return counts

    def diagnostics(self) -> dict[str, bool]:
        """``stalled`` / ``completeable`` (docs/task-board.md#task-transitions); never WAL state."""
        statuses = [s.status for s in self.task.steps]
        active = any(st in (StepStatus.ready, StepStatus.claimed, StepStatus.running) for st in statuses)
        waiting = any(st in (StepStatus.failed, StepStatus.blocked, StepStatus.pending) for st in statuses)
        completeable = all(
            s.status == StepStatus.completed for s in self.task.steps if s.required
        ) and not any(st in HELD_STEP_STATUSES for st in statuses)
        return {"stalled": not self.task.terminal and not active and waiting, "completeable": completeable}

    def task_summary_payload(self) -> TaskSummaryPayload:
        return TaskSummaryPayload(
            task_id=self.task.task_id,
            title=self.task.title,
            status=self.task.status,
            step_status_counts=self.status_counts(),
        )

    # ------------------------------------------------------------------ the one mutation

    def apply(self, event: TaskWalEvent) -> None:
        """Applies one record; raises :class:`IllegalTransition` if it is not legal here."""
        self.apply_fields(event, event.__dict__)

    def apply_fields(self, event: TaskWalEvent, rec: dict[str, Any]) -> None:
        """:meth:`apply` given ``event.__dict__`` (``rec``), for a caller that has already read it.

        Fields are read from the models' ``__dict__``: every attribute read on a pydantic model (and its
        ``__dict__`` read too) goes through the ``__getattr__`` hook, ~10x a dict lookup, which dominated
        the replay of long WALs. Writes go to ``__dict__`` as well (see :func:`_set`).
        """
        state = self._task_fields
        seq = rec["wal_seq"]
        if (
            seq != self.last_wal_seq + 1
            or rec["session_id"] != self.session_id
            or rec["task_id"] != state["task_id"]
            or state["status"] in _TERMINAL
        ):
            self._reject_header(event)
        handler = _HANDLERS.get(rec["event_type"])
        if handler is None:
            raise IllegalTransition(message=f"{event.event_type} may only be the first record")
        handler(self, event, rec)
        self.last_wal_seq = seq
        state["updated_at"] = rec["created_at"]

    def _reject_header(self, event: TaskWalEvent) -> None:
        """Raises for the first common-field check ``event`` fails (kept off :meth:`apply`'s hot path)."""
        task = self.task
        seq = event.wal_seq
        if seq != self.last_wal_seq + 1:
            raise IllegalTransition(
                message=f"wal_seq {seq} does not follow {self.last_wal_seq}", details={"wal_seq": seq}
            )
        if event.session_id != self.session_id:
            raise IllegalTransition(message="record session_id differs from the WAL's session")
        if event.task_id != task.task_id:
            raise IllegalTransition(message="record task_id differs from the WAL's first line")
        raise IllegalTransition(message=f"Task {task.task_id} is already {task.status}")

    # ------------------------------------------------------------------ task-level handlers

    def _on_task_running(self, ev: Any, rec: dict[str, Any]) -> None:
        self._require_task(TaskStatus.pending, ev)
        self.task.status = TaskStatus.running

    def _on_task_reopened(self, ev: Any, rec: dict[str, Any]) -> None:
        self._require_task(TaskStatus.blocked, ev)
        self.task.status = TaskStatus.pending

    def _on_task_terminal(self, ev: Any, rec: dict[str, Any]) -> None:
        if ev.event_type == "task_completed":
            held = [s.step_id for s in self.task.steps if s.status in _HELD]
            missing = [s.step_id for s in self.task.steps if s.required and s.status != StepStatus.completed]
            if held or missing:
                raise IllegalTransition(message="task_completed while steps are held or required steps open")
        self.task.status = TERMINAL_EVENT_STATUS[ev.event_type]

    def _on_task_updated(self, ev: Any, rec: dict[str, Any]) -> None:
        touched: set[str] = set()
        for index, raw in enumerate(ev.payload.operations):
            try:
                op = operation_adapter.validate_python(raw)
            except ValueError as exc:
                raise IllegalTransition(message=f"operation {index} is malformed: {exc}") from exc
            self.apply_operation(op, ev.created_at, replay=True, touched=touched)
        self.finish_operations(ev.created_at)
        for step_id in ev.payload.updated_after_dispatch_step_ids:
            step = self._steps.get(step_id)
            if step is None or step.status not in HELD_STEP_STATUSES:
                raise IllegalTransition(message=f"updated_after_dispatch step {step_id!r} is not held")
            step.metadata["updated_after_dispatch"] = True

    # ------------------------------------------------------------------ step-level handlers

    def _on_step_ready(self, ev: Any, rec: dict[str, Any]) -> None:
        step, values = self._step_values(ev, rec, (StepStatus.pending,))
        if self.task.status == TaskStatus.blocked:
            raise IllegalTransition(message="no ready advance while the Task is blocked")
        if values["depends_on_step_ids"] and not self.deps_completed(step):
            raise IllegalTransition(message=f"step {step.step_id} has unfinished dependencies")
        values["status"] = StepStatus.ready
        values["updated_at"] = rec["created_at"]

    def _on_step_claimed(self, ev: Any, rec: dict[str, Any]) -> None:
        step, values = self._step_values(ev, rec, (StepStatus.ready,))
        p = rec["payload"].__dict__
        run_id = p["claimed_by_run_id"]
        if self.task.status == TaskStatus.blocked:
            raise IllegalTransition(message="no claims while the Task is blocked")
        if values["depends_on_step_ids"] and not self.deps_completed(step):
            raise IllegalTransition(message=f"step {step.step_id} has unfinished dependencies")
        if run_id in self.run_claims:
            raise IllegalTransition(message=f"run {run_id} already claimed a step")
        snapshot = {
            "title": values["title"],
            "summary": values["summary"],
            "depends_on_step_ids": list(values["depends_on_step_ids"]),
            "worker_pool_id": values["worker_pool_id"],
            "required": values["required"],
        }
        values["status"] = StepStatus.claimed
        values["claimed_by_agent_id"] = p["claimed_by_agent_id"]
        values["claimed_by_run_id"] = run_id
        values["lease_expires_at"] = p["lease_expires_at"]
        values["metadata"] = {"dispatch_snapshot": snapshot, "updated_after_dispatch": False}
        values["updated_at"] = rec["created_at"]
        self.run_claims[run_id] = values["step_id"]

    def _on_step_started(self, ev: Any, rec: dict[str, Any]) -> None:
        values = self._step_values(ev, rec, (StepStatus.claimed,))[1]
        values["status"] = StepStatus.running
        values["lease_expires_at"] = rec["payload"].__dict__["lease_expires_at"]
        values["updated_at"] = rec["created_at"]

    def _on_step_updated(self, ev: Any, rec: dict[str, Any]) -> None:
        # the most frequent record of long WALs: _step_values inlined
        step = self._steps.get(rec["step_id"])
        values = step.__dict__ if step is not None else None
        if values is None or values["status"] not in _UPDATABLE:
            values = self._step_values(ev, rec, _UPDATABLE)[1]  # raises
        p = rec["payload"].__dict__
        status, lease = values["status"], p["lease_expires_at"]
        if p["status"] != status:
            raise IllegalTransition(message="task_step_updated cannot change the step status")
        if (status in _HELD) != (lease is not None):
            raise IllegalTransition(message="a lease is carried exactly by held steps")
        values["result_summary"] = p["result_summary"]
        values["artifact_ids"] = list(p["artifact_ids"])
        values["lease_expires_at"] = lease
        values["updated_at"] = rec["created_at"]

    def _on_step_blocked(self, ev: Any, rec: dict[str, Any]) -> None:
        step = self._require_step(
            ev, (StepStatus.claimed, StepStatus.running, StepStatus.pending, StepStatus.ready)
        )
        p = ev.payload
        _set(
            step,
            status=StepStatus.blocked,
            claimed_by_agent_id=None,
            claimed_by_run_id=None,
            lease_expires_at=None,
            result_summary=p.result_summary,
            artifact_ids=list(p.artifact_ids),
            status_reason=p.reason,
            metadata={},
            updated_at=ev.created_at,
        )

    def _on_step_completed(self, ev: Any, rec: dict[str, Any]) -> None:
        # A held step keeps running even when its dependencies were edited after dispatch
        # (docs/task-board.md#orchestrator-edits-by-step-status).
        values = self._step_values(ev, rec, (StepStatus.claimed, StepStatus.running, StepStatus.ready))[1]
        p = rec["payload"].__dict__
        values["status"] = StepStatus.completed
        values["lease_expires_at"] = None
        values["result_summary"] = p["result_summary"]
        values["metadata"] = {}
        values["updated_at"] = rec["created_at"]
        values["artifact_ids"] = list(p["artifact_ids"])

    def _on_step_failed(self, ev: Any, rec: dict[str, Any]) -> None:
        step = self._require_step(ev, _UNFINISHED)
        p = ev.payload
        self._close(step, StepStatus.failed, ev, artifact_ids=list(p.artifact_ids), status_reason=p.reason)

    def _on_step_cancelled(self, ev: Any, rec: dict[str, Any]) -> None:
        step = self._require_step(ev, _UNFINISHED)
        self._close(step, StepStatus.cancelled, ev, status_reason=ev.payload.reason)

    def _on_step_reopened(self, ev: Any, rec: dict[str, Any]) -> None:
        step = self._require_step(ev, (StepStatus.blocked, StepStatus.failed))
        step.reset_execution()
        _set(step, status=StepStatus.pending, updated_at=ev.created_at)

    def _on_step_lease_expired(self, ev: Any, rec: dict[str, Any]) -> None:
        step = self._require_step(ev, (StepStatus.claimed, StepStatus.running))
        p = ev.payload
        if p.claimed_by_run_id != step.claimed_by_run_id or p.claimed_by_agent_id != step.claimed_by_agent_id:
            raise IllegalTransition(message="lease expiry names a different claim holder")
        step.reset_execution()
        _set(step, status=StepStatus.pending, updated_at=ev.created_at)

    def _close(self, step: TaskStep, status: StepStatus, ev: Any, **extra: Any) -> None:
        """Moves a step to a closed status: the lease ends, ``claimed_by_*`` stay as history."""
        _set(
            step,
            status=status,
            lease_expires_at=None,
            result_summary=ev.payload.result_summary,
            metadata={},
            updated_at=ev.created_at,
            **extra,
        )

    def _require_task(self, status: TaskStatus, ev: Any) -> None:
        if self.task.status != status:
            raise IllegalTransition(
                message=f"{ev.event_type} requires a {status} Task, not {self.task.status}"
            )

    def _require_step(self, ev: Any, allowed: tuple[StepStatus, ...]) -> TaskStep:
        step = self._steps.get(ev.step_id)
        if step is None:
            raise IllegalTransition(message=f"{ev.event_type} names unknown step {ev.step_id!r}")
        if step.status not in allowed:
            raise IllegalTransition(
                message=f"{ev.event_type} is illegal for step {step.step_id} in status {step.status}",
                details={"step_id": step.step_id, "status": step.status.value},
            )
        return step

    def _step_values(
        self, ev: Any, rec: dict[str, Any], allowed: tuple[StepStatus, ...]
    ) -> tuple[TaskStep, dict[str, Any]]:
        """:meth:`_require_step` and the step's ``__dict__`` (see :meth:`apply_fields`)."""
        step = self._steps.get(rec["step_id"])
        if step is not None:
            values = step.__dict__
            if values["status"] in allowed:
                return step, values
        checked = self._require_step(ev, allowed)  # raises, naming the missing step or its status
        return checked, checked.__dict__

    # ------------------------------------------------------------------ patch operations

    def apply_operation(self, op: TaskOperation, ts: str, *, replay: bool, touched: set[str]) -> None:
        """Applies one ``task_update`` operation with structural checks only.

        With ``replay=True`` (inside ``task_updated``) ``cancel_step``, ``reopen_step`` and the
        ``status="pending"`` part of ``update_task`` are skipped: their own records apply them. With
        ``replay=False`` (the decision's scratch copy) they take effect at their position.
        """
        if isinstance(op, UpdateTaskOp):
            if op.title is not None:
                self.task.title = op.title
            if op.summary is not None:
                self.task.summary = op.summary
            if op.status == "blocked":
                if self.task.status not in (TaskStatus.pending, TaskStatus.running):
                    raise IllegalTransition(message=f"a {self.task.status} Task cannot be blocked")
                self.task.status = TaskStatus.blocked
            elif op.status == "pending" and not replay:
                if self.task.status != TaskStatus.blocked:
                    raise IllegalTransition(message="only a blocked Task can be reopened")
                self.task.status = TaskStatus.pending
        elif isinstance(op, AddStepOp):
            if op.step.step_id in self._steps:
                raise IllegalTransition(message=f"step_id {op.step.step_id!r} already exists")
            step = TaskStep(
                step_id=op.step.step_id,
                title=op.step.title,
                summary=op.step.summary,
                depends_on_step_ids=dedupe(op.step.depends_on_step_ids),
                required=op.effective_required(),
                worker_pool_id=op.effective_pool(),
                created_at=ts,
                updated_at=ts,
            )
            self.task.steps.append(step)
            self._steps[step.step_id] = step
            touched.add(step.step_id)
        elif isinstance(op, UpdateStepOp):
            step = self._op_step(op.step_id)
            fields = op.fields
            for name in fields.model_fields_set:
                value = getattr(fields, name)
                setattr(step, name, dedupe(value) if name == "depends_on_step_ids" else value)
            step.updated_at = ts
            touched.add(step.step_id)
        elif isinstance(op, DeleteStepOp):
            step = self._op_step(op.step_id)
            self.task.steps.remove(step)
            del self._steps[step.step_id]
            touched.discard(step.step_id)
        elif isinstance(op, AddDependencyOp):
            step = self._op_step(op.step_id)
            if op.depends_on_step_id not in self._steps:
                raise IllegalTransition(message=f"unknown dependency {op.depends_on_step_id!r}")
            if op.depends_on_step_id in step.depends_on_step_ids:
                raise IllegalTransition(message=f"{op.step_id} already depends on {op.depends_on_step_id}")
            step.depends_on_step_ids.append(op.depends_on_step_id)
            step.updated_at = ts
            touched.add(step.step_id)
        elif isinstance(op, RemoveDependencyOp):
            step = self._op_step(op.step_id)
            if op.depends_on_step_id not in step.depends_on_step_ids:
                raise IllegalTransition(message=f"{op.step_id} does not depend on {op.depends_on_step_id}")
            step.depends_on_step_ids.remove(op.depends_on_step_id)
            step.updated_at = ts
            touched.add(step.step_id)
        elif not replay and isinstance(op, CancelStepOp):
            step = self._op_step(op.step_id)
            step.status = StepStatus.cancelled
            step.status_reason = op.reason
            step.updated_at = ts
        elif not replay and isinstance(op, ReopenStepOp):
            step = self._op_step(op.step_id)
            step.status = StepStatus.pending
            step.reset_execution()
            step.updated_at = ts

    def finish_operations(self, ts: str) -> None:
        """Whole-DAG checks after a patch (references, cycles), then ready demotion and root ids."""
        self._check_structure()
        for step in self.task.steps:
            if step.status == StepStatus.ready and not self.deps_completed(step):
                step.status = StepStatus.pending
                step.updated_at = ts
        self._recompute_roots()

    def _op_step(self, step_id: str) -> TaskStep:
        step = self._steps.get(step_id)
        if step is None:
            raise StepNotFoundError(ErrorCode.step_not_found, f"unknown step {step_id!r}")
        return step

    def _check_structure(self) -> None:
        for step in self.task.steps:
            for dep in step.depends_on_step_ids:
                if dep not in self._steps:
                    raise IllegalTransition(
                        message=f"step {step.step_id} depends on unknown step {dep!r}",
                        details={"step_id": step.step_id, "depends_on_step_id": dep},
                    )
        cycle = find_cycle(self.task.steps)
        if cycle is not None:
            raise TaskError(
                ErrorCode.dependency_cycle,
                f"dependency cycle: {' -> '.join(cycle)}",
                details={"cycle": cycle},
            )

    def _recompute_roots(self) -> None:
        self.task.root_step_ids = [s.step_id for s in self.task.steps if not s.depends_on_step_ids]


_HANDLERS: dict[str, Callable[[TaskDag, Any, dict[str, Any]], None]] = {
    "task_running": TaskDag._on_task_running,
    "task_updated": TaskDag._on_task_updated,
    "task_reopened": TaskDag._on_task_reopened,
    "task_completed": TaskDag._on_task_terminal,
    "task_failed": TaskDag._on_task_terminal,
    "task_cancelled": TaskDag._on_task_terminal,
    "task_step_ready": TaskDag._on_step_ready,
    "task_step_claimed": TaskDag._on_step_claimed,
    "task_step_started": TaskDag._on_step_started,
    "task_step_updated": TaskDag._on_step_updated,
    "task_step_blocked": TaskDag._on_step_blocked,
    "task_step_completed": TaskDag._on_step_completed,
    "task_step_failed": TaskDag._on_step_failed,
    "task_step_cancelled": TaskDag._on_step_cancelled,
    "task_step_reopened": TaskDag._on_step_reopened,
    "task_step_lease_expired": TaskDag._on_step_lease_expired,
}
