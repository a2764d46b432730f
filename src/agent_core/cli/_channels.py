"""``soong-agent channels``: the ``[[channels]]`` of ``config.toml`` in the foreground (docs/channels.md).

Contract: one runtime per project the channels name (``project``, default ``--path`` / the cwd); each
runtime's permission requests are posted to the conversation of their session as button choices (a
request of a session that is no channel conversation is denied: nobody could answer it). Prints one
line per channel once it receives (``channel NAME (KIND) on PROJECT``, for Slack with its events URL).
Ctrl-C (registered with :func:`agent_core.cli._interrupts.on_interrupt`) and SIGTERM stop it: runs are
cancelled and the runtimes close; exit 130 after Ctrl-C, 0 after SIGTERM. No ``[[channels]]``, a missing
token variable or a configuration error exits 1 with one line; exit 1 too when every channel stopped on
an error (each one's reason is printed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agent_core.cli import _interrupts as interrupts
from agent_core.cli._terminal import Output, error_text, escape_terminal

if TYPE_CHECKING:
    from agent_core import AgentRuntime
    from agent_core.adapters.channels import Channel, ChannelHub
    from agent_core.permissions import PermissionDeferral
    from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def channel_line(channel: Channel, project: Path) -> str:
    line = f"channel {channel.name} ({channel.kind}) on {project}"
    port = getattr(channel, "port", None)
    if port is not None:
        host = getattr(channel, "listen_host", "127.0.0.1")
        line += f": Slack events at http://{host}:{port}/slack/events"
    return line


async def wait_listening(hub: ChannelHub) -> None:
    """Waits until every channel with an HTTP endpoint listens (or its receiver stopped)."""
    for channel in hub.channels:
        listening = getattr(channel, "listening", None)
        if isinstance(listening, asyncio.Event):
            while not listening.is_set() and channel.name not in hub.failures:
                await asyncio.sleep(0.02)


class _Asker:
    """The runtime's permission callback: the hub posts the request to its conversation."""

    def __init__(self) -> None:
        self.hub: ChannelHub | None = None

    async def __call__(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        from agent_core.permissions import DEFER
        from agent_core.types.permissions import PermissionDecision

        if self.hub is not None and await self.hub.ask(request):
            return DEFER
        return PermissionDecision(
            decision="deny", reason="no chat conversation to ask: the session is not a channel session"
        )

    async def ask_user(self, question: UserQuestion) -> str | PermissionDeferral:
        """The runtime's question callback: the model's ``internal.ask_user`` question goes to the chat."""
        from agent_core.permissions import DEFER

        if self.hub is not None and await self.hub.ask_user(question):
            return DEFER
        return "(no answer: the question could not be posted to a chat conversation)"


async def channels_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs every configured channel until Ctrl-C / SIGTERM; returns the exit status."""
    from agent_core._api.runtime import AgentRuntime
    from agent_core.adapters.channels import ChannelHub, channels_by_project
    from agent_core.config import load_config
    from agent_core.errors import AgentCoreError

    try:
        config = load_config(project_dir=args.path)
        if not config.settings.channels:
            err.write(
                f"soong-agent: error: no [[channels]] in {config.config_path}; add one (docs/channels.md)\n"
            )
            return EXIT_FAILED
        grouped = channels_by_project(config.settings.channels, config.project)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    runtimes: list[AgentRuntime] = []
    hubs: list[tuple[Path, ChannelHub]] = []
    try:
        for project, channels in grouped.items():
            asker = _Asker()
            runtime = AgentRuntime(
                project_dir=project, permission_callback=asker, question_callback=asker.ask_user
            )
            runtimes.append(runtime)
            await runtime.__aenter__()
            asker.hub = ChannelHub(runtime, channels)
            hubs.append((project, asker.hub))
        if interrupts.pending():
            return EXIT_INTERRUPTED
        return await _serve(hubs, out, err)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    finally:
        for runtime in runtimes:
            with contextlib.suppress(Exception):
                await runtime.close()


async def _serve(hubs: list[tuple[Path, ChannelHub]], out: Output, err: Output) -> int:
    stop = asyncio.Event()
    interrupted = False

    def on_interrupt() -> None:
        nonlocal interrupted
        interrupted = True
        stop.set()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        with interrupts.on_interrupt(on_interrupt):
            async with asyncio.TaskGroup() as group:
                running = [group.create_task(hub.run()) for _, hub in hubs]
                for project, hub in hubs:
                    await hub.started()
                    await wait_listening(hub)
                    for channel in hub.channels:
                        if channel.name not in hub.failures:
                            out.write(escape_terminal(channel_line(channel, project)) + "\n")
                stopper = group.create_task(stop.wait())
                await asyncio.wait([stopper, *running], return_when=asyncio.FIRST_COMPLETED)
                while not stop.is_set() and not all(task.done() for task in running):
                    await asyncio.wait([stopper, *running], return_when=asyncio.FIRST_COMPLETED)
                for task in [stopper, *running]:
                    task.cancel()
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
    failures = {name: reason for _, hub in hubs for name, reason in hub.failures.items()}
    for name, reason in failures.items():
        err.write(escape_terminal(f"soong-agent: error: channel {name} stopped: {reason}") + "\n")
    if interrupted:
        return EXIT_INTERRUPTED
    if stop.is_set():
        return EXIT_OK
    return EXIT_FAILED if failures else EXIT_OK
