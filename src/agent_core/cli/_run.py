"""``soong-agent run``: one user message on a project, the reply streamed to stdout (docs/cli.md#run)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import time
from typing import TYPE_CHECKING, Any, TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli import _headless as headless
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._diff import wants_color
from agent_core.cli._headless import OutputFormat
from agent_core.cli._prompt import (
    STDIN_TIMEOUT_S,
    VALID_ANSWERS,
    describe_request,
    parse_permission_answer,
    recognised_answer,
)
from agent_core.cli._questions import ANSWER_PROMPT as QUESTION_PROMPT
from agent_core.cli._questions import QUESTION_TIMEOUT_S, ShownCalls, describe_question, parse_answer
from agent_core.cli._status import ModelStatus
from agent_core.cli._terminal import Output, StdinLines, error_text, escape_terminal

if TYPE_CHECKING:
    from agent_core import RunHandle
    from agent_core.types.events import RuntimeEventPayload
    from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion
    from agent_core.types.runtime import RuntimeEvent, UsageTotals

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_BUSY = 75
"""The session is busy in another process (``EX_TEMPFAIL``: try again later, or pass ``--wait``)."""
NO_CALLBACK = "no permission callback is configured"
"""The policy's reason for a call denied because nobody could be asked."""
HEADLESS_HINT = (
    "hint: this run could ask nobody (message from stdin or --output-format json/stream-json), so calls "
    "that need permission were denied; allow them ahead with [[permissions.rules]] in config.toml, or "
    "choose a permission mode (--permission-mode accept_edits lets file edits inside the project through)\n"
)


class _Discard(Output):
    """An output that drops what it is given (the answer text of ``--output-format json``)."""

    def __init__(self) -> None:
        super().__init__(io.StringIO())

    def write(self, text: str) -> None:
        return None


_DISCARD = _Discard()


