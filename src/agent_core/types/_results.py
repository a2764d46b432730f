"""Result types of the runtime's cancel, list-sessions, delete and cleanup APIs (docs/runs.md);
:mod:`agent_core.types.runtime` re-exports every name.

A separate module so that a run, which builds none of them before its first model request, does not pay
for creating their classes (issue 16, cold start).
"""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from datetime import datetime
from typing import Literal

from pydantic import Field

from agent_core.types.base import StrictModel, empty_list
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import RunStatus


class SessionSummary(StrictModel):
    """One row of ``AgentRuntime.list_sessions()``: ``title`` is the first user message (cut)."""

    session_id: str
    title: str
    mode: Literal["normal", "orchestrator"]
    status: RunStatus | None = None
    """Status of the root agent's latest run; ``None`` when the session has no run."""
    run_count: int = 0
    active_node_id: str | None = None
    """The leaf of the active path (``AgentRuntime.get_node_path`` gives the path)."""
    parent_session_id: str | None = None
    """The session this one was forked from (``AgentRuntime.fork_session``)."""
    created_at: datetime
    updated_at: datetime


class CancelResult(StrictModel):
    run_id: str
    status: RunStatus
    cancelled: bool = False
    was_queued: bool = False
    already_terminal: bool = False
    timed_out: bool = False


class DeleteCounts(StrictModel):
    nodes: int = 0
    events: int = 0
    runs: int = 0
    agents: int = 0
    artifacts: int = 0


class DeleteFailure(StrictModel):
    target: str
    error: ErrorPayload


class DeleteSessionResult(StrictModel):
    session_id: str
    deleted: bool
    error: ErrorPayload | None = None
    counts: DeleteCounts = Field(default_factory=DeleteCounts)
    failures: list[DeleteFailure] = Field(default_factory=empty_list)


class CleanupItem(StrictModel):
    kind: Literal["task_wal", "artifact", "worktree"]
    id: str | None = None
    path: str
    size_bytes: int = 0
    reason: str


class CleanupFailure(StrictModel):
    item: CleanupItem
    error: ErrorPayload


class CleanupResult(StrictModel):
    dry_run: bool
    candidates: list[CleanupItem] = Field(default_factory=empty_list)
    deleted: list[CleanupItem] = Field(default_factory=empty_list)
    failures: list[CleanupFailure] = Field(default_factory=empty_list)
    freed_bytes: int = 0
    partial_failure: bool = False


class TaskWalSummary(StrictModel):
    """One Task WAL of a session (``AgentRuntime.list_task_wals``): its file name (``<name>.wal.jsonl``),
    path, the Task it records and the type of its last record."""

    name: str
    path: str
    task_id: str | None = None
    last_event_type: str | None = None


class SkillSummary(StrictModel):
    """One skill of the user's catalog (``AgentRuntime.list_skills``): ``<home>/skills/<name>.md``."""

    name: str
    description: str
    path: str


class RewindSkip(StrictModel):
    """A path a rewind left alone, and why."""

    path: str
    reason: str


class RewindResult(StrictModel):
    """What ``AgentRuntime.rewind`` did: the checkpoints undone, the files put back (``restored``: their
    earlier content, link or directory; ``removed``: they did not exist then) and what it left alone."""

    session_id: str
    node_id: str
    files: bool
    conversation: bool
    active_node_id: str | None = None
    """The session's active leaf afterwards (the target node when ``conversation``)."""
    checkpoints: list[str] = Field(default_factory=empty_list)
    restored: list[str] = Field(default_factory=empty_list)
    removed: list[str] = Field(default_factory=empty_list)
    skipped: list[RewindSkip] = Field(default_factory=empty_list)
