"""Task queue names of the temporal engine (docs/scale-out.md): pure functions of the configuration.

Root runs execute on ``[engine.temporal] task_queue``; a worker run dispatched to worker pool ``P`` runs
on its pool's queue ``<task_queue>.pool.<P>``, so a deployment can give pools their own worker processes;
``soong-agent worker`` polls the main queue and every configured pool's queue.
"""

from __future__ import annotations

from agent_core.config.schema import Settings


def pool_task_queue(settings: Settings, pool_id: str) -> str:
    """The task queue of worker pool ``pool_id``'s dispatched runs."""
    return f"{settings.engine.temporal.task_queue}.pool.{pool_id}"


def task_queues(settings: Settings) -> list[str]:
    """Every queue a worker polls: the main queue, then each configured pool's (config order)."""
    pools = [pool_task_queue(settings, pool.pool_id) for pool in settings.agents.worker_pools]
    return [settings.engine.temporal.task_queue, *pools]
