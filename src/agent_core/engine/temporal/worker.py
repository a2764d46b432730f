"""A Temporal worker: executes run workflows and their steps for ``[engine.temporal] task_queue``."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from agent_core.engine.temporal.activities import RunActivities
from agent_core.engine.temporal.client import connect
from agent_core.runtime.runs import RunManager


async def run_worker(manager: RunManager, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
    """Polls the configured task queue until ``stop`` is set; the steps run on ``manager``'s services
    (the same config, tools and shared store as the runtimes that start the runs)."""
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    from agent_core.engine.temporal.workflow import RunWorkflow

    settings = manager.services.settings.engine.temporal
    manager.root_engine = None  # a worker executes steps; it starts no workflow of its own
    client = await connect(settings)
    activities = RunActivities(manager, heartbeat_s=min(1.0, settings.heartbeat_timeout_ms / 4000))
    runner = SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules("agent_core")
    )
    worker = Worker(
        client,
        task_queue=settings.task_queue,
        workflows=[RunWorkflow],
        activities=activities.all(),
        workflow_runner=runner,
        max_heartbeat_throttle_interval=timedelta(milliseconds=settings.heartbeat_timeout_ms // 4),
        default_heartbeat_throttle_interval=timedelta(milliseconds=settings.heartbeat_timeout_ms // 4),
    )
    async with worker:
        if ready is not None:
            ready.set()
        await stop.wait()
    activities.contexts.abandon()
