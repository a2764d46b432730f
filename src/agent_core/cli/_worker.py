"""``soong-agent worker [--path <project>]``: a Temporal worker for the project (surfaces.md §3).

Needs ``[engine] kind = "temporal"``. Executes run workflows and their steps from
``[engine.temporal] task_queue`` on the Temporal service at ``engine.temporal.address`` with the project's
configuration, tools and session store (which must be the store the starting runtimes use). Prints one
line, ``worker polling <task queue> at <address>``, once it polls; SIGINT/SIGTERM stop it (exit 0): the
steps in flight get 15 s to finish, then the worker's runs continue on the other workers. Startup errors exit 1 with one line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import TextIO

from agent_core._concurrency import TaskOwner, first_of
from agent_core.cli._terminal import Output

EXIT_OK, EXIT_FAILED = 0, 1


async def worker_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    from agent_core._api.runtime import AgentRuntime
    from agent_core.engine.temporal.worker import run_worker
    from agent_core.errors import AgentCoreError

    stop, ready = asyncio.Event(), asyncio.Event()

    def polling(task_queue: str, address: str) -> None:
        out.write(f"worker polling {task_queue} at {address}\n")
        ready.set()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        runtime = AgentRuntime(project_dir=args.path)
    except AgentCoreError as exc:
        err.write(f"soong-agent: error: {exc.message}\n")
        return EXIT_FAILED
    async with runtime, TaskOwner("worker command") as tasks:
        task = tasks.spawn(run_worker(runtime, stop, polling), name="worker")
        await first_of(task, ready)
        if task.done():
            failure = task.exception()
            if isinstance(failure, AgentCoreError):
                err.write(f"soong-agent: error: {failure.message}\n")
                return EXIT_FAILED
            task.result()
        await task
    return EXIT_OK
