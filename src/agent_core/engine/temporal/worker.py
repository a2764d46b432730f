"""A Temporal worker: executes run workflows and their steps for ``[engine.temporal] task_queue``."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from agent_core._api.hosting import run_manager
from agent_core._storage.live import live_channel
from agent_core.engine.temporal._activities import RunActivities
from agent_core.engine.temporal._client import connect
from agent_core.engine.temporal._dispatch import install_dispatch
from agent_core.engine.temporal._payloads import own_queue_timeout
from agent_core.engine.temporal._permissions import WorkflowPermissions
from agent_core.engine.temporal._queues import task_queues
from agent_core.errors import ConfigError, ErrorCode

if TYPE_CHECKING:
    from agent_core import AgentRuntime

SHUTDOWN_GRACE = timedelta(seconds=15)


async def run_worker(
    runtime: AgentRuntime,
    stop: asyncio.Event,
    ready: Callable[[str, str], None] | None = None,
    *,
    queues: Sequence[str] | None = None,
) -> None:
    """Executes run workflows and their steps for ``[engine.temporal] task_queue`` and the worker pools'
    queues (``<task_queue>.pool.<pool_id>``) until ``stop`` is set; ``queues`` narrows them (e.g. a
    process that serves one pool's dispatched runs only).

    The steps run on ``runtime``'s services: the same config, providers, tools and shared store as the
    runtimes that start the runs (tools registered in code must be registered on ``runtime`` too).
    ``ready(task_queue, address)`` is called once the worker polls.
    """
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from agent_core.engine.temporal._workflow import RunWorkflow

    manager = await run_manager(runtime)
    engine = manager.services.settings.engine
    if engine.kind != "temporal":
        raise ConfigError(
            ErrorCode.config_error,
            f'{manager.services.config.config_path}: a worker needs [engine] kind = "temporal" '
            f"(engine.kind is {engine.kind!r})",
            details={"config_keys": ["engine.kind"]},
        )
    settings = engine.temporal
    manager.features.engine = None  # a worker executes steps; it starts no workflow of its own
    client = await connect(settings)
    live = live_channel(manager.services.storage, manager.services.settings)
    # permission requests go to the runtime that started the run, through the run's workflow
    manager.services.gate.use_callback(WorkflowPermissions(client, live), forwarding=True)
    # a dispatched worker run is a child workflow on its pool's queue, which this worker polls too
    install_dispatch(manager, client)
    own_queue = f"{settings.task_queue}@{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    activities = RunActivities(
        manager,
        own_queue=own_queue,
        heartbeat_s=min(1.0, settings.heartbeat_timeout_ms / 4000),
        arrival_timeout_s=own_queue_timeout(settings.heartbeat_timeout_ms).total_seconds(),
        live=live,
    )
    throttle = timedelta(milliseconds=settings.heartbeat_timeout_ms // 4)
    workers = [
        Worker(
            client,
            task_queue=queue,
            workflows=[RunWorkflow],
            activities=activities.all(),
            # the run workflow is deterministic by construction (it only sequences activities and child
            # workflows and holds the permission maps; its module imports nothing but temporalio and the
            # payload dataclasses), so it runs without the sandbox, which re-imported the workflow module
            # for every run and proxied every call (about a fifth of a worker's CPU per turn, measured
            # with benchmarks/temporal_engine)
            workflow_runner=UnsandboxedWorkflowRunner(),
            # stopping lets the steps in flight finish (their nodes are stored; the retry on another
            # worker continues from them) before they are abandoned
            graceful_shutdown_timeout=SHUTDOWN_GRACE,
            max_heartbeat_throttle_interval=throttle,
            default_heartbeat_throttle_interval=throttle,
        )
        for queue in (queues if queues is not None else task_queues(manager.services.settings))
    ]
    # this worker's own queue: the tool calls it staged (each an activity) run here
    workers.append(
        Worker(
            client,
            task_queue=own_queue,
            activities=activities.all(),
            graceful_shutdown_timeout=SHUTDOWN_GRACE,
            max_heartbeat_throttle_interval=throttle,
            default_heartbeat_throttle_interval=throttle,
        )
    )
    async with contextlib.AsyncExitStack() as stack:
        for each in workers:
            await stack.enter_async_context(each)
        if ready is not None:
            ready(settings.task_queue, settings.address)
        await stop.wait()
    await activities.close()
    activities.contexts.abandon()
    if activities.contexts.live is not None:
        await activities.contexts.live.close()