class _Printer:
    """Renders the run's events: assistant text to stdout, one-line notices to stderr."""

    def __init__(self, out: Output, err: Output) -> None:
        self.out = out
        self.err = err
        self.cancel_requested = False
        self._streamed = ""
        self._out_at_line_start = True
        self._pending_error: dict[str, Any] | None = None
        self._reasoning = ""
        color = wants_color(err.stream)
        self._dim, self._undim = ("\x1b[2m", "\x1b[0m") if color else ("", "")
        self.status = ModelStatus(err)
        self.status.before_line = self.end_text_line
        self.status.line_open = lambda: not self._out_at_line_start

    def text(self, text: str) -> None:
        if text:
            self.out.write(escape_terminal(text, keep_newlines=True))  # model text: no ESC/CR reaches the tty
            self._out_at_line_start = text.endswith("\n")

    def end_text_line(self) -> None:
        self.end_reasoning()
        if not self._out_at_line_start:
            self.out.write("\n")
            self._out_at_line_start = True

    def reasoning(self, text: str) -> None:
        """Collects the model's reasoning; it is shown folded (one dimmed stderr line) when it ends."""
        self._reasoning += text

    def end_reasoning(self) -> None:
        if self._reasoning:
            text, self._reasoning = self._reasoning, ""
            if not self._out_at_line_start:
                self.out.write("\n")
                self._out_at_line_start = True
            self.err.write(f"{self._dim}{escape_terminal(folded_reasoning(text))}{self._undim}\n")

    def notice(self, line: str) -> None:
        """One stderr line; every model-/tool-derived part is escaped (issue 14 item 6)."""
        self.end_text_line()
        self.err.write(escape_terminal(line) + "\n")

    def _flush_error(self) -> None:
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            self.notice(f"[error] {_error_text(error)}")

    def handle(self, event: RuntimeEvent) -> None:
        from agent_core.types import events as ev  # loaded with the runtime; not at CLI start

        if self.status.handle(event):
            return
        p = event.payload
        if isinstance(p, ev.LoopFailed):
            error = p.error or self._pending_error or {}
            self._pending_error = None
            detail = _error_text(error) if error else str(p.end_reason or "failed")
            self.notice(f"[run] failed: {detail}")
            return
        self._flush_error()
        if isinstance(p, ev.ReasoningDelta):
            self.reasoning(p.text or "")
            return
        self.end_reasoning()
        match p:
            case ev.MessageDelta(text=delta):
                self.text(delta)
                self._streamed += delta
            case ev.MessageCompleted(role=role, text=full):
                if role == "assistant" and full.startswith(self._streamed):
                    self.text(full[len(self._streamed) :])
                # the line stays open: a max_tokens continuation goes on with the same text; the next
                # notice or the end of the run ends it
                self._streamed = ""
            case ev.Error(error=details):
                self._pending_error = dict(details)
            case ev.ToolStarted(tool_name=name, args_summary=args):
                self.notice(f"[tool] {name} {args or ''}".rstrip())
            case ev.ToolCompleted(tool_name=name, duration_ms=ms):
                self.notice(f"[tool] {name} done ({'?' if ms is None else ms} ms)")
            case ev.ToolFailed(tool_name=name, error=failure):
                self.notice(f"[tool] {name} failed: {_error_text(failure or {})}")
            case ev.ToolDenied(tool_name=name, denied_by=by, reason=reason):
                self.notice(f"[tool] {name} denied ({by}): {reason or 'denied'}")
            case ev.RunQueued(queue_position=position):
                self.notice(f"[run] queued behind another run of this session (position {position})")
            case ev.LoopAborted(abort_reason=why, end_reason=end) if not self.cancel_requested:
                self.notice(f"[run] aborted: {why or end}")
            case ev.StopHookPrevented(reason=reason):
                self.notice(f"[hook] Stop hook asked the agent to continue: {reason or ''}".rstrip(": "))
            case ev.RunCancelled():
                self.notice("[run] cancelled")
            case ev.ModelFallback():
                self.notice(
                    f"[model] {p.from_provider}/{p.from_model} failed ({(p.error or {}).get('code')}); "
                    f"continuing on {p.to_provider}/{p.to_model} (profile {p.profile})"
                )
            case ev.ContextOverflow(prompt_tokens=tokens, context_window=window):
                self.notice(
                    f"[model] the provider said the prompt is too long ({tokens or '?'} tokens, "
                    f"window {window or '?'}); compacting and retrying once"
                )
            case _:
                self._agent_notice(p)

    def _agent_notice(self, p: RuntimeEventPayload) -> None:
        from agent_core.types import events as ev

        match p:
            case ev.ChildAgentCreated():
                definition = p.agent_definition_id or "child"
                self.notice(f"[agent] created {definition} ({p.agent_type}) agent {p.child_agent_id}")
            case ev.WorkerDispatched():
                self.notice(
                    f"[agent] dispatched worker {p.worker_agent_id} on task {p.task_id} "
                    f"(run {p.child_run_id or '-'})"
                )
            case ev.WorkerDispatchFailed(error=error):
                self.notice(f"[agent] worker dispatch failed: {_error_text(error or {})}")
            case ev.ChildAgentCompleted(child_run_id=run, status=status):
                self.notice(f"[agent] child run {run or '-'} {status or 'completed'}")
            case ev.ChildAgentFailed(child_run_id=run, error=error):
                self.notice(f"[agent] child run {run or '-'} failed: {_error_text(error or {})}")
            case ev.ChildAgentCancelled(child_run_id=run):
                self.notice(f"[agent] child run {run or '-'} cancelled")

    def finish(self) -> None:
        self.status.clear()
        self._flush_error()
        self.end_text_line()


REASONING_FOLD = 100
"""Characters of a reasoning's first line shown in its folded line."""


