"""The ``soong-agent`` command line (docs/cli.md#run, docs/cli.md, docs/cli.md#chat, docs/serve.md,
docs/scale-out.md, docs/jobs-and-schedules.md).

``soong-agent acp [--path <dir>]`` serves the Agent Client Protocol on stdio and ``soong-agent mcp-server
[--path <dir>] [--http]`` serves MCP (``agent_core.cli._acp``, ``agent_core.cli._mcp_server``).
``soong-agent channels [--path <dir>]`` answers on the ``[[channels]]`` of ``config.toml`` (Telegram, Slack) in
the foreground (``agent_core.cli._channels``); ``serve`` runs the channels of its project too.

``soong-agent worker [--path <dir>]`` runs a Temporal worker (docs/scale-out.md, ``agent_core.cli._worker``).

``soong-agent task-wal list|export <session_id>`` lists a session's Task WALs or exports one as JSONL on
either storage backend (``agent_core.cli._task_wal``).

``soong-agent run [--path <dir-or-file>] [--orchestrator] [--session-id <id> [--wait]] [--output-format F]
[--model PROFILE] [--max-turns N] ["message" | -]`` runs one user message on a project with the user-level
configuration (``$SOONG_AGENT_HOME/config.toml``; never created).

Contract of ``run``:
- ``--output-format text`` (the default): stdout carries only the assistant's text (``message_delta``,
  then any remainder of ``message_completed``); permission prompts, one-line notices (tools, denials,
  errors, cancellation) and the final ``session_id`` go to stderr (``--plain`` is an accepted no-op).
  ``json`` and ``stream-json`` are for programs (``agent_core.cli._headless``): one result object, or
  one event per line then the result object.
- The message is read from stdin (to its end) when it is ``-``, or left out while stdin is not a
  terminal. Without an argument on a terminal: a usage error.
- Permission prompts are answered on stdin: ``1``/``allow once``, ``2``/``allow for session``,
  ``3``/``deny`` (trimmed, case-insensitive); EOF, unavailable stdin, anything else or 120 s without an
  answer → ``deny``. There is no re-prompt; a denial for an unrecognised answer names the valid ones.
  Headless (the message from stdin, or ``json``/``stream-json``) nothing is asked and stdin is never
  read for answers: what would ask is denied as without a permission callback.
- Exit status: 0 when the run ends ``completed``; 1 for startup/config errors and runs ending otherwise;
  2 for usage errors; 75 when the session is busy in another process (``serve``, ``chat`` or another
  ``run`` on the same home; ``--wait`` waits for its turn instead); 130 after Ctrl-C (which calls
  ``run.cancel()``; a second Ctrl-C stops waiting).
- Cold start: only argparse/asyncio/logging are imported before the arguments are parsed; the command's
  module (``agent_core.cli._<command>``) and the runtime are imported afterwards.

Each subcommand is registered here with ``set_defaults(handler="<module>:<async function>")``; the
handler has the signature ``async (args, out: Output, err: Output, stdin) -> int`` (the exit status).
"""

from __future__ import annotations

from agent_core.cli import _interrupts

_interrupts.install_if_launched()  # first: Ctrl-C during the imports below: one line, status 130 (issue 32)

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import importlib  # noqa: E402
import logging  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit with status 2 and a one-line message
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``: the installed distribution's version (read only when asked; cold start)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        from importlib import metadata

        try:
            version = metadata.version("soong-agent")
        except metadata.PackageNotFoundError:
            version = "unknown (not installed)"
        sys.stdout.write(f"{parser.prog} {version}\n")
        parser.exit(0)


