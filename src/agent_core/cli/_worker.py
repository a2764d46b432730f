"""``soong-agent worker [--path <project>]``: a Temporal worker for the project (docs/scale-out.md).

Needs ``[engine] kind = "temporal"``. Executes run workflows and their steps from
``[engine.temporal] task_queue`` on the Temporal service at ``engine.temporal.address`` with the project's
configuration, tools and session store (which must be the store the starting runtimes use). Prints one
line, ``worker polling <task queue> at <address>``, once it polls; SIGTERM (exit 0) and Ctrl-C (exit 130,
at any moment) stop it: the steps in flight get 15 s to finish, then the worker's runs continue on the
other workers. Startup errors exit 1 with one line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import TextIO

from agent_core._concurrency import TaskOwner, first_of
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._terminal import Output, error_text

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


async def worker_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    from agent_core import AgentRuntime
    from agent_core.engine.temporal.worker import run_worker
    from agent_core.errors import AgentCoreError

    stop, ready = asyncio.Event(), asyncio.Event()
    interrupted = False

    def polling(task_queue: str, address: str) -> None:
        out.write(f"worker polling {task_queue} at {address}\n")
        ready.set()

    def on_interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        runtime = AgentRuntime(project_dir=args.path)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    with interrupts.on_interrupt(on_interrupt):  # also a Ctrl-C that came while the runtime loaded
        async with runtime, TaskOwner("worker command") as tasks:
            if stop.is_set():
                return EXIT_INTERRUPTED if interrupted else EXIT_OK
            task = tasks.spawn(run_worker(runtime, stop, polling), name="worker")
            await first_of(task, ready)
            if task.done():
                failure = task.exception()
                if isinstance(failure, AgentCoreError):
                    err.write(error_text(failure))
                    return EXIT_FAILED
                task.result()
            await task
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
