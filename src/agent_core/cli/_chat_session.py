"""The state of one ``soong-agent chat``: the runtime it opens, the current session and mode, one turn
(a streamed reply that Ctrl-C cancels) and the inline permission prompt (see :mod:`agent_core.cli._chat`).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any, Literal, TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli._chat_input import Interrupted, LineInput
from agent_core.cli._chat_render import ChatPrinter, safe
from agent_core.cli._diff import wants_color
from agent_core.cli._prompt import STDIN_TIMEOUT_S, describe_request, parse_permission_answer
from agent_core.cli._terminal import Output

if TYPE_CHECKING:
    from agent_core._api.handles import RunHandle
    from agent_core._api.runtime import AgentRuntime
    from agent_core.types.permissions import PermissionDecision, PermissionRequest

Mode = Literal["normal", "orchestrator"]
ANSWER_PROMPT = "Answer [1/2/3]: "


class ChatSession:
    """The state of one chat: the runtime, the current session and mode, input and output."""

    def __init__(self, out: Output, err: Output, stdin: TextIO | None, mode: Mode) -> None:
        self.out = out
        self.err = err
        self.stdin = stdin
        self.mode: Mode = mode
        self.session_id: str | None = None
        self.path: str | None = None
        """``--path`` (the project)."""
        self.runtime: AgentRuntime | None = None
        self.opening: asyncio.Future[Any] | None = None
        self.terminal = wants_color(out.stream)
        self.prompt_out = out if _isatty(out.stream) else err
        self.printer = ChatPrinter(out, rich=self.terminal)
        self.input: LineInput | None = None
        self.run: RunHandle | None = None
        self.last_usage: dict[str, Any] | None = None
        self.tasks = TaskOwner("chat")
        """The runtime's background open, the turns' event consumers and cancel requests; closed by
        ``chat_command`` when the chat ends."""
        self.cancels: list[asyncio.Future[Any]] = []
        """``run.cancel()`` calls started from a permission prompt (awaited when the turn ends)."""
        self.quit = False

    # ---- runtime ------------------------------------------------------------------------------
    def start_opening(self, path: str | None) -> asyncio.Future[Any]:
        """Starts importing, constructing and opening the runtime (at most once)."""
        if self.opening is None:
            self.opening = self.tasks.spawn(self._open(path), name="open runtime")
        return self.opening

    async def _open(self, path: str | None) -> None:
        def construct() -> AgentRuntime:  # the imports and config loading run off the event loop
            from agent_core._api.runtime import AgentRuntime

            return AgentRuntime(project_dir=path, permission_callback=self.ask)

        try:
            self.runtime = await asyncio.to_thread(construct)
            await self.runtime.__aenter__()  # opens storage, hooks, MCP catalog, ...
        except BaseException:
            if self.input is not None:
                self.input.abort()  # the prompt ends; chat_command reports the error
            raise

    async def ready(self) -> AgentRuntime:
        """The open runtime (waits for the background open started at startup)."""
        await self.start_opening(self.path)
        assert self.runtime is not None
        return self.runtime

    def note(self, text: str) -> None:
        """A one-line chat notice (dimmed on a terminal)."""
        self.printer.line(text, dim=True)

    # ---- permission prompts -------------------------------------------------------------------
    async def ask(self, request: PermissionRequest) -> PermissionDecision:
        from agent_core.types.permissions import PermissionDecision

        self.printer.end_reply()
        color = self.terminal if self.prompt_out is self.out else wants_color(self.err.stream)
        text = describe_request(request, color=color)
        head, _, _ = text.rpartition("\n")
        self.prompt_out.write(head + "\n")
        assert self.input is not None
        why = ""
        try:
            line = await asyncio.wait_for(self.input.read(ANSWER_PROMPT, history=False), STDIN_TIMEOUT_S)
        except TimeoutError:
            line, why = None, f"no answer within {STDIN_TIMEOUT_S:.0f} s"
        except Interrupted:
            line, why = None, "interrupted"
            if self.run is not None:
                self.printer.cancel_requested = True
                self.cancels.append(self.tasks.spawn(self.run.cancel()))
        decision = parse_permission_answer(line)
        if not why and line is None:
            why = "end of input"
        elif (
            not why and decision == "deny" and line is not None and line.strip().lower() not in ("3", "deny")
        ):
            why = f"unrecognised answer {safe(line.strip())!r}"
        if not self.input.interactive and line is not None:
            self.prompt_out.write("\n")
        self.prompt_out.write(f"  -> {decision.replace('_', ' ')}{f' ({why})' if why else ''}\n")
        return PermissionDecision(decision=decision, reason=why or None)

    # ---- one turn -----------------------------------------------------------------------------
    async def turn(self, message: str) -> None:
        from agent_core.errors import AgentCoreError

        runtime = await self.ready()
        try:
            run = await runtime.start(message, session_id=self.session_id, mode=self.mode)
        except AgentCoreError as exc:
            self.printer.line(f"error: {safe(exc.message)}")
            return
        self.session_id = run.session_id
        self.run = run
        self.printer.cancel_requested = False
        interrupts = 0
        loop = asyncio.get_running_loop()
        consumer = self.tasks.spawn(self._consume(run), name=f"events of {run.run_id}")
        cancelling: list[asyncio.Future[Any]] = []

        def on_sigint() -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1:
                self.printer.cancel_requested = True
                cancelling.append(self.tasks.spawn(run.cancel()))
            else:
                consumer.cancel()  # a second Ctrl-C stops waiting; the turn below awaits the consumer

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
            if interrupts < 2:
                await run.wait()
                for future in [*cancelling, *self.cancels]:
                    with contextlib.suppress(AgentCoreError):
                        await future
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
            if self.input is not None and not self.input.interactive:
                self.plain_sigint(loop)
            self.run = None
            self.cancels.clear()
        self.printer.finish()
        if self.printer.cancel_requested or run.status.value == "cancelled":
            self.printer.line("[cancelled]")

    async def _consume(self, run: RunHandle) -> None:
        """The run's events and, indented under the tool call that started them, its descendants'."""
        depth: dict[str, int] = {run.run_id: 0}
        async for event in run.events(include_children=True):
            level = 0
            if event.run_id is not None and event.run_id != run.run_id:
                parent = getattr(event, "parent_run_id", None)
                level = depth.setdefault(event.run_id, depth.get(parent or "", 0) + 2)
                if event.event_type.value.startswith("message_delta"):
                    continue  # a child's reply is shown once, when its message completes
            self.printer.handle(event, depth=level)
            if level == 0 and event.event_type.value == "run_completed":
                self.last_usage = dict(event.payload.get("usage") or {}) or None

    def plain_sigint(self, loop: asyncio.AbstractEventLoop) -> None:
        """Without a terminal, Ctrl-C at the prompt arrives as SIGINT: route it to the line reader."""
        if self.input is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGINT, self.input.interrupt)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