def _message(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the message must not be empty")
    return value


PERMISSION_MODES = ("default", "accept_edits", "plan", "dont_ask", "bypass")
"""``--permission-mode`` choices (``agent_core.types.permissions.PERMISSION_MODES``, kept literal here so the
parser imports nothing)."""
PERMISSION_MODE_HELP = (
    "how permission requests are decided: default (ask), accept_edits (file edits inside the write roots "
    "without asking), plan (read-only tools, ends with a plan), dont_ask (deny whatever would ask), "
    'bypass (allow all but protected/sensitive paths; needs [tools] sandbox = "bwrap"); '
    "default: [permissions] mode"
)


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {number}")
    return number


_SUBPARSERS: dict[str, argparse.ArgumentParser] = {}
"""The subparsers built so far, by command (for :func:`usage_error`)."""


def usage_error(command: str, message: str) -> str:
    """What a command prints for a usage error it finds after parsing (exit status 2): its usage line
    and ``soong-agent <command>: error: <message>``, as argparse prints its own."""
    if command not in _SUBPARSERS:
        build_parser(command)
    parser = _SUBPARSERS.get(command)
    usage = parser.format_usage() if parser is not None else ""
    return f"{usage}soong-agent {command}: error: {message}\n"


def _add_run(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run an agent on a project with one user message",
        description="Run one user message on a project and stream the reply to stdout. Tool activity, "
        "permission prompts (answered on stdin: 1 = allow once, 2 = allow for session, 3 = deny) "
        "and the session id go to stderr. For scripts: --output-format json|stream-json, the message "
        "piped on stdin.",
        epilog="exit status: 0 the run completed; 1 a startup or configuration error, or the run ended "
        "otherwise (failed, cancelled, max_turns, prompt_too_long); 2 a usage error; 75 the session is "
        "busy (another process, e.g. soong-agent serve or chat, is running it; see --wait); 130 "
        "interrupted by Ctrl-C.",
    )
    run.add_argument("--path", help="project directory; a file selects its parent directory (default: cwd)")
    run.add_argument(
        "--orchestrator", action="store_true", help="run in orchestrator mode (Task board and workers)"
    )
    run.add_argument("--session-id", metavar="ID", help="continue an existing session")
    run.add_argument("--permission-mode", choices=PERMISSION_MODES, metavar="MODE", help=PERMISSION_MODE_HELP)

    run.add_argument(
        "--wait",
        action="store_true",
        help="if another process is running the session, wait for its turn (default: exit with status 75)",
    )
    run.add_argument("--plain", action="store_true", help="plain text output (the default; no effect)")
    run.add_argument(
        "--output-format",
        choices=("text", "json", "stream-json"),
        default="text",
        help="text (default): the answer on stdout; json: one JSON object with the answer, usage, end "
        "reason and session id when the run ends; stream-json: one JSON event per line, the result last "
        "(json and stream-json never prompt: what would ask is denied)",
    )
    run.add_argument(
        "--model",
        metavar="PROFILE",
        help="run on the [model_overrides.PROFILE] table of config.toml over [model]",
    )
    run.add_argument(
        "--max-turns", type=_positive, metavar="N", help="at most N model turns (default: [limits]/[runtime])"
    )
    run.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    run.add_argument(
        "--output-schema",
        metavar="FILE",
        help="JSON schema file of the answer: the reply is validated and printed as JSON on stdout "
        "(the streamed text goes to stderr)",
    )
    run.add_argument(
        "--image",
        metavar="FILE",
        action="append",
        default=[],
        help="an image or PDF sent with the message (repeatable); the model needs it in [model] "
        "input_modalities",
    )
    run.add_argument(
        "message",
        nargs="?",
        type=_message,
        help="the user message; - or none (with stdin not a terminal) reads it from stdin",
    )
    run.set_defaults(handler="agent_core.cli._run:run_command")
    _SUBPARSERS["run"] = run


def _add_schedule(sub: Any) -> None:
    schedule = sub.add_parser(
        "schedule",
        help="add, list or remove cron schedules (each firing sends a user message)",
        description="Cron schedules of a project, stored in the session store. A firing sends the "
        "schedule's message as a user message; `soong-agent scheduler` (or `serve`) runs due schedules.",
    )
    actions = schedule.add_subparsers(dest="schedule_action", metavar="<action>", parser_class=_Parser)
    actions.required = True
    add = actions.add_parser("add", help="add a schedule")
    add.add_argument("--cron", required=True, help='cron expression, e.g. "0 9 * * 1-5" (UTC)')
    add.add_argument("--session-id", metavar="ID", help="send to this session (default: a new one each time)")
    add.add_argument("--path", help="project directory (default: cwd)")
    add.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    add.add_argument("message", type=_message, help="the user message each firing sends")
    listing = actions.add_parser("list", help="list schedules")
    listing.add_argument("--path", help="project directory (default: cwd)")
    listing.add_argument("--all", action="store_true", help="schedules of every project")
    listing.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    remove = actions.add_parser("remove", help="remove a schedule")
    remove.add_argument("schedule_id", help="the id printed by `schedule add` or `schedule list`")
    remove.add_argument("--path", help="project directory (default: cwd)")
    remove.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    schedule.set_defaults(handler="agent_core.cli._schedule:schedule_command")
    scheduler = sub.add_parser(
        "scheduler",
        help="run the project's due schedules (foreground)",
        description="Runs due schedules of a project until Ctrl-C. Schedules missed while nothing was "
        "running fire once at start (never a burst).",
    )
    scheduler.add_argument("--path", help="project directory (default: cwd)")
    scheduler.add_argument(
        "--once", action="store_true", help="fire what is due now, wait for those runs, then exit"
    )
    scheduler.add_argument(
        "--debug", action="store_true", help="show debug log output and internal tracebacks"
    )
    scheduler.set_defaults(handler="agent_core.cli._schedule:scheduler_command")


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {value!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0-65535")
    return port


def _add_serve(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="serve the HTTP API and web UI for a project",
        description="Serve the HTTP API and the web UI of one runtime for a project. Prints one line, "
        "serving http://HOST:PORT/?token=T, once it accepts connections; Ctrl-C stops it.",
    )
    serve.add_argument("--path", help="project directory; a file selects its parent directory (default: cwd)")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=8765, help="TCP port (default 8765; 0 picks a free one)")
    source = serve.add_mutually_exclusive_group()
    source.add_argument(
        "--token-file",
        metavar="PATH",
        help="read the API token from PATH (mode 0600; preferred, like $SOONG_AGENT_SERVE_TOKEN)",
    )
    source.add_argument(
        "--token",
        help="API token (visible to other local users until scrubbed at startup, and in shell history; "
        "prefer --token-file or $SOONG_AGENT_SERVE_TOKEN; default: generated)",
    )
    serve.add_argument("--debug", action="store_true", help="show debug log output and access logs")
    serve.set_defaults(handler="agent_core.cli._serve:serve_command")


def _add_chat(sub: Any) -> None:
    chat = sub.add_parser(
        "chat",
        help="interactive multi-turn session on a project",
        description="An interactive session: each line is a message to the agent (replies stream as they "
        "arrive), lines starting with / are commands (/help lists them). Ctrl-C cancels a running reply; "
        "Ctrl-D or /exit leaves. Input history: $SOONG_AGENT_HOME/chat_history.",
    )
    chat.add_argument("--path", help="project directory; a file selects its parent directory (default: cwd)")
    resume = chat.add_mutually_exclusive_group()
    resume.add_argument("--session-id", metavar="ID", help="continue an existing session")
    resume.add_argument(
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the most recently updated session of the project",
    )
    chat.add_argument(
        "--orchestrator",
        action="store_true",
        help="new sessions run in orchestrator mode (Task board and workers)",
    )
    chat.add_argument(
        "--permission-mode",
        choices=PERMISSION_MODES,
        metavar="MODE",
        help=PERMISSION_MODE_HELP + " (switch with /mode)",
    )
    chat.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    chat.set_defaults(handler="agent_core.cli._chat:chat_command")


def _add_acp(sub: Any) -> None:
    acp = sub.add_parser(
        "acp",
        help="serve the Agent Client Protocol on stdin/stdout (for editors such as Zed)",
        description="Runs soong-agent as an ACP agent: an editor starts this command and speaks JSON-RPC "
        "on its stdin/stdout (sessions, prompts, tool calls with diffs, permission requests, the editor's "
        "file buffers). Needs the acp extra: pip install 'soong-agent[acp]'.",
    )
    acp.add_argument(
        "--path", help="project directory for every session (default: the cwd each session names)"
    )
    acp.add_argument(
        "--orchestrator",
        action="store_true",
        help="new sessions run in orchestrator mode (Task board and workers; shown as the editor's plan)",
    )
    acp.add_argument("--debug", action="store_true", help="show debug log output on stderr")
    acp.set_defaults(handler="agent_core.cli._acp:acp_command")


def _add_mcp_server(sub: Any) -> None:
    mcp = sub.add_parser(
        "mcp-server",
        help="serve soong-agent as an MCP server (stdio, or streamable HTTP on 127.0.0.1)",
        description="Exposes the project's agent to MCP clients: tools run(message, session_id?), "
        "list_sessions and get_session(session_id), and every session's transcript as a resource. "
        "Permission requests are asked through MCP elicitation when the client supports it, else denied.",
    )
    mcp.add_argument("--path", help="project directory; a file selects its parent directory (default: cwd)")
    mcp.add_argument(
        "--http",
        action="store_true",
        help="serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (needs a bearer token)",
    )
    mcp.add_argument(
        "--port", type=_port, default=8766, help="TCP port with --http (default 8766; 0 picks one)"
    )
    mcp.add_argument(
        "--token-file",
        metavar="PATH",
        help="with --http: read the bearer token from PATH (mode 0600; or set $SOONG_AGENT_MCP_TOKEN; "
        "default: generated and printed)",
    )
    mcp.add_argument("--debug", action="store_true", help="show debug log output on stderr")
    mcp.set_defaults(handler="agent_core.cli._mcp_server:mcp_server_command")


def _add_channels(sub: Any) -> None:
    channels = sub.add_parser(
        "channels",
        help="answer on the chat channels of config.toml ([[channels]]: Telegram, Slack)",
        description="Runs every [[channels]] entry of config.toml in the foreground: messages from the "
        "allowed chats and users go to a session per conversation, answers and permission questions go "
        "back to the chat. Prints one line per channel once it receives; Ctrl-C stops it.",
    )
    channels.add_argument(
        "--path", help="project of channels that name none; a file selects its parent (default: cwd)"
    )
    channels.add_argument(
        "--debug", action="store_true", help="show debug log output and internal tracebacks"
    )
    channels.set_defaults(handler="agent_core.cli._channels:channels_command")


def _add_audit(sub: Any) -> None:
    audit = sub.add_parser(
        "audit",
        help="show why each tool call of a past run or session was allowed or denied",
        description="Prints, per tool call, who decided (default policy, permission rule, session grant, "
        "permission callback or hook), the matching [[permissions.rules]] entry and the reasons.",
    )
    audit.add_argument("id", help="a run id (run_...) or a session id (sess_...)")
    audit.add_argument("--path", help="project directory (default: cwd)")
    audit.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    audit.set_defaults(handler="agent_core.cli._audit:audit_command")


def _add_worker(sub: Any) -> None:
    worker = sub.add_parser(
        "worker",
        help='run a Temporal worker for the project ([engine] kind = "temporal")',
        description='Executes runs started with [engine] kind = "temporal" (workflows and their model '
        "and tool steps) from [engine.temporal] task_queue, with the project's configuration, tools and "
        "session store. Prints `worker polling QUEUE at ADDRESS` once it polls; Ctrl-C stops it (its "
        "runs continue on other workers).",
    )
    worker.add_argument(
        "--path", help="project directory; a file selects its parent directory (default: cwd)"
    )
    worker.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    worker.set_defaults(handler="agent_core.cli._worker:worker_command")


def _add_task_wal(sub: Any) -> None:
    task_wal = sub.add_parser(
        "task-wal",
        help="list a session's Task WALs or export one as JSONL",
        description="The Task WALs of a session, on either storage backend. `export` writes one WAL's "
        "records as JSONL, byte-identical to the file the sqlite backend keeps.",
    )
    actions = task_wal.add_subparsers(dest="task_wal_action", metavar="<action>", parser_class=_Parser)
    actions.required = True
    listing = actions.add_parser("list", help="list the session's Task WALs")
    listing.add_argument("session_id", help="the session id (sess_...)")
    listing.add_argument("--path", help="project directory (default: cwd)")
    listing.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    export = actions.add_parser("export", help="write one Task WAL as JSONL (stdout, or --output)")
    export.add_argument("session_id", help="the session id (sess_...)")
    export.add_argument(
        "name", nargs="?", help="WAL name (with or without .wal.jsonl) or Task id; optional with one WAL"
    )
    export.add_argument("--output", "-o", metavar="FILE", help="write to FILE instead of stdout")
    export.add_argument("--path", help="project directory (default: cwd)")
    export.add_argument("--debug", action="store_true", help="show debug log output and internal tracebacks")
    task_wal.set_defaults(handler="agent_core.cli._task_wal:task_wal_command")


_COMMANDS: dict[str, Callable[[Any], None]] = {
    "run": _add_run,
    "chat": _add_chat,
    "serve": _add_serve,
    "acp": _add_acp,
    "mcp-server": _add_mcp_server,
    "schedule": _add_schedule,
    "scheduler": _add_schedule,
    "audit": _add_audit,
    "worker": _add_worker,
    "task-wal": _add_task_wal,
    "channels": _add_channels,
}
"""Command name → the function registering it (``schedule`` and ``scheduler`` share one), in the order
``soong-agent --help`` lists them."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``soong-agent`` parser. Given ``command``, the name of a command (the first argument), only
    that command's subparser is registered (cold start: all of them take ~5 ms to build): whatever that
    command's arguments are, it parses, prints and rejects them as the full parser does (the top-level
    usage names no command). Any other first argument (``--help``, a typo) gets the full parser."""
    parser = _Parser(
        prog="soong-agent",
        description="Run an LLM agent on a project. Configuration comes only from "
        "$SOONG_AGENT_HOME/config.toml (default ~/.soong-agent/config.toml), which must exist.",
    )
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="<command>", parser_class=_Parser)
    sub.required = True
    adder = _COMMANDS.get(command or "")
    for add in [adder] if adder is not None else dict.fromkeys(_COMMANDS.values()):
        add(sub)
    return parser


