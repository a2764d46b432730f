"""``soong-agent schedule add|list|remove`` and ``soong-agent scheduler``
(docs/jobs-and-schedules.md#schedules).

``schedule add`` prints the new schedule id on stdout; ``schedule list`` prints one line per schedule
(id, cron, next due time, session, message); ``schedule remove`` prints nothing. ``scheduler`` runs the
due schedules of its project in the foreground until Ctrl-C (``--once``: fire what is due, wait for
those runs, exit); one notice line per firing and per run end goes to stderr. Runs started by the
scheduler have no permission callback, so write and command tools are denied unless policy allows them.
Exit status: 0 on success, 1 on a startup error (or, with ``--once``, a firing that failed), 130 after
Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._terminal import Output, error_text, escape_terminal

if TYPE_CHECKING:
    from agent_core import AgentRuntime
    from agent_core.schedules import Firing

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def _runtime(args: argparse.Namespace) -> AgentRuntime:
    from agent_core import AgentRuntime

    return AgentRuntime(project_dir=args.path)


async def schedule_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent schedule <action>``; returns the exit status."""
    from agent_core.errors import AgentCoreError

    try:
        async with _runtime(args) as runtime:
            if args.schedule_action == "add":
                schedule_id = await runtime.add_schedule(args.cron, args.message, session_id=args.session_id)
                out.write(f"{schedule_id}\n")
            elif args.schedule_action == "list":
                for s in await runtime.list_schedules(all_projects=args.all):
                    where = f" project={escape_terminal(s.project)}" if args.all else ""
                    session = s.session_id or "(new session)"
                    last = f" last_error={escape_terminal(s.last_error)}" if s.last_error else ""
                    out.write(
                        f"{s.schedule_id}\t{s.cron}\tnext={s.next_due_at:%Y-%m-%dT%H:%M:%SZ}\t"
                        f"session={session}{where}{last}\t{escape_terminal(s.message)}\n"
                    )
            else:
                await runtime.remove_schedule(args.schedule_id)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    return EXIT_OK


async def scheduler_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent scheduler``; returns the exit status."""
    from agent_core.errors import AgentCoreError

    tasks = TaskOwner("scheduler command")
    """Each firing's watcher, until the scheduler stops."""
    watchers: list[asyncio.Future[bool]] = []
    failed = False

    async def watch(firing: Firing) -> bool:
        assert firing.run is not None
        status = await firing.run.wait()
        err.write(
            f"[schedule] {firing.schedule_id}: run {firing.run_id} {getattr(status, 'value', status)}\n"
        )
        return bool(getattr(status, "value", status) == "completed")

    def on_fired(firing: Firing) -> None:
        nonlocal failed
        if firing.error is not None:
            failed = True
            err.write(f"[schedule] {firing.schedule_id}: could not start: {escape_terminal(firing.error)}\n")
            return
        if firing.run is None:  # the session's run in another process reads it
            err.write(f"[schedule] {firing.schedule_id}: delivered to session {firing.session_id}\n")
            return
        err.write(
            f"[schedule] {firing.schedule_id}: fired (session {firing.session_id}, run {firing.run_id})\n"
        )
        watchers.append(tasks.spawn(watch(firing), name=f"watch {firing.run_id}"))

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    interrupted = False

    def on_signal() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()

    try:
        async with _runtime(args) as runtime:
            if interrupts.pending():  # Ctrl-C while the runtime opened: fire nothing
                return EXIT_INTERRUPTED
            service = runtime.scheduler(on_fired=on_fired)
            count = len(await runtime.list_schedules())
            if args.once:
                await service.tick()
                results = await asyncio.gather(*watchers)
                return EXIT_FAILED if failed or not all(results) else EXIT_OK
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGTERM, on_signal)
            err.write(
                f"scheduler: {count} schedule(s) of {escape_terminal(str(runtime.project_dir))}; "
                "Ctrl-C stops\n"
            )
            try:
                with interrupts.on_interrupt(on_signal):
                    await service.start()
                    await stop.wait()
            finally:
                await service.stop()
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(signal.SIGTERM)
                await tasks.aclose()  # before the runtime closes: no watcher reports its cancelled run
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    finally:
        await tasks.aclose()  # also on an error
    if interrupted:
        interrupts.mark_reported()
    err.write("scheduler: stopped\n")
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
