"""Who calls a Task operation: :class:`TaskCaller` and the worker dispatch scope.

A worker run started by ``agent.dispatch_worker`` carries its scope in ``RunScope.extras["task_scope"]``
(:data:`TASK_SCOPE_KEY`), either as a :class:`WorkerTaskScope` or as the dict produced by
:meth:`WorkerTaskScope.to_extras`::

    {"task_scope": {"task_id": "fix-login", "worker_pool_id": "default",
                    "worker_agent_id": "worker_general_1", "allowed_step_ids": ["s2"] | None}}

``worker_pool_id`` is the resolved dispatch pool (never null); ``allowed_step_ids`` is already de-duplicated
(``None`` = no step-id restriction). The one-claim-per-run bookkeeping lives in the DAG itself
(``TaskDag.run_claims``, rebuilt from ``task_step_claimed`` records), so it survives restarts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent_core._tasks.dag import Actor
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools.context import RunScope
from agent_core.types.enums import AgentRole

TASK_SCOPE_KEY = "task_scope"
TASK_SESSION_KEY = "task_session_id"
"""``RunScope.extras`` key: the session whose Task board a run's Task tools use, when it is not the run's
own (an autonomous teammate working a step of its lead's board)."""


@dataclass(frozen=True, kw_only=True)
class WorkerTaskScope:
    """The Task scope of one worker run (task-board.md §3.4)."""

    task_id: str
    worker_pool_id: str
    worker_agent_id: str
    allowed_step_ids: tuple[str, ...] | None = None

    def to_extras(self) -> dict[str, Any]:
        return {
            TASK_SCOPE_KEY: {
                "task_id": self.task_id,
                "worker_pool_id": self.worker_pool_id,
                "worker_agent_id": self.worker_agent_id,
                "allowed_step_ids": list(self.allowed_step_ids)
                if self.allowed_step_ids is not None
                else None,
            }
        }

    @classmethod
    def from_extras(cls, extras: Mapping[str, Any]) -> WorkerTaskScope | None:
        raw = extras.get(TASK_SCOPE_KEY)
        if raw is None or isinstance(raw, WorkerTaskScope):
            return raw
        if not isinstance(raw, Mapping):
            raise AgentCoreError(ErrorCode.internal_error, "malformed task_scope in the run scope")
        allowed = raw.get("allowed_step_ids")
        try:
            return cls(
                task_id=str(raw["task_id"]),
                worker_pool_id=str(raw["worker_pool_id"]),
                worker_agent_id=str(raw["worker_agent_id"]),
                allowed_step_ids=tuple(dict.fromkeys(allowed)) if allowed is not None else None,
            )
        except KeyError as exc:
            raise AgentCoreError(ErrorCode.internal_error, f"task_scope lacks {exc.args[0]!r}") from exc


@dataclass(frozen=True, kw_only=True)
class TaskCaller:
    """The calling run: ids for the WAL actor fields, its role and (for workers) its dispatch scope."""

    agent_id: str
    run_id: str | None
    role: AgentRole
    worker_scope: WorkerTaskScope | None = None

    @property
    def actor(self) -> Actor:
        return Actor(agent_id=self.agent_id, run_id=self.run_id)

    @classmethod
    def from_run_scope(cls, scope: RunScope) -> TaskCaller:
        """The caller of a run; a run holding a dispatch scope acts on the board as a worker (also a
        teammate's run working a step it claimed)."""
        holds_scope = scope.agent_role == AgentRole.worker or TASK_SCOPE_KEY in scope.extras
        worker = WorkerTaskScope.from_extras(scope.extras) if holds_scope else None
        role = AgentRole.worker if worker is not None else scope.agent_role
        return cls(agent_id=scope.agent_id, run_id=scope.run_id, role=role, worker_scope=worker)
