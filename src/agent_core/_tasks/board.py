"""The Task board summary text (docs/task-board.md#the-board-summary, docs/context.md#the-task-board-summary).

Built only from in-memory DAGs and the recent-changes ring buffer. The caller (prompt composer) wraps the
text in ``<task_board>...</task_board>``. Ordering: (1) blocked Tasks/steps, (2) claimed/running steps,
(3) the viewer's own claimed/running steps, (4) ready steps claimable by the viewer's pool (Orchestrator:
all pools, grouped by pool), (5) recent WAL changes. Every Task keeps a header line with its per-status
counts; listed items are added in priority order while the text stays within ``token_budget``; items that
do not fit are dropped and their Task is reported as trimmed to counts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from agent_core._tasks.dag import TaskDag
from agent_core._tasks.models import HELD_STEP_STATUSES, TaskStep
from agent_core.types.base import parse_ts
from agent_core.types.enums import StepStatus, TaskStatus

_SUMMARY_CHARS = 160
_TASK_ORDER = {TaskStatus.blocked: 0, TaskStatus.running: 1, TaskStatus.pending: 2}


@dataclass(frozen=True, kw_only=True, slots=True)
class RecentChange:
    """One applied WAL record as remembered for the board."""

    created_at: str
    task_id: str
    step_id: str | None
    event_type: str
    actor_agent_id: str


def default_token_estimate(text: str) -> int:
    """Default token estimate (about four characters per token)."""
    return (len(text) + 3) // 4


def _item(step: TaskStep, task_id: str) -> str:
    summary = (
        step.summary if len(step.summary) <= _SUMMARY_CHARS else step.summary[: _SUMMARY_CHARS - 1] + "…"
    )
    return (
        f"- task_id={task_id} step_id={step.step_id} status={step.status.value} "
        f"worker_pool_id={step.worker_pool_id or 'default'} "
        f"claimed_by_agent_id={step.claimed_by_agent_id or 'none'} "
        f"lease_expires_at={step.lease_expires_at or 'none'} "
        f"artifact_ids={','.join(step.artifact_ids) or 'none'} summary={summary!r}"
    )


def render_task_board(
    dags: Sequence[TaskDag],
    recent: Sequence[RecentChange],
    *,
    viewer_agent_id: str,
    in_scope: Callable[[TaskStep], bool] | None,
    default_pool: str,
    token_budget: int,
    recent_limit: int,
    recent_window_minutes: int,
    now: datetime,
    estimate_tokens: Callable[[str], int] | None = None,
) -> str | None:
    """Renders the board for one viewer; ``None`` when there is no active Task.

    ``in_scope`` restricts steps for a worker viewer (its dispatch scope); ``None`` means Orchestrator.
    """
    if not dags:
        return None
    count = estimate_tokens or default_token_estimate
    ordered = sorted(dags, key=lambda d: (_TASK_ORDER.get(d.status, 3), d.task.created_at, d.task_id))

    def visible(dag: TaskDag) -> list[TaskStep]:
        return [s for s in dag.steps() if in_scope is None or in_scope(s)]

    headers: list[str] = []
    for dag in ordered:
        counts: dict[str, int] = {}
        for step in visible(dag):
            counts[step.status.value] = counts.get(step.status.value, 0) + 1
        text = ", ".join(f"{k}: {v}" for k, v in counts.items()) or "no steps in scope"
        headers.append(f"Task {dag.task_id} [{dag.status.value}] {dag.task.title!r} — {text}")

    sections: list[tuple[str, list[tuple[str, str]]]] = [
        ("Blocked:", []),
        ("Claimed/running:", []),
        ("Your claimed/running steps:", []),
        ("Ready steps:", []),
        ("Recent changes (newest first):", []),
    ]
    for dag in ordered:
        if dag.status == TaskStatus.blocked:
            sections[0][1].append((dag.task_id, f"- task_id={dag.task_id} status=blocked (whole Task)"))
    for dag in ordered:
        for step in visible(dag):
            if step.status == StepStatus.blocked:
                sections[0][1].append((dag.task_id, _item(step, dag.task_id)))
            elif step.status in HELD_STEP_STATUSES:
                mine = step.claimed_by_agent_id == viewer_agent_id
                sections[2 if mine else 1][1].append((dag.task_id, _item(step, dag.task_id)))
    ready = [
        (step.worker_pool_id or default_pool, dag.task_id, step)
        for dag in ordered
        if dag.status in (TaskStatus.pending, TaskStatus.running)
        for step in visible(dag)
        if step.status == StepStatus.ready
    ]
    ready.sort(key=lambda r: r[0])
    sections[3][1].extend((task_id, _item(step, task_id)) for _, task_id, step in ready)
    cutoff = now - timedelta(minutes=recent_window_minutes)
    fresh = sorted(
        (r for r in recent if parse_ts(r.created_at) >= cutoff), key=lambda r: r.created_at, reverse=True
    )[:recent_limit]
    for change in fresh:
        where = change.task_id + (f"/{change.step_id}" if change.step_id else "")
        sections[4][1].append(
            ("", f"- {change.created_at} {where} {change.event_type} by {change.actor_agent_id}")
        )

    lines = [f"Active Tasks: {len(ordered)} (internal Task board)"]
    used = count(lines[0])
    shown_headers = 0
    for header in headers:
        cost = count(header) + 1
        if used + cost > token_budget and shown_headers > 0:
            break
        lines.append(header)
        used += cost
        shown_headers += 1
    if shown_headers < len(headers):
        lines.append(f"(+{len(headers) - shown_headers} more active Tasks not shown)")
        used += count(lines[-1]) + 1
    trimmed: dict[str, int] = {}
    kept_sections: list[tuple[str, list[tuple[str, str]]]] = []
    for title, items in sections:
        kept: list[tuple[str, str]] = []
        for task_id, item in items:
            cost = count(item) + 1 + (0 if kept else count(title) + 1)
            if used + cost <= token_budget:
                kept.append((task_id, item))
                used += cost
            elif task_id:
                trimmed[task_id] = trimmed.get(task_id, 0) + 1
        kept_sections.append((title, kept))

    def trim_note() -> str:
        note = "; ".join(f"{task_id}: {n}" for task_id, n in trimmed.items())
        return f"Trimmed to status counts (items not listed): {note}"

    # the note must fit as well: drop the lowest-priority kept items until it does
    while trimmed and used + count(trim_note()) + 1 > token_budget:
        victim = next((kept for _, kept in reversed(kept_sections) if kept), None)
        if victim is None:
            break
        task_id, item = victim.pop()
        title = next(t for t, k in kept_sections if k is victim)
        used -= count(item) + 1 + (0 if victim else count(title) + 1)
        if task_id:
            trimmed[task_id] = trimmed.get(task_id, 0) + 1
    for title, kept in kept_sections:
        if kept:
            lines.append(title)
            lines.extend(item for _, item in kept)
    if trimmed:
        lines.append(trim_note())
    return "\n".join(lines)