def folded_reasoning(text: str, limit: int = REASONING_FOLD) -> str:
    """One line standing for a reasoning: ``▸ reasoning (N lines): <its first line, cut>``."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    first = " ".join(lines[0].split()) if lines else ""
    if len(first) > limit:
        first = first[: limit - 1] + "…"
    more = f"{len(lines)} line{'s' if len(lines) != 1 else ''}"
    return f"▸ reasoning ({more}): {first}"


def _read_schema(path: str) -> tuple[dict[str, Any] | None, str]:
    """The ``--output-schema`` file as a JSON object, or ``(None, problem)``."""
    try:
        with open(path, encoding="utf-8") as fh:
            value = json.load(fh)
    except OSError as exc:
        return None, f"cannot read --output-schema file {escape_terminal(path)}: {exc.strerror or exc}"
    except (ValueError, RecursionError) as exc:
        return None, f"--output-schema file {escape_terminal(path)} is not valid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"--output-schema file {escape_terminal(path)} must hold a JSON object (a JSON schema)"
    return value, ""


def usage_line(usage: UsageTotals) -> str:
    """``usage: 1,234 input (27 uncached, cache read 1,200, cache write 7) + 56 output tokens, $0.0123``
    (the input split only when the provider's prompt cache was used; cost only when priced)."""
    cache = [
        f"{label} {value:,}"
        for label, value in (
            ("cache read", usage.cache_read_tokens),
            ("cache write", usage.cache_write_tokens),
        )
        if value
    ]
    split = f" ({usage.uncached_input_tokens:,} uncached, {', '.join(cache)})" if cache else ""
    line = f"usage: {usage.input_tokens:,} input{split} + {usage.output_tokens:,} output tokens"
    if usage.cost_usd is not None:
        line += f", ${usage.cost_usd:.4f}"
    return line


def _error_text(error: dict[str, Any]) -> str:
    code = error.get("code")
    message = " ".join(str(error.get("message") or "").split())
    return f"{code}: {message}" if code else message or "unknown error"


class _Sink:
    """Where the run's events go: the text printer, or (stream-json) one JSON line each on stdout."""

    def __init__(self, printer: _Printer, out: Output, output_format: OutputFormat) -> None:
        self.printer = printer
        self.out = out
        self.format = output_format
        self.headless_denials = 0
        self.shown = ShownCalls()
        """The tool calls whose line was printed (a question is shown after its call's line)."""

    def handle(self, event: RuntimeEvent) -> None:
        from agent_core.types.events import ToolDenied

        payload = event.payload
        if isinstance(payload, ToolDenied) and NO_CALLBACK in str(payload.reason or ""):
            self.headless_denials += 1
        if self.format == "stream-json":
            headless.write_line(self.out, headless.event_line(event))
        else:
            self.printer.handle(event)
        self.shown.saw(event)


async def _consume(run: RunHandle, sink: _Sink) -> None:
    # stream-json carries the child runs' events too (as serve's event stream does)
    async for event in run.events(include_children=sink.format == "stream-json"):
        sink.handle(event)


async def run_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent run``; returns the exit status."""
    started = time.monotonic()
    output_format: OutputFormat = getattr(args, "output_format", None) or "text"
    message, from_stdin, problem = await headless.read_message(getattr(args, "message", None), stdin)
    if message is None:
        from agent_core.cli import usage_error

        err.write(usage_error("run", escape_terminal(problem)))
        return EXIT_USAGE
    # headless: nobody to ask (the message used stdin, or stdout is for a program): the mode decides
    interactive = not from_stdin and output_format == "text"

    from agent_core import AgentRuntime  # the package's lazy import (GC paused: cold start)
    from agent_core.errors import AgentCoreError, ErrorCode
    from agent_core.types.permissions import PermissionDecision

    answers = StdinLines(stdin if interactive else None)
    root_run_id = ""

    async def ask(request: PermissionRequest) -> PermissionDecision:
        printer.notice("")  # end any partial text line before the prompt
        err.write(describe_request(request, color=wants_color(err.stream)))
        answered, line = await answers.readline(STDIN_TIMEOUT_S)
        decision = parse_permission_answer(line)
        if not answered:
            why = f"no answer within {STDIN_TIMEOUT_S:.0f} s"
        elif line is None:
            why = "end of input"
        elif recognised_answer(line) is None:
            why = f"unrecognised answer {escape_terminal(line.strip())!r}; valid answers: {VALID_ANSWERS}"
        else:
            why = ""
        echo = "" if answers.interactive and answered and line is not None else "\n"
        err.write(f"{echo}  -> {decision.replace('_', ' ')}{f' ({why})' if why else ''}\n")
        return PermissionDecision(decision=decision, reason=why or None)

    async def ask_question(question: UserQuestion) -> str:
        """``internal.ask_user`` on a terminal: the question on stderr, the answer from stdin."""
        if question.run_id == root_run_id:  # this stream shows the root run's tool lines only
            await sink.shown.wait(question.tool_call_id)
        printer.notice("")
        err.write(describe_question(question) + "\n")
        while True:
            err.write(QUESTION_PROMPT)
            answered, line = await answers.readline(QUESTION_TIMEOUT_S)
            if not answered or line is None:
                err.write(f"\n  -> {'not answered (end of input)' if answered else 'no answer in time'}\n")
                return ""
            answer = parse_answer(line, question.options)
            if answer is not None:
                return answer

    def fail(exc: AgentCoreError) -> int:
        """A run that could not start: one line on stderr (and the result object for a program)."""
        err.write(error_text(exc))
        if output_format != "text":
            failure = headless.startup_failure(exc.to_payload(), started)
            headless.write_line(out, headless.dumps(failure))
        return EXIT_FAILED

    schema: dict[str, Any] | None = None
    if getattr(args, "output_schema", None):
        schema, problem = _read_schema(args.output_schema)
        if problem:
            err.write(f"soong-agent: error: {escape_terminal(problem)}\n")
            return EXIT_FAILED
    user_message: Any = message
    images = list(getattr(args, "image", None) or [])
    if images:
        from agent_core.types.runtime import UserMessage

        try:
            user_message = UserMessage.with_files(message, *images)
        except OSError as exc:
            err.write(
                f"soong-agent: error: cannot read --image {escape_terminal(str(exc.filename))}: {exc.strerror}\n"
            )
            return EXIT_FAILED
    # text: the answer streams to stdout (to stderr with --output-schema: stdout carries only the JSON);
    # json: notices on stderr, the answer only in the result object; stream-json: stdout is the events
    text_out = out if output_format == "text" and schema is None else err
    printer = _Printer(text_out if output_format == "text" else _DISCARD, err)
    sink = _Sink(printer, out, output_format)
    try:
        # a question needs someone at the terminal: without one, ask_user tells the model to decide itself
        runtime = AgentRuntime(
            project_dir=args.path,
            permission_callback=ask if interactive else None,
            question_callback=ask_question if interactive and answers.interactive else None,
        )
    except AgentCoreError as exc:
        return fail(exc)
    interrupted = 0
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(runtime)  # opens storage, hooks, MCP catalog, ...
            if interrupts.pending():  # Ctrl-C while it opened: start nothing (main prints the line)
                return EXIT_INTERRUPTED
            run = await runtime.start(
                user_message,
                session_id=args.session_id,
                mode="orchestrator" if args.orchestrator else "normal",
                output_schema=schema,
                model_profile=getattr(args, "model", None),
                max_turns=getattr(args, "max_turns", None),
                wait_if_busy=bool(getattr(args, "wait", False)),
                permission_mode=getattr(args, "permission_mode", None),
            )
        except AgentCoreError as exc:
            if exc.code == ErrorCode.session_active:  # another process runs the session (issue 40)
                err.write(
                    f"soong-agent: error: {escape_terminal(exc.message)}; "
                    "run again with --wait to wait for it\n"
                )
                if output_format != "text":
                    headless.write_line(
                        out, headless.dumps(headless.startup_failure(exc.to_payload(), started))
                    )
                return EXIT_BUSY
            return fail(exc)
        root_run_id = run.run_id
        tasks = await stack.enter_async_context(TaskOwner("run command"))  # closed before the runtime
        consumer = tasks.spawn(_consume(run, sink))
        cancelling: list[asyncio.Future[Any]] = []

        def on_sigint() -> None:
            nonlocal interrupted
            interrupted += 1
            interrupts.mark_reported()
            if interrupted == 1:
                printer.cancel_requested = True
                printer.notice("[run] cancelling (Ctrl-C again to stop waiting)...")
                cancelling.append(tasks.spawn(run.cancel()))
            else:
                consumer.cancel()  # a second Ctrl-C stops waiting; awaited below

        with interrupts.on_interrupt(on_sigint):
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
            if interrupted < 2:
                await run.wait()
                for future in cancelling:
                    await future
        printer.finish()
        value: Any = None
        output_error: AgentCoreError | None = None
        if schema is not None and run.status.value == "completed":
            try:
                value = await run.output()
            except AgentCoreError as exc:
                output_error = exc
        if output_format != "text":
            outcome = await headless.result(runtime, run, started=started, output=value)
            if output_error is not None:
                outcome["error"] = output_error.to_payload().model_dump(mode="json")
            headless.write_line(out, headless.dumps(outcome))
        elif output_error is not None:
            err.write(error_text(output_error))
            return EXIT_FAILED
        elif schema is not None and run.status.value == "completed":
            # ensure_ascii: every control or non-ASCII character is a JSON escape, safe on a terminal
            out.write(json.dumps(value, indent=2, ensure_ascii=True) + "\n")
        if output_format == "text":
            with contextlib.suppress(AgentCoreError):  # usage of the run and its sub-agents (issue 19)
                usage = (await runtime.replay_run(run.run_id)).usage
                if usage is not None:
                    err.write(usage_line(usage) + "\n")
            err.write(f"session_id: {run.session_id}\n")
        if sink.headless_denials and output_format != "stream-json":
            err.write(HEADLESS_HINT)
        status = run.status.value
        if run.permission_mode == "plan" and status == "completed":
            err.write(
                "plan mode: nothing was changed. To carry out the plan: soong-agent run --session-id "
                f'{run.session_id} --permission-mode default "Carry out the plan."\n'
            )
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if status == "completed" and output_error is None else EXIT_FAILED
