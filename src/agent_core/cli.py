"""The ``soong-agent`` command line (contract.md §10, config.md §11).

``soong-agent run [--path <dir-or-file>] [--orchestrator] [--session-id <id>] "message"`` runs one user
message on a project with the user-level configuration (``$SOONG_AGENT_HOME/config.toml``; never created).

Contract:
- stdout carries only the assistant's text (``message_delta``, then any remainder of ``message_completed``);
  permission prompts, one-line notices (tools, denials, errors, cancellation) and the final ``session_id``
  go to stderr. Output is plain text; there is no JSON event stream (``--plain`` is an accepted no-op).
- Permission prompts are answered on stdin: ``1``/``allow once``, ``2``/``allow for session``,
  ``3``/``deny`` (trimmed, case-insensitive); EOF, unavailable stdin, anything else or 120 s without an
  answer → ``deny``. There is no re-prompt.
- Exit status: 0 when the run ends ``completed``; 1 for startup/config errors and runs ending otherwise;
  2 for usage errors; 130 after Ctrl-C (which calls ``run.cancel()``; a second Ctrl-C stops waiting).
- Cold start: only argparse/asyncio/logging are imported before the arguments are parsed; the runtime
  is imported afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from agent_core.api.handles import RunHandle
    from agent_core.types.permissions import PermissionDecision, PermissionRequest
    from agent_core.types.runtime import RuntimeEvent

STDIN_TIMEOUT_S = 120.0
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

_ANSWERS = {
    "1": "allow_once",
    "allow once": "allow_once",
    "2": "allow_for_session",
    "allow for session": "allow_for_session",
    "3": "deny",
    "deny": "deny",
}


def parse_permission_answer(line: str | None) -> str:
    """Maps one stdin answer to a decision; EOF (``None``), empty or any other input → ``deny``."""
    if line is None:
        return "deny"
    return _ANSWERS.get(" ".join(line.strip().lower().split()), "deny")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit with status 2 and a one-line message
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _message(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the message must not be empty")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="soong-agent",
        description="Run an LLM agent on a project. Configuration comes only from "
        "$SOONG_AGENT_HOME/config.toml (default ~/.soong-agent/config.toml), which must exist.",
    )
    sub = parser.add_subparsers(dest="command", metavar="{run}", parser_class=_Parser)
    sub.required = True
    run = sub.add_parser(
        "run",
        help="run an agent on a project with one user message",
        description="Run one user message on a project and stream the reply to stdout. Tool activity, "
        "permission prompts (answered on stdin: 1 = allow once, 2 = allow for session, 3 = deny) "
        "and the session id go to stderr.",
    )
    run.add_argument("--path", help="project directory; a file selects its parent directory (default: cwd)")
    run.add_argument(
        "--orchestrator", action="store_true", help="run in orchestrator mode (Task board and workers)"
    )
    run.add_argument("--session-id", metavar="ID", help="continue an existing session")
    run.add_argument("--plain", action="store_true", help="plain text output (the default; no effect)")
    run.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    run.add_argument("message", type=_message, help="the user message")
    return parser


class _StdinLines:
    """Line reader over stdin's file descriptor for permission answers, with a per-answer timeout.

    One daemon thread reads raw bytes (``os.read``: no Python stream lock is held while it blocks) and
    hands complete lines to the event loop; end of input (EOF, closed or unreadable stdin) is final.
    Lines piped in ahead are answers to later prompts; on a terminal, lines typed before a prompt
    appeared are discarded.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self._fd: int | None = None
        self._tty = False
        if stream is not None:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                self._fd = stream.fileno()
                self._tty = stream.isatty()
        self._queue: asyncio.Queue[str | None] | None = None
        self._eof = False

    @property
    def interactive(self) -> bool:
        return self._tty

    def _reader(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        def deliver(line: str | None) -> bool:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            except RuntimeError:  # the event loop is closed: the CLI is exiting
                return False
            return True

        buffer = b""
        while True:
            try:
                chunk = os.read(self._fd, 4096) if self._fd is not None else b""
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                if buffer:
                    deliver(buffer.decode("utf-8", "replace"))
                deliver(None)
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not deliver(line.decode("utf-8", "replace")):
                    return

    async def readline(self, timeout: float) -> tuple[bool, str | None]:
        """``(answered, line)``: ``line`` is ``None`` at end of input; ``answered`` is false on timeout."""
        if self._eof:
            return True, None
        if self._queue is None:
            self._queue = asyncio.Queue()
            thread = threading.Thread(
                target=self._reader,
                args=(asyncio.get_running_loop(), self._queue),
                name="soong-agent-stdin",
                daemon=True,
            )
            thread.start()
        elif self._tty:  # typed ahead on a terminal, before this prompt was shown
            while not self._queue.empty():
                if self._queue.get_nowait() is None:
                    self._eof = True
                    return True, None
        try:
            line = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return False, None
        if line is None:
            self._eof = True
        return True, line


def describe_request(request: PermissionRequest) -> str:
    """The permission prompt text (config.md §11): everything the user needs to decide."""
    agent = f"{request.agent_role} agent {request.agent_id} (run {request.run_id})"
    lines = [
        f"Permission requested by the {agent}",
        f"  tool:       {request.tool_name}",
        f"  permission: {request.permission}    dangerous: {'yes' if request.dangerous else 'no'}",
        f"  tags:       {', '.join(request.tags) or '-'}",
        f"  arguments:  {request.args_summary}",
        f"  target:     {request.target_scope or '-'}",
        f"  cwd:        {request.cwd}",
    ]
    if request.network_host:
        lines.append(f"  network:    {request.network_host}")
    if request.parent_agent_id or request.parent_run_id:
        lines.append(
            f"  parent:     agent {request.parent_agent_id or '-'}, run {request.parent_run_id or '-'}"
        )
    if request.hook_summary:
        lines.append(f"  hooks:      {request.hook_summary}")
    lines.append(f"  suggested:  {request.suggested_decision.value.replace('_', ' ')}")
    choices = "  [1] allow once   [2] allow for session   [3] deny"
    if request.metadata.get("allow_for_session_available") is False:
        choices += "   (no scope to remember: 2 acts as allow once)"
    lines += [choices, "Answer [1/2/3]: "]
    return "\n".join(lines)


class _Output:
    """Writes to a stream, ignoring a closed pipe (``soong-agent run ... | head``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> None:
        if self.broken or not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            self.broken = True
            # the stream's buffered remainder would fail again at interpreter exit: point the file
            # descriptor at /dev/null (the recipe in the Python signal docs)
            with contextlib.suppress(AttributeError, OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)


class _Printer:
    """Renders the run's events: assistant text to stdout, one-line notices to stderr."""

    def __init__(self, out: _Output, err: _Output) -> None:
        self.out = out
        self.err = err
        self.cancel_requested = False
        self._streamed = ""
        self._out_at_line_start = True
        self._pending_error: dict[str, Any] | None = None

    def text(self, text: str) -> None:
        if text:
            self.out.write(text)
            self._out_at_line_start = text.endswith("\n")

    def end_text_line(self) -> None:
        if not self._out_at_line_start:
            self.out.write("\n")
            self._out_at_line_start = True

    def notice(self, line: str) -> None:
        self.end_text_line()
        self.err.write(line + "\n")

    def _flush_error(self) -> None:
        if self._pending_error is not None:
            error, self._pending_error = self._pending_error, None
            self.notice(f"[error] {_error_text(error)}")

    def handle(self, event: RuntimeEvent) -> None:
        kind = event.event_type.value
        p = event.payload
        if kind == "loop_failed":
            error = p.get("error") or self._pending_error or {}
            self._pending_error = None
            detail = _error_text(error) if error else str(p.get("end_reason") or "failed")
            self.notice(f"[run] failed: {detail}")
            return
        self._flush_error()
        if kind == "message_delta":
            delta = str(p.get("text", ""))
            self.text(delta)
            self._streamed += delta
        elif kind == "message_completed":
            if p.get("role", "assistant") == "assistant":
                full = str(p.get("text", ""))
                if full.startswith(self._streamed):
                    self.text(full[len(self._streamed) :])
            # the line stays open: a max_tokens continuation goes on with the same text; the next
            # notice or the end of the run ends it
            self._streamed = ""
        elif kind == "error":
            self._pending_error = dict(p)
        elif kind == "tool_started":
            self.notice(f"[tool] {p.get('tool_name')} {p.get('args_summary', '')}".rstrip())
        elif kind == "tool_completed":
            self.notice(f"[tool] {p.get('tool_name')} done ({p.get('duration_ms', '?')} ms)")
        elif kind == "tool_failed":
            self.notice(f"[tool] {p.get('tool_name')} failed: {_error_text(p.get('error') or {})}")
        elif kind == "tool_denied":
            reason = p.get("reason") or "denied"
            self.notice(f"[tool] {p.get('tool_name')} denied ({p.get('denied_by')}): {reason}")
        elif kind == "run_queued":
            self.notice(
                f"[run] queued behind another run of this session (position {p.get('queue_position')})"
            )
        elif kind.startswith(("child_agent_", "worker_dispatch")):
            self._agent_notice(kind, p)
        elif kind == "loop_aborted" and not self.cancel_requested:
            self.notice(f"[run] aborted: {p.get('abort_reason') or p.get('end_reason')}")
        elif kind == "stop_hook_prevented":
            self.notice(f"[hook] Stop hook asked the agent to continue: {p.get('reason') or ''}".rstrip(": "))
        elif kind == "run_cancelled":
            self.notice("[run] cancelled")

    def _agent_notice(self, kind: str, p: dict[str, Any]) -> None:
        run = p.get("child_run_id") or "-"
        if kind == "child_agent_created":
            definition = p.get("agent_definition_id") or "child"
            self.notice(
                f"[agent] created {definition} ({p.get('agent_type')}) agent {p.get('child_agent_id')}"
            )
        elif kind == "worker_dispatched":
            self.notice(
                f"[agent] dispatched worker {p.get('worker_agent_id')} on task {p.get('task_id')} (run {run})"
            )
        elif kind == "worker_dispatch_failed":
            self.notice(f"[agent] worker dispatch failed: {_error_text(p.get('error') or {})}")
        elif kind == "child_agent_completed":
            self.notice(f"[agent] child run {run} {p.get('status') or 'completed'}")
        elif kind == "child_agent_failed":
            self.notice(f"[agent] child run {run} failed: {_error_text(p.get('error') or {})}")
        elif kind == "child_agent_cancelled":
            self.notice(f"[agent] child run {run} cancelled")

    def finish(self) -> None:
        self._flush_error()
        self.end_text_line()


def _error_text(error: dict[str, Any]) -> str:
    code = error.get("code")
    message = " ".join(str(error.get("message") or "").split())
    return f"{code}: {message}" if code else message or "unknown error"


async def _consume(run: RunHandle, printer: _Printer) -> None:
    async for event in run.events():
        printer.handle(event)


async def _run(args: argparse.Namespace, out: _Output, err: _Output, stdin: TextIO | None) -> int:
    # Cold start: httpx imports its optional command-line client (click, pygments) whenever those are
    # installed; this process never uses it, so it is marked unavailable (httpx then defines a stub).
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    from agent_core.api.runtime import AgentRuntime
    from agent_core.errors import AgentCoreError
    from agent_core.types.permissions import PermissionDecision

    answers = _StdinLines(stdin)

    async def ask(request: PermissionRequest) -> PermissionDecision:
        printer.notice("")  # end any partial text line before the prompt
        err.write(describe_request(request))
        answered, line = await answers.readline(STDIN_TIMEOUT_S)
        decision = parse_permission_answer(line)
        if not answered:
            why = f"no answer within {STDIN_TIMEOUT_S:.0f} s"
        elif line is None:
            why = "end of input"
        elif decision == "deny" and line.strip().lower() not in ("3", "deny"):
            why = f"unrecognised answer {line.strip()!r}"
        else:
            why = ""
        echo = "" if answers.interactive and answered and line is not None else "\n"
        err.write(f"{echo}  -> {decision.replace('_', ' ')}{f' ({why})' if why else ''}\n")
        return PermissionDecision(decision=decision, reason=why or None)

    printer = _Printer(out, err)
    try:
        runtime = AgentRuntime(project_dir=args.path, permission_callback=ask)
    except AgentCoreError as exc:
        err.write(f"soong-agent: error: {exc.message}\n")
        return EXIT_FAILED
    interrupted = 0
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(runtime)  # opens storage, hooks, MCP catalog, ...
            run = await runtime.start(
                args.message,
                session_id=args.session_id,
                mode="orchestrator" if args.orchestrator else "normal",
            )
        except AgentCoreError as exc:
            err.write(f"soong-agent: error: {exc.message}\n")
            return EXIT_FAILED
        loop = asyncio.get_running_loop()
        consumer = asyncio.ensure_future(_consume(run, printer))
        cancelling: list[asyncio.Future[Any]] = []

        def on_sigint() -> None:
            nonlocal interrupted
            interrupted += 1
            if interrupted == 1:
                printer.cancel_requested = True
                printer.notice("[run] cancelling (Ctrl-C again to stop waiting)...")
                cancelling.append(asyncio.ensure_future(run.cancel()))
            else:
                consumer.cancel()

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await consumer
            if interrupted < 2:
                await run.wait()
                for future in cancelling:
                    await future
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
        printer.finish()
        err.write(f"session_id: {run.session_id}\n")
        status = run.status.value
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if status == "completed" else EXIT_FAILED


def _configure_logging(debug: bool) -> None:
    """The CLI's only logging setup: one concise stderr handler (WARNING, or DEBUG with ``--debug``)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("soong-agent: %(levelname)s: %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (``soong-agent = "agent_core.cli:main"``); returns the exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    _configure_logging(args.debug)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
    out, err = _Output(sys.stdout), _Output(sys.stderr)
    try:
        return asyncio.run(_run(args, out, err, sys.stdin))
    except KeyboardInterrupt:
        err.write("\nsoong-agent: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            raise
        from agent_core.errors import AgentCoreError

        if isinstance(exc, AgentCoreError):
            err.write(f"soong-agent: error: {exc.message}\n")
            return EXIT_FAILED
        err.write(
            f"soong-agent: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)\n"
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
