"""The state of one ``soong-agent chat``: the runtime it opens, the current session and mode, one turn
(a streamed reply that Ctrl-C cancels) and the inline permission prompt (see :mod:`agent_core.cli._chat`).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._chat_input import Interrupted, LineInput
from agent_core.cli._chat_render import ChatPrinter, safe
from agent_core.cli._chat_team import TeamWatcher
from agent_core.cli._diff import wants_color
from agent_core.cli._prompt import (
    STDIN_TIMEOUT_S,
    VALID_ANSWERS,
    VALID_WORDS,
    describe_request,
    recognised_answer,
)
from agent_core.cli._questions import ANSWER_PROMPT as QUESTION_PROMPT
from agent_core.cli._questions import QUESTION_TIMEOUT_S, ShownCalls, describe_question, parse_answer
from agent_core.cli._terminal import Output

if TYPE_CHECKING:
    from agent_core import AgentRuntime, RunHandle
    from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

Mode = Literal["normal", "orchestrator"]
ANSWER_PROMPT = "Answer [1/2/3]: "
ANSWER_TRIES = 3
"""Unrecognised answers a terminal prompt takes before it denies."""


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
        self.printer = ChatPrinter(out, rich=self.terminal, err=err)
        self.input: LineInput | None = None
        self.run: RunHandle | None = None
        self.last_run: RunHandle | None = None
        """The run of the latest turn (its status and permission mode: plan approval)."""
        self.permission_mode: str | None = None
        """The permission mode chosen with ``--permission-mode`` or ``/mode`` (``None``: the configured one)."""
        self.last_usage: dict[str, Any] | None = None
        self.tasks = TaskOwner("chat")
        """The runtime's background open, the turns' event consumers and cancel requests; closed by
        ``chat_command`` when the chat ends."""
        self.cancels: list[asyncio.Future[Any]] = []
        """``run.cancel()`` calls started from a permission prompt (awaited when the turn ends)."""
        self.quit = False
        self.shown_calls = ShownCalls()
        self.prompting = asyncio.Lock()
        """Held while a permission prompt or a question is on the input line."""
        self.permission_asked = False
        """A permission prompt was shown during the current turn (its answers never become messages)."""
        self.queued: list[str] = []
        """Slash commands typed at a permission prompt, run when the turn ends."""
        self.attachments: list[Path] = []
        """Files ``/image`` attached to the next message."""
        self.team = TeamWatcher(self)
        """The current session's teammates' activity (``/team`` lists them)."""

    # ---- runtime ------------------------------------------------------------------------------
    async def load(self, path: str | None) -> AgentRuntime:
        """Constructs the runtime (reads and validates the config off the event loop) and checks the
        API-key variables it names: both fail before the first prompt (``AgentCoreError``)."""
        from agent_core.config import check_credentials

        def construct() -> AgentRuntime:
            from agent_core import AgentRuntime

            return AgentRuntime(
                project_dir=path,
                permission_callback=self._one_prompt_at_a_time,
                question_callback=self.ask_question,
            )

        runtime = await asyncio.to_thread(construct)
        check_credentials(runtime.config)
        self.runtime = runtime
        return runtime

    def start_opening(self) -> asyncio.Future[Any]:
        """Starts opening the loaded runtime (storage, hooks, MCP catalog, ...), at most once."""
        if self.opening is None:
            self.opening = self.tasks.spawn(self._open(), name="open runtime")
        return self.opening

    async def _open(self) -> None:
        assert self.runtime is not None
        try:
            await self.runtime.open()  # storage, hooks, MCP catalog, ...
        except BaseException:
            if self.input is not None:
                self.input.abort()  # the prompt ends; chat_command reports the error once
            raise

    async def ready(self) -> AgentRuntime:
        """The open runtime (waits for the background open started at the first prompt)."""
        await self.start_opening()
        assert self.runtime is not None
        return self.runtime

    def open_failed(self) -> bool:
        """Whether the background open of the runtime ended with an error."""
        opening = self.opening
        return (
            opening is not None and opening.done() and not opening.cancelled() and bool(opening.exception())
        )

    def banner(self) -> str:
        """One line: model, project, session and where help is."""
        from agent_core.config import resolve_purpose_model

        assert self.runtime is not None
        config = self.runtime.config
        model = resolve_purpose_model(config, "orchestrator" if self.mode == "orchestrator" else "main")
        session = self.session_id or "new session"
        mode = "" if self.mode == "normal" else f" ({self.mode} mode)"
        permissions = self.permission_mode or config.settings.permissions.mode
        if permissions != "default":  # the permission mode, when it is not the usual one
            mode += f" · permissions: {permissions}"
        return (
            f"soong-agent chat · {safe(model.name)} ({safe(model.provider)}) · {safe(str(config.project))} · "
            f"{session}{mode} · /help for commands, Ctrl-D to leave"
        )

    def note(self, text: str) -> None:
        """A one-line chat notice (dimmed on a terminal)."""
        self.printer.line(text, dim=True)

    # ---- permission prompts -------------------------------------------------------------------
    async def _one_prompt_at_a_time(self, request: PermissionRequest) -> PermissionDecision:
        async with self.prompting:  # a question and a permission prompt never share the input line
            return await self.ask(request)

    async def ask_question(self, question: UserQuestion) -> str:
        """Shows a question of ``internal.ask_user`` and reads the answer (``cli._questions``); an empty
        string when it stays unanswered (end of input, Ctrl-C, no answer in time)."""
        async with self.prompting:
            await self.shown_calls.wait(question.tool_call_id)
            self.printer.end_reply()
            self.prompt_out.write(describe_question(question) + "\n")
            assert self.input is not None
            while True:
                try:
                    line = await asyncio.wait_for(
                        self.input.read(QUESTION_PROMPT, history=False), QUESTION_TIMEOUT_S
                    )
                except TimeoutError:
                    self.prompt_out.write(f"  -> no answer within {QUESTION_TIMEOUT_S:.0f} s\n")
                    return ""
                except Interrupted:  # as at a permission prompt: Ctrl-C also cancels the run
                    self.prompt_out.write("  -> not answered (interrupted)\n")
                    if self.run is not None:
                        self.printer.cancel_requested = True
                        self.cancels.append(self.tasks.spawn(self.run.cancel()))
                    return ""
                if line is None:
                    self.prompt_out.write("\n  -> not answered (end of input)\n")
                    return ""
                answer = parse_answer(line, question.options)
                if answer is not None:
                    if not self.input.interactive:
                        self.prompt_out.write("\n")
                    return answer

    async def ask(self, request: PermissionRequest) -> PermissionDecision:
        """The inline permission prompt. On a terminal an unrecognised answer re-prompts with the valid
        choices (yes/no-style words count too), at most :data:`ANSWER_TRIES` times, then denies; piped
        input keeps ``run``'s contract (anything unrecognised denies at once, naming the valid answers).
        The answers are read here, so none of them reaches the chat as a message."""
        from agent_core.types.permissions import PermissionDecision

        if request.metadata.get("mcp_request") == "elicitation":
            from agent_core.cli._chat_mcp import ask_elicitation

            return await ask_elicitation(self, request)
        self.printer.end_reply()
        color = self.terminal if self.prompt_out is self.out else wants_color(self.err.stream)
        text = describe_request(request, color=color)
        head, _, _ = text.rpartition("\n")
        self.prompt_out.write(head + "\n")
        assert self.input is not None
        interactive = self.input.interactive
        loop = asyncio.get_running_loop()
        deadline = loop.time() + STDIN_TIMEOUT_S
        decision: str | None = None
        why = ""
        attempt = 0
        while attempt < ANSWER_TRIES:
            try:
                line = await asyncio.wait_for(
                    self.input.read(ANSWER_PROMPT, history=False), max(0.0, deadline - loop.time())
                )
            except TimeoutError:
                why = f"no answer within {STDIN_TIMEOUT_S:.0f} s"
                break
            except Interrupted:
                why = "interrupted"
                if self.run is not None:
                    self.printer.cancel_requested = True
                    self.cancels.append(self.tasks.spawn(self.run.cancel()))
                break
            if line is None:
                why = "end of input"
                break
            if not interactive:
                self.prompt_out.write("\n")
            if interactive and line.strip().startswith("/"):  # a command typed ahead: run after the turn
                self.queued.append(line.strip())
                self.prompt_out.write(f"  ({safe(line.strip())} runs when this reply ends)\n")
                continue
            attempt += 1
            decision = recognised_answer(line, words=interactive)
            if decision is not None:
                break
            shown = safe(line.strip())
            if not interactive or attempt == ANSWER_TRIES:
                why = f"unrecognised answer {shown!r}; valid answers: {VALID_ANSWERS}"
                break
            self.prompt_out.write(
                f"  {shown!r} is not an answer: type 1 (allow once), 2 (allow for session) or 3 (deny); "
                f"{VALID_WORDS} ({ANSWER_TRIES - attempt} more {'try' if attempt + 1 == ANSWER_TRIES else 'tries'})\n"
            )
        final = decision or "deny"
        self.prompt_out.write(f"  -> {final.replace('_', ' ')}{f' ({why})' if why else ''}\n")
        self.permission_asked = True
        return PermissionDecision(decision=final, reason=why or None)

    # ---- one turn -----------------------------------------------------------------------------
    async def turn(self, message: str) -> None:
        from agent_core.cli._chat_mcp import with_attachments
        from agent_core.errors import AgentCoreError

        runtime = await self.ready()
        files: list[Any] = []
        if self.attachments:
            files, self.attachments = self.attachments, []
        try:
            sent = await with_attachments(self, message)  # @server:uri mentions of MCP resources
            if sent is None:
                return
            content: Any = sent
            if files:  # /image attachments ride on the same message
                from agent_core.types.runtime import UserMessage

                try:
                    if isinstance(sent, str):
                        content = UserMessage.with_files(sent, *files)
                    else:
                        added = UserMessage.with_files(None, *files).attachments
                        content = sent.model_copy(update={"attachments": [*sent.attachments, *added]})
                except OSError as exc:
                    self.printer.line(
                        f"error: cannot read {safe(str(exc.filename))}: {safe(str(exc.strerror))}"
                    )
                    return
            run = await runtime.start(
                content,
                session_id=self.session_id,
                mode=self.mode,
                permission_mode=self.permission_mode,  # type: ignore[arg-type]
            )
        except AgentCoreError as exc:
            self.printer.line(f"error: {safe(exc.message)}")
            return
        self.session_id = run.session_id
        self.run = run
        self.last_run = run
        self.permission_asked = False
        self.team.follow(runtime, run.session_id)
        self.printer.cancel_requested = False
        presses = 0
        consumer = self.tasks.spawn(self._consume(run), name=f"events of {run.run_id}")
        cancelling: list[asyncio.Future[Any]] = []

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                self.printer.cancel_requested = True
                cancelling.append(self.tasks.spawn(run.cancel()))
            else:
                consumer.cancel()  # a second Ctrl-C stops waiting; the turn below awaits the consumer

        assert self.input is not None
        try:
            with interrupts.on_interrupt(on_sigint), self.input.quiet():
                with contextlib.suppress(asyncio.CancelledError):
                    await consumer
                if presses < 2:
                    await run.wait()
                    for future in [*cancelling, *self.cancels]:
                        with contextlib.suppress(AgentCoreError):
                            await future
        finally:
            self.run = None
            self.cancels.clear()
        self.printer.finish()
        if self.printer.cancel_requested or run.status.value == "cancelled":
            self.printer.line("[cancelled]")
        self.team.after_turn()

    async def _consume(self, run: RunHandle) -> None:
        """The run's events and, indented under the tool call that started them, its descendants'."""
        depth: dict[str, int] = {run.run_id: 0}
        from agent_core.types.events import MessageDelta, RunCompleted

        async for event in run.events(include_children=True):
            level = 0
            if event.run_id is not None and event.run_id != run.run_id:
                parent = getattr(event, "parent_run_id", None)
                level = depth.setdefault(event.run_id, depth.get(parent or "", 0) + 2)
                if event.event_type == MessageDelta.event_type:
                    continue  # a child's reply is shown once, when its message completes
            self.printer.handle(event, depth=level)
            self.shown_calls.saw(event)
            if level == 0 and isinstance(payload := event.payload, RunCompleted):
                self.last_usage = dict(payload.usage or {}) or None


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
