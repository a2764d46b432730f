"""Teammates in ``soong-agent chat``: their activity under their names, and ``/team``.

Contracts:

- :class:`TeamWatcher` follows the current session's team (``AgentRuntime.watch_team``) from the first
  message on: each teammate run's start, replies, tool calls and end are printed indented under a
  ``[name]`` line (the lead's own runs woken by its inbox under ``[lead]``). At a terminal prompt the
  lines are printed above the prompt (prompt_toolkit's ``run_in_terminal``); while the lead's reply is
  streaming they wait until it ends, so the two never interleave. Every text is escaped.
- ``/team`` lists the teammates with their state and unread inbox entries.
- Nothing happens when teams are off (``[agents] max_teammates_per_session = 0``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from agent_core._concurrency import TaskOwner, cancel_and_wait
from agent_core.cli._chat_render import cut, safe

if TYPE_CHECKING:
    from agent_core import AgentRuntime
    from agent_core.cli._chat_input import LineInput
    from agent_core.cli._chat_render import ChatPrinter
    from agent_core.types.team import TeamEvent


class ChatView(Protocol):
    """What the team view uses of the chat (``ChatSession``)."""

    printer: ChatPrinter
    input: LineInput | None
    session_id: str | None

    @property
    def run(self) -> object | None:
        """The turn being streamed, if any."""
        ...

    def note(self, text: str) -> None: ...

    async def ready(self) -> AgentRuntime: ...


TEXT_LIMIT = 400
_SHOWN = frozenset(
    {
        "loop_started",
        "message_completed",
        "tool_started",
        "tool_completed",
        "tool_failed",
        "tool_denied",
        "run_completed",
        "loop_failed",
        "run_cancelled",
    }
)


class TeamWatcher:
    """Prints the activity of the current session's teammates (see the module docstring)."""

    def __init__(self, chat: ChatView) -> None:
        self.chat = chat
        self._session_id: str | None = None
        self._tasks = TaskOwner("team watcher")
        """The session's watch and the prints into the prompt; :meth:`close` cancels and awaits them."""
        self._task: asyncio.Task[None] | None = None
        self._held: list[Callable[[], None]] = []
        self._last: str | None = None

    def follow(self, runtime: AgentRuntime, session_id: str | None) -> None:
        """Watches ``session_id``'s team from now on (the previous one is dropped)."""
        if session_id == self._session_id:
            return
        self._drop()
        self._session_id = session_id
        if session_id is not None:
            self._task = self._tasks.spawn(self._watch(runtime, session_id), name=f"team of {session_id}")

    async def _watch(self, runtime: AgentRuntime, session_id: str) -> None:
        from agent_core.errors import AgentCoreError

        with contextlib.suppress(AgentCoreError):  # teams are off: nothing to follow
            async for item in runtime.watch_team(session_id):
                self._show(item)

    def _show(self, item: TeamEvent) -> None:
        from agent_core.types.events import MessageCompleted

        event = item.event
        kind = event.event_type.value
        if kind not in _SHOWN:
            return
        payload = event.payload
        if isinstance(payload, MessageCompleted) and payload.role != "assistant":
            return
        name = item.name

        def write() -> None:
            printer = self.chat.printer
            if kind == "loop_started" or self._last != name:
                printer.line(f"[{safe(name)}]", dim=True)
                self._last = name
            if isinstance(payload, MessageCompleted):
                text = safe(cut(str(payload.text or ""), TEXT_LIMIT))
                if text:
                    printer.line(text, depth=2)
            elif kind == "run_completed":
                printer.line(f"[{safe(name)} is idle]", dim=True, depth=1)
            elif kind in ("loop_failed", "run_cancelled") or kind != "loop_started":
                printer.handle(event, depth=2)

        self._output(write)

    def _output(self, write: Callable[[], None]) -> None:
        chat = self.chat
        if chat.run is not None:  # a turn is streaming: after its reply
            self._held.append(write)
            return
        if chat.input is not None and chat.input.interactive and not self._tasks.closed:
            from prompt_toolkit.application import run_in_terminal

            self._tasks.spawn(run_in_terminal(write))
            return
        write()

    def after_turn(self) -> None:
        """Prints what teammates did while the lead's reply was streaming."""
        held, self._held = self._held, []
        for write in held:
            write()
        self._last = None

    def _drop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._held.clear()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait(task)
        await self._tasks.wait()  # the prints still queued for the terminal
        await self._tasks.aclose()


async def team_command(chat: ChatView, args: list[str]) -> None:
    """``/team``: the teammates of the current session, their state and unread inbox entries."""
    if chat.session_id is None:
        chat.note("no session yet: teammates belong to a session (send a message first)")
        return
    runtime = await chat.ready()
    team = await runtime.team(chat.session_id)
    if not team:
        chat.note("no teammates in this session")
        return
    lines = []
    for mate in team:
        kind = "resident" if mate.resident else "one task"
        extra = f", {mate.isolation}" + (f" ({safe(mate.branch)})" if mate.branch else "")
        extra += ", autonomous" if mate.autonomous else ""
        unread = f"{mate.inbox_depth} unread"
        lines.append(f"  {safe(mate.name):<16} {mate.state:<8} {unread:<10} {kind}{extra}  {mate.session_id}")
    chat.printer.block(lines)
