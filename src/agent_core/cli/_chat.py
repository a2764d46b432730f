"""``soong-agent chat``: an interactive multi-turn session on one ``AgentRuntime`` (surfaces.md §1).

Contracts:

- Each entered line that is not a slash command is one ``runtime.start(line, session_id=current,
  mode=current)``; the reply streams to stdout (Markdown on a terminal, plain text when piped). The
  prompt line ends with ``> `` and is shown on stdout when it is a terminal, else on stderr.
- Permission prompts are inline: the request (with the diff of a write/edit) and ``Answer [1/2/3]:``,
  answered like ``run`` (contract.md §10); Ctrl-C at that prompt denies and cancels the run; no answer
  within 120 s denies.
- Ctrl-C during a run calls ``run.cancel()``, prints ``[cancelled]`` and returns to the prompt (a second
  Ctrl-C stops waiting for the cancellation). Ctrl-C twice in a row at an empty prompt, Ctrl-D, ``/exit``
  or ``/quit`` leave with status 0. Startup errors (config, unknown ``--session-id``) → status 1.
- ``--continue`` resumes the most recently updated session of the project, ``--session-id`` a given one.
- Startup: the prompt is shown while the runtime opens in the background; the first command or message
  waits for it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
from typing import TYPE_CHECKING, Any, Literal, TextIO

from agent_core.cli._chat_input import Interrupted, LineInput, chat_home, open_input
from agent_core.cli._chat_render import ChatPrinter, safe
from agent_core.cli._diff import wants_color
from agent_core.cli._prompt import STDIN_TIMEOUT_S, describe_request, parse_permission_answer
from agent_core.cli._terminal import Output

if TYPE_CHECKING:
    from agent_core.api.handles import RunHandle
    from agent_core.api.runtime import AgentRuntime
    from agent_core.types.permissions import PermissionDecision, PermissionRequest

EXIT_OK, EXIT_FAILED = 0, 1
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
        self.cancels: list[asyncio.Future[Any]] = []
        """``run.cancel()`` calls started from a permission prompt (awaited when the turn ends)."""
        self.quit = False

    # ---- runtime ------------------------------------------------------------------------------
    def start_opening(self, path: str | None) -> asyncio.Future[Any]:
        """Starts importing, constructing and opening the runtime (at most once)."""
        if self.opening is None:
            self.opening = asyncio.ensure_future(self._open(path))
        return self.opening

    async def _open(self, path: str | None) -> None:
        def construct() -> AgentRuntime:  # the imports and config loading run off the event loop
            from agent_core.api.runtime import AgentRuntime

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
                self.cancels.append(asyncio.ensure_future(self.run.cancel()))
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
        consumer = asyncio.ensure_future(self._consume(run))
        cancelling: list[asyncio.Future[Any]] = []

        def on_sigint() -> None:
            nonlocal interrupts
            interrupts += 1
            if interrupts == 1:
                self.printer.cancel_requested = True
                cancelling.append(asyncio.ensure_future(run.cancel()))
            else:
                consumer.cancel()

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
                self._plain_sigint(loop)
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

    def _plain_sigint(self, loop: asyncio.AbstractEventLoop) -> None:
        """Without a terminal, Ctrl-C at the prompt arrives as SIGINT: route it to the line reader."""
        if self.input is not None:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(signal.SIGINT, self.input.interrupt)

    # ---- the prompt loop ----------------------------------------------------------------------
    async def loop(self) -> None:
        from agent_core.cli._chat_commands import run_command
        from agent_core.errors import AgentCoreError

        assert self.input is not None
        self._plain_sigint(asyncio.get_running_loop())
        interrupted = False
        while not self.quit:
            try:
                line = await self.input.read("> ")
            except Interrupted:
                if interrupted:
                    return
                interrupted = True
                self.note("(press Ctrl-C again or Ctrl-D to leave)")
                continue
            if line is None:
                return
            interrupted = False
            text = line.strip()
            if not text:
                continue
            try:
                if text.startswith("/"):
                    await run_command(self, text)
                else:
                    await self.turn(line)
            except AgentCoreError as exc:
                self.printer.line(f"error: {safe(exc.message)}")


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


async def _resume(chat: ChatSession, args: argparse.Namespace) -> bool:
    """Applies ``--session-id`` / ``--continue``; prints the startup error and returns False on failure."""
    from agent_core.errors import AgentCoreError

    if not args.session_id and not args.continue_:
        return True
    runtime = await chat.ready()
    try:
        sessions = await runtime.list_sessions()
    except AgentCoreError as exc:
        chat.err.write(f"soong-agent: error: {exc.message}\n")
        return False
    if args.session_id:
        found = next((s for s in sessions if s.session_id == args.session_id), None)
        if found is None:
            chat.err.write(f"soong-agent: error: unknown session {args.session_id!r} in this project\n")
            return False
    elif not sessions:
        chat.note("no earlier session in this project: starting a new one")
        return True
    else:
        found = sessions[0]
    chat.session_id = found.session_id
    chat.mode = found.mode
    chat.note(f"resumed session {found.session_id} ({found.mode}): {safe(found.title)}")
    return True


async def chat_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent chat``; returns the exit status."""
    chat = ChatSession(out, err, stdin, "orchestrator" if args.orchestrator else "normal")
    chat.path = args.path
    chat.input = open_input(chat_home(), stdin, chat.prompt_out)

    def open_runtime() -> None:
        chat.start_opening(args.path)

    chat.input.on_first_prompt = open_runtime
    failed = False
    try:
        if args.session_id or args.continue_:
            await chat.start_opening(args.path)
        if not await _resume(chat, args):
            return EXIT_FAILED
        await chat.loop()
    except Exception as exc:
        failed = _report(err, exc)
        return EXIT_FAILED
    finally:
        chat.printer.end_reply()
        if chat.opening is not None:
            try:
                await chat.opening
            except Exception as exc:
                failed = failed or _report(err, exc)
        if chat.runtime is not None:
            await chat.runtime.close()
    return EXIT_FAILED if failed else EXIT_OK


def _report(err: Output, exc: Exception) -> bool:
    """Prints a startup/runtime error (an ``AgentCoreError`` as one line); returns True."""
    from agent_core.errors import AgentCoreError

    if not isinstance(exc, AgentCoreError):
        raise exc
    err.write(f"soong-agent: error: {exc.message}\n")
    return True
