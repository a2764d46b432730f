"""The ``soong-agent`` command line (contract.md §10, config.md §11).

``soong-agent run [--path <dir-or-file>] [--orchestrator] [--session-id <id>] "message"`` streams the
assistant's text to stdout; tool activity, permission prompts, errors and the final session id go to
stderr. Heavy imports happen only after the arguments are parsed (cold start).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
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
    """Maps one stdin answer to a decision; EOF (``None``), invalid input or empty → ``deny``."""
    if line is None:
        return "deny"
    return _ANSWERS.get(" ".join(line.strip().lower().split()), "deny")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="soong-agent",
        description="Run an LLM agent on a project with the user-level configuration in $SOONG_AGENT_HOME.",
    )
    sub = parser.add_subparsers(dest="command", metavar="{run}")
    sub.required = True
    run = sub.add_parser("run", help="run an agent on a project with one user message")
    run.add_argument("--path", help="project directory (a file selects its parent directory); default: cwd")
    run.add_argument(
        "--orchestrator", action="store_true", help="run in orchestrator mode (Task board + workers)"
    )
    run.add_argument("--session-id", help="continue an existing session")
    run.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    run.add_argument("message", help="the user message")
    return parser


class _StdinReader:
    """Reads stdin lines on a daemon thread so a permission prompt can time out."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    async def readline(self, timeout: float) -> str | None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def work() -> None:
            with self._lock:
                try:
                    line = self._stream.readline()
                    value: str | None = line if line else None
                except (OSError, ValueError):
                    value = None
            def deliver() -> None:
                if not future.done():
                    future.set_result(value)

            loop.call_soon_threadsafe(deliver)

        threading.Thread(target=work, daemon=True).start()
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return None


def _describe(request: PermissionRequest) -> str:
    parents = ""
    if request.parent_agent_id:
        parents = f", parent agent {request.parent_agent_id}, parent run {request.parent_run_id}"
    lines = [
        "",
        f"Permission requested: {request.tool_name} ({request.permission}"
        + (", DANGEROUS" if request.dangerous else "")
        + ")",
        f"  tags:   {', '.join(request.tags) or '-'}",
        f"  args:   {request.args_summary}",
        f"  target: {request.target_scope or '-'}",
        f"  cwd:    {request.cwd}",
        f"  agent:  {request.agent_role} {request.agent_id}{parents}",
        f"  suggested: {request.suggested_decision.value}",
        "  [1] allow once   [2] allow for session   [3] deny",
        "> ",
    ]
    return "\n".join(lines)


class _Printer:
    """Renders runtime events: assistant text to stdout, one-line notices to stderr."""

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self._printed = ""
        self._at_line_start = True

    def _text(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self._printed += text
        self._at_line_start = text.endswith("\n")

    def _notice(self, text: str) -> None:
        if not self._at_line_start:
            self.out.write("\n")
            self.out.flush()
            self._at_line_start = True
        self.err.write(text + "\n")
        self.err.flush()

    def handle(self, event: RuntimeEvent) -> None:
        kind = event.event_type.value
        p = event.payload
        if kind == "message_delta":
            self._text(str(p.get("text", "")))
        elif kind == "message_completed":
            full = str(p.get("text", ""))
            if full.startswith(self._printed):
                self._text(full[len(self._printed) :])
            elif not self._printed:
                self._text(full)
            self._printed = ""
        elif kind == "tool_started":
            self._notice(f"[tool] {p.get('tool_name')} {p.get('args_summary', '')}")
        elif kind == "tool_completed":
            self._notice(f"[tool] {p.get('tool_name')} done ({p.get('duration_ms', '?')} ms)")
        elif kind == "tool_failed":
            error = p.get("error") or {}
            self._notice(f"[tool] {p.get('tool_name')} failed: {error.get('code')}: {error.get('message')}")
        elif kind == "tool_denied":
            self._notice(
                f"[tool] {p.get('tool_name')} denied by {p.get('denied_by')}: {p.get('reason') or ''}"
            )
        elif kind == "run_queued":
            self._notice(f"[run] queued at position {p.get('queue_position')}")
        elif kind == "child_agent_created":
            self._notice(f"[agent] started {p.get('agent_type')} agent {p.get('child_agent_id')}")
        elif kind in ("child_agent_completed", "child_agent_failed"):
            self._notice(f"[agent] child run {p.get('child_run_id')} {kind.rsplit('_', 1)[-1]}")
        elif kind == "error":
            self._notice(f"[error] {p.get('code')}: {p.get('message')}")
        elif kind == "loop_failed":
            self._notice(f"[run] failed ({p.get('end_reason')})")
        elif kind in ("loop_aborted", "run_cancelled"):
            self._notice(f"[run] {kind.replace('_', ' ')}")


async def _run(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO) -> int:
    from agent_core.api.runtime import AgentRuntime
    from agent_core.errors import AgentCoreError
    from agent_core.types.permissions import PermissionDecision

    reader = _StdinReader(stdin)

    async def ask(request: PermissionRequest) -> PermissionDecision:
        err.write(_describe(request))
        err.flush()
        decision = parse_permission_answer(await reader.readline(STDIN_TIMEOUT_S))
        return PermissionDecision(decision=decision)

    try:
        runtime = AgentRuntime(project_dir=args.path, permission_callback=ask)
    except AgentCoreError as exc:
        err.write(f"soong-agent: error: {exc.message}\n")
        return EXIT_FAILED
    printer = _Printer(out, err)
    interrupted = False
    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(runtime)
            run = await runtime.start(
                args.message,
                session_id=args.session_id,
                mode="orchestrator" if args.orchestrator else "normal",
            )
        except AgentCoreError as exc:
            err.write(f"soong-agent: error: {exc.message}\n")
            return EXIT_FAILED
        loop = asyncio.get_running_loop()
        cancel_task: list[asyncio.Task[Any]] = []

        def on_sigint() -> None:
            nonlocal interrupted
            if not interrupted:
                interrupted = True
                err.write("\n[run] cancelling...\n")
                cancel_task.append(asyncio.ensure_future(run.cancel()))

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        async for event in run.events():
            printer.handle(event)
        status = await run.wait()
        if cancel_task:
            await cancel_task[0]
        if not printer._at_line_start:
            out.write("\n")
            out.flush()
        err.write(f"session_id: {run.session_id}\n")
        err.flush()
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if status.value == "completed" else EXIT_FAILED


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("soong-agent: %(levelname)s: %(message)s"))
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("agent_core")
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    return asyncio.run(_run(args, sys.stdout, sys.stderr, sys.stdin))


if __name__ == "__main__":
    sys.exit(main())
