"""JSON shapes returned by the Task tools and inspect (docs/task-board.md#task-tools;
docs/runs.md#replay-and-inspect)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core._tasks.dag import TaskDag
from agent_core._tasks.models import CLOSED_STEP_STATUSES, HELD_STEP_STATUSES, TaskStep, TaskWalEvent
from agent_core.errors import AgentCoreError, ErrorCode, TaskWalUnavailableError
from agent_core.types import events as ev
from agent_core.types.runtime import TaskInspectView


def step_view(step: TaskStep, *, orchestrator: bool) -> dict[str, Any]:
    """A step as tools return it. For the Orchestrator a held step also shows ``updated_after_dispatch``
    and, when true, the ``dispatch_snapshot`` captured at claim time."""
    out: dict[str, Any] = {
        "step_id": step.step_id,
        "title": step.title,
        "summary": step.summary,
        "status": step.status.value,
        "depends_on_step_ids": list(step.depends_on_step_ids),
        "required": step.required,
        "worker_pool_id": step.worker_pool_id,
        "claimed_by_agent_id": step.claimed_by_agent_id,
        "claimed_by_run_id": step.claimed_by_run_id,
        "lease_expires_at": step.lease_expires_at,
        "result_summary": step.result_summary,
        "artifact_ids": list(step.artifact_ids),
        "status_reason": step.status_reason,
        "created_at": step.created_at,
        "updated_at": step.updated_at,
    }
    if orchestrator and step.status in HELD_STEP_STATUSES:
        updated = bool(step.metadata.get("updated_after_dispatch"))
        out["updated_after_dispatch"] = updated
        if updated:
            out["dispatch_snapshot"] = step.metadata.get("dispatch_snapshot")
    return out


def task_summary(dag: TaskDag, *, read_only: bool) -> dict[str, Any]:
    """The ``TaskSummary`` of write results and ``agent.task_list`` (docs/task-board.md#task-tools)."""
    task = dag.task
    return {
        "task_id": task.task_id,
        "title": task.title,
        "status": task.status.value,
        "read_only": read_only,
        "step_status_counts": dag.status_counts(),
        "diagnostics": dag.diagnostics(),
        "created_at": task.created_at,
        "updated_at": task.updated_at,
    }


def task_view(
    dag: TaskDag, *, read_only: bool, include_terminal_steps: bool, orchestrator: bool
) -> dict[str, Any]:
    """The full Task of ``agent.task_get``; closed steps are counted, not listed, unless requested."""
    task = dag.task
    steps = [s for s in task.steps if include_terminal_steps or s.status not in CLOSED_STEP_STATUSES]
    return {
        "task_id": task.task_id,
        "wal_path": task.wal_path,
        "title": task.title,
        "summary": task.summary,
        "status": task.status.value,
        "read_only": read_only,
        "root_step_ids": list(task.root_step_ids),
        "steps": [step_view(s, orchestrator=orchestrator) for s in steps],
        "omitted_terminal_step_count": len(task.steps) - len(steps),
        "step_status_counts": dag.status_counts(),
        "diagnostics": dag.diagnostics(),
        "created_by_agent_id": task.created_by_agent_id,
        "created_by_run_id": task.created_by_run_id,
        "created_at": task.created_at,
        "updated_at": task.updated_at,
    }


def inspect_task(dag: TaskDag) -> dict[str, Any]:
    """Inspect snapshot: every step with its runtime metadata (dispatch snapshot next to current state)."""
    data = dag.task.model_dump(mode="json")
    data["diagnostics"] = dag.diagnostics()
    data["step_status_counts"] = dag.status_counts()
    return data


def write_result(dag: TaskDag, records: list[TaskWalEvent], **extras: Any) -> dict[str, Any]:
    """The write-tool result: Task summary, changed steps and the WAL event ids in WAL order."""
    changed: list[str] = []
    for record in records:
        if record.event_type == "task_created":
            changed.extend(s.step_id for s in dag.steps())
        elif record.step_id is not None and record.step_id not in changed:
            changed.append(record.step_id)
    steps = [dag.step(step_id) for step_id in changed]
    return {
        "task": task_summary(dag, read_only=dag.task.terminal),
        "changed_steps": [step_view(s, orchestrator=True) for s in steps if s is not None],
        "wal_event_ids": [r.event_id for r in records],
        **extras,
    }


def mirror_event(wal_path: str, record: TaskWalEvent) -> ev.TaskWalMirror:
    """The runtime event mirroring one WAL record (docs/events.md#catalogue)."""
    fields = {
        "task_id": record.task_id,
        "step_id": record.step_id,
        "wal_path": wal_path,
        "wal_seq": record.wal_seq,
        "wal_event_id": record.event_id,
        **record.payload.model_dump(mode="json"),
    }
    return ev.WAL_MIRRORS[record.event_type](fields)


def unavailable_view(
    path: Path, err: AgentCoreError, events: list[dict[str, Any]] | None = None
) -> TaskInspectView:
    """The inspect view of a WAL that cannot be replayed (``error`` = ``task_wal_unavailable``)."""
    payload = TaskWalUnavailableError(
        ErrorCode.task_wal_unavailable, err.message, details=dict(err.details)
    ).to_payload()
    task_id = err.details.get("task_id")
    return TaskInspectView(
        task_id=task_id if isinstance(task_id, str) else None,
        wal_path=str(path),
        status=None,
        task=None,
        wal_events=events or [],
        error=payload,
    )
