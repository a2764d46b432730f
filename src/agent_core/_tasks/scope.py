"""Who calls a Task operation: :class:`TaskCaller` (ids, role and, for workers, the dispatch scope).

A worker run started by ``agent.dispatch_worker`` carries its :class:`WorkerTaskScope` in
``RunScope.task_scope`` (the dataclass lives beside :class:`~agent_core.tools.context.RunScope`; it is
re-exported here). The one-claim-per-run bookkeeping lives in the DAG itself (``TaskDag.run_claims``,
rebuilt from ``task_step_claimed`` records), so it survives restarts.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core._tasks.dag import Actor
from agent_core.tools.context import RunScope, WorkerTaskScope
from agent_core.types.enums import AgentRole


@dataclass(frozen=True, kw_only=True, slots=True)
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
        worker = scope.task_scope
        role = AgentRole.worker if worker is not None else scope.agent_role
        return cls(agent_id=scope.agent_id, run_id=scope.run_id, role=role, worker_scope=worker)


__all__ = ["TaskCaller", "WorkerTaskScope"]
