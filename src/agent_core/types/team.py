"""Teammates of a lead session (``agent.team_*`` tools, ``AgentRuntime.team``): what a listing shows.

A teammate is the root agent of its own session, linked to its lead's session (``docs/teams.md``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from agent_core.types.base import FrozenModel
from agent_core.types.runtime import RuntimeEvent

TeammateState = Literal["working", "idle", "stopped"]
"""``working``: a run of it is in progress (or queued); ``idle``: a resident teammate waiting on its inbox;
``stopped``: it finished its task (not resident), was shut down, or failed to start."""


class TeammateView(FrozenModel):
    """One teammate of a lead session."""

    name: str
    agent_id: str
    session_id: str
    state: TeammateState
    inbox_depth: int
    """Unread entries of its inbox."""
    resident: bool
    isolation: Literal["shared", "worktree"]
    autonomous: bool
    agent_definition_id: str | None = None
    worker_pool_id: str | None = None
    """The Task board scope of an autonomous teammate (steps of this worker pool)."""
    branch: str | None = None
    """The git branch of its worktree (``isolation = "worktree"``)."""
    stopped_reason: str | None = None
    lead_session_id: str
    created_at: datetime


class TeamEvent(FrozenModel):
    """One live event of a teammate's run (``AgentRuntime.watch_team``)."""

    name: str
    agent_id: str
    session_id: str
    event: RuntimeEvent
