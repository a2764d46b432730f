"""Worker pool views for UIs and embedders (``AgentRuntime.list_worker_pools``;
docs/multi-agent.md#worker-pools, docs/multi-agent.md#agentlist_workers)."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Literal

from pydantic import Field

from agent_core.types.base import StrictModel, empty_list


class WorkerView(StrictModel):
    """One configured worker and its state (in one session, or across sessions when none is given)."""

    worker_pool_id: str
    worker_agent_id: str
    agent_definition_id: str
    name: str
    description: str
    tags: list[str] = Field(default_factory=empty_list)
    status: Literal["idle", "busy", "unavailable"]
    """As ``agent.list_workers``: ``busy`` with a live run, ``unavailable`` while a cancelled run winds down."""
    session_id: str | None = None
    """The session of the worker's current run (``None`` when idle)."""
    current_run_id: str | None = None
    current_step_id: str | None = None


class WorkerPoolView(StrictModel):
    """One configured ``[[agents.worker_pools]]`` entry, in config order."""

    pool_id: str
    valid: bool
    default: bool = False
    """The pool used when a dispatch names none (docs/multi-agent.md#worker-pools)."""
    problems: list[str] = Field(default_factory=empty_list)
    """Why an invalid pool is excluded from listing and dispatch."""
    workers: list[WorkerView] = Field(default_factory=empty_list)