class _ScrubSecrets(logging.Filter):
    """Log records leave the process without secrets (issue 31 item 13): ``token=`` query values (an
    access log line of ``GET /?token=...``) and every value the process redactor knows are replaced."""

    _QUERY_TOKEN = re.compile(r"(?i)([?&](?:token|access_token|api_key|apikey|key)=)[^&\s\"']*")

    def filter(self, record: logging.LogRecord) -> bool:
        from agent_core.redaction import REDACTED, redact_text

        message = record.getMessage()
        clean = redact_text(self._QUERY_TOKEN.sub(rf"\g<1>{REDACTED}", message))
        if clean != message:
            record.msg, record.args = clean, None
        return True


def _configure_logging(debug: bool) -> None:
    """The CLI's only logging setup: one concise stderr handler (WARNING, or DEBUG with ``--debug``).

    ``aiosqlite`` and ``sse_starlette`` stay at INFO even with ``--debug``: their DEBUG records print every
    SQL call with its parameters and every event chunk sent, i.e. conversation content."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("soong-agent: %(levelname)s: %(name)s: %(message)s"))
    handler.addFilter(_ScrubSecrets())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    for chatty in ("aiosqlite", "sse_starlette"):
        logging.getLogger(chatty).setLevel(logging.INFO)


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point (``soong-agent = "agent_core.cli:main"``); returns the exit status.

    Ctrl-C at any moment ends the process with status 130 and one line (``agent_core.cli._interrupts``)."""
    try:
        _interrupts.install()
        status = _main(argv)
    except (KeyboardInterrupt, asyncio.CancelledError):  # a 2nd Ctrl-C cancelled a hung startup
        status = EXIT_INTERRUPTED
    if status != EXIT_INTERRUPTED and _interrupts.missed():
        status = EXIT_INTERRUPTED  # Ctrl-C while nothing could take it (startup, shutdown)
    if status == EXIT_INTERRUPTED and not _interrupts.reported():
        with contextlib.suppress(OSError, ValueError):
            # on a terminal the echoed ^C is on the current line: the notice starts a fresh one
            sys.stderr.write(("\n" if sys.stderr.isatty() else "") + _interrupts.INTERRUPTED_LINE)
            sys.stderr.flush()
    return status


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    try:
        args = build_parser(arguments[0] if arguments else None).parse_args(arguments)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    _configure_logging(debug)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
    from agent_core.cli._terminal import Output

    out, err = Output(sys.stdout), Output(sys.stderr)
    module_name, _, function_name = str(args.handler).partition(":")
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
        return int(asyncio.run(_interrupts.run_main(handler(args, out, err, sys.stdin))))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        from agent_core.cli._terminal import error_text
        from agent_core.errors import AgentCoreError

        if isinstance(exc, AgentCoreError):
            err.write(error_text(exc))
            return EXIT_FAILED
        err.write(
            f"soong-agent: internal error: {type(exc).__name__}: {exc} (rerun with --debug for details)\n"
        )
        return EXIT_FAILED
