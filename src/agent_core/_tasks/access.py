"""Who may do what on the Task board: role checks and worker-pool scoping (docs/task-board.md#worker-scope,
docs/task-board.md#task-tools, docs/task-board.md#the-board-summary).

The role checks are pure functions of the :class:`~agent_core._tasks.scope.TaskCaller`; :class:`WorkerPools`
knows the configured pools (the default pool of steps without one, and what a worker's scope covers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_core._tasks.models import TaskStep
from agent_core._tasks.scope import TaskCaller, WorkerTaskScope
from agent_core.errors import ErrorCode, PermissionDeniedError
from agent_core.types.enums import AgentRole


def require_orchestrator(caller: TaskCaller) -> None:
    if caller.role != AgentRole.orchestrator:
        raise PermissionDeniedError(ErrorCode.permission_denied, "only the Orchestrator may do this")


def require_board_role(caller: TaskCaller) -> WorkerTaskScope | None:
    """Orchestrator (→ ``None``) or a worker with a dispatch scope; anyone else → permission_denied."""
    if caller.role == AgentRole.orchestrator:
        return None
    if caller.role == AgentRole.worker and caller.worker_scope is not None:
        return caller.worker_scope
    raise PermissionDeniedError(ErrorCode.permission_denied, "this run has no Task scope")


def require_dispatch_task(scope: WorkerTaskScope | None, task_id: str) -> None:
    """A worker run may only use the Task it was dispatched for."""
    if scope is not None and scope.task_id != task_id:
        raise PermissionDeniedError(
            ErrorCode.permission_denied, f"this worker run may only use Task {scope.task_id!r}"
        )


class WorkerPools:
    """The configured worker pools (``None``: any pool id is accepted and ``default`` is the default)."""

    def __init__(self, pool_ids: Callable[[], Sequence[str]] | None = None) -> None:
        self._pool_ids = pool_ids

    def default_pool_id(self) -> str:
        pools = list(self._pool_ids()) if self._pool_ids is not None else []
        if "default" in pools or not pools:
            return "default"
        return pools[0]

    def pool_ok(self, pool_id: str) -> bool:
        return self._pool_ids is None or pool_id in set(self._pool_ids())

    def in_scope(self, scope: WorkerTaskScope, step: TaskStep) -> bool:
        """The step is in the worker's pool and (if restricted) among its allowed steps."""
        pool = step.worker_pool_id or self.default_pool_id()
        allowed = scope.allowed_step_ids
        return pool == scope.worker_pool_id and (allowed is None or step.step_id in allowed)
