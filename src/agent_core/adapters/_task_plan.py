"""The Task board of a run as a plan (an ACP ``plan`` update): folds ``task_*`` event payloads. Pure.

:class:`PlanBoard` keeps, per Task, its title and its steps in creation order with their status, from the
``task_*`` events that mirror the Task WAL records (their payload is the record's: ``task_id``,
``step_id``, the record payload's fields; see ``docs/task-board.md``). :meth:`PlanBoard.entries` lists
every step as ``(content, status)`` with the plan statuses ``pending`` / ``in_progress`` / ``completed``:
ready, blocked and pending steps are pending; claimed and running ones in progress; completed, failed and
cancelled ones completed (a failed or cancelled step says so in its text). A Task of one step-less board
is one entry of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

PlanStatus = Literal["pending", "in_progress", "completed"]

_STEP_STATUS_OF_EVENT: dict[str, str] = {
    "task_step_ready": "ready",
    "task_step_claimed": "claimed",
    "task_step_started": "running",
    "task_step_blocked": "blocked",
    "task_step_completed": "completed",
    "task_step_failed": "failed",
    "task_step_cancelled": "cancelled",
    "task_step_reopened": "pending",
    "task_step_lease_expired": "pending",
}
_PLAN_STATUS: dict[str, PlanStatus] = {
    "pending": "pending",
    "ready": "pending",
    "blocked": "pending",
    "claimed": "in_progress",
    "running": "in_progress",
    "completed": "completed",
    "failed": "completed",
    "cancelled": "completed",
}
_TASK_EVENTS = frozenset({"task_created", "task_updated", "task_running", "task_reopened"}) | frozenset(
    {"task_completed", "task_failed", "task_cancelled"}
)


@dataclass(slots=True)
class _Step:
    title: str
    status: str


@dataclass(slots=True)
class _Task:
    title: str
    status: str = "pending"
    steps: dict[str, _Step] = field(default_factory=dict)


class PlanBoard:
    """The Tasks seen so far (see the module docstring)."""

    def __init__(self) -> None:
        self._tasks: dict[str, _Task] = {}

    def seed(self, task: dict[str, Any]) -> None:
        """Adds a Task as inspect shows it (``ReplayResult.tasks[i].task``: title, status, steps)."""
        if isinstance(task.get("task_id"), str):
            self.apply("task_created", {"task_id": task["task_id"], "task": task})

    def __bool__(self) -> bool:
        return bool(self._tasks)

    def apply(self, event_type: str, payload: dict[str, Any]) -> bool:
        """Folds one ``task_*`` event; ``True`` when the plan changed."""
        task_id = payload.get("task_id")
        if not isinstance(task_id, str):
            return False
        if event_type == "task_created":
            snapshot = payload.get("task") or {}
            created = _Task(str(snapshot.get("title") or task_id), str(snapshot.get("status") or "pending"))
            for step in snapshot.get("steps") or []:
                if isinstance(step, dict) and isinstance(step.get("step_id"), str):
                    created.steps[step["step_id"]] = _Step(
                        str(step.get("title") or step["step_id"]), str(step.get("status") or "pending")
                    )
            self._tasks[task_id] = created
            return True
        task = self._tasks.get(task_id)
        if task is None:
            return False  # created before this board started watching: nothing to show for it
        if event_type == "task_updated":
            for op in payload.get("operations") or []:
                if isinstance(op, dict):
                    _apply_operation(task, op)
            summary = payload.get("task_summary") or {}
            if isinstance(summary, dict) and isinstance(summary.get("status"), str):
                task.status = summary["status"]
            return True
        if event_type in _TASK_EVENTS:
            status = {"task_running": "running", "task_reopened": "pending"}.get(event_type)
            task.status = status or event_type.removeprefix("task_")
            return True
        step = task.steps.get(str(payload.get("step_id")))
        if step is None:
            return False
        new = _STEP_STATUS_OF_EVENT.get(event_type) or payload.get("status")
        if not isinstance(new, str) or new == step.status:
            return False
        step.status = new
        return True

    def entries(self) -> list[tuple[str, PlanStatus]]:
        """Every step of every Task, in order, as ``(content, plan status)``."""
        out: list[tuple[str, PlanStatus]] = []
        many = len(self._tasks) > 1
        for task in self._tasks.values():
            if not task.steps:
                out.append((task.title, _PLAN_STATUS.get(task.status, "pending")))
                continue
            for step in task.steps.values():
                text = f"{task.title}: {step.title}" if many else step.title
                if step.status in ("failed", "cancelled"):
                    text += f" ({step.status})"
                out.append((text, _PLAN_STATUS.get(step.status, "pending")))
        return out


def _apply_operation(task: _Task, op: dict[str, Any]) -> None:
    kind = op.get("op")
    if kind == "update_task" and isinstance(op.get("title"), str):
        task.title = op["title"]
    elif kind == "add_step":
        step = op.get("step") or {}
        step_id = step.get("step_id") if isinstance(step, dict) else None
        if isinstance(step_id, str):
            task.steps[step_id] = _Step(str(step.get("title") or step_id), "pending")
    elif kind == "update_step":
        fields = op.get("fields") or {}
        current = task.steps.get(str(op.get("step_id")))
        if current is not None and isinstance(fields, dict) and isinstance(fields.get("title"), str):
            current.title = fields["title"]
    elif kind == "delete_step":
        task.steps.pop(str(op.get("step_id")), None)
