"""The dispatch an earlier attempt of a tool step started (docs/scale-out.md, issue 21).

When the temporal engine retries an Orchestrator's ``agent.dispatch_worker`` step after its worker
process died, the worker run its first attempt started (:meth:`RemoteChildRuns.run_id`, the same for every
attempt) may already exist. :func:`started_before` reads that run's row — its Task scope, pool, worker,
selection reason and git worktree — so the retried step attaches to the run instead of checking, selecting
and starting again, and commits the worktree when the run ended, as the first attempt would have.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.spec import RemoteChildRuns
from agent_core._orchestrator.pools import PoolWorker, WorkerPools
from agent_core._orchestrator.worktrees import Worktree, reopen_worktree
from agent_core._runtime.services import Services
from agent_core._tasks.worker_runs import DispatchCheck
from agent_core.errors import ErrorCode, WorkerUnavailableError
from agent_core.tools.context import ToolContext


@dataclass(frozen=True, slots=True)
class EarlierDispatch:
    """What the first attempt checked and chose, as its worker run's row records it."""

    check: DispatchCheck
    worker: PoolWorker
    selection_reason: str
    worktree: Worktree | None


async def started_before(
    services: Services,
    remote: RemoteChildRuns | None,
    pools: WorkerPools,
    definitions: AgentDefinitionRegistry,
    ctx: ToolContext,
) -> EarlierDispatch | None:
    """The dispatch an earlier attempt of this tool step started, or ``None`` (none did, or runs execute
    in this process). A worker no longer configured is ``worker_not_available``."""
    if remote is None:
        return None
    row = await services.storage.get_run(remote.run_id(ctx.run_id, ctx.tool_call_id))
    if row is None:
        return None
    meta = json.loads(row.metadata_json or "{}")
    pool_id, worker_id = str(meta.get("worker_pool_id")), str(meta.get("worker_id"))
    if not pools.validated:  # a fresh process: nothing validated the pools yet
        servers = set(services.mcp.catalog.servers) if services.mcp is not None else set()
        pools.validate(definitions, services.tools.definitions(), mcp_servers=servers)
    worker = next((w for w in pools.workers(pool_id) if w.worker_id == worker_id), None)
    if worker is None:
        raise WorkerUnavailableError(
            ErrorCode.worker_not_available,
            f"worker {worker_id!r} of pool {pool_id!r}, dispatched before this step was retried, is "
            "no longer configured",
            details={"worker_agent_id": worker_id, "worker_pool_id": pool_id},
        )
    allowed = meta.get("allowed_step_ids")
    check = DispatchCheck(
        task_id=str(meta.get("task_id")),
        worker_pool_id=pool_id,
        allowed_step_ids=tuple(allowed) if allowed is not None else None,
    )
    record = meta.get("worktree")
    worktree = await reopen_worktree(check.task_id, record) if isinstance(record, dict) else None
    return EarlierDispatch(check, worker, str(meta.get("selection_reason")), worktree)
