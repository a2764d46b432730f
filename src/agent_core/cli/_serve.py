"""``soong-agent serve``: one runtime for ``<project>`` behind the HTTP API and web UI
(docs/serve.md#endpoints).

Contract: the token is ``--token-file`` (a file of mode 0600, else refused with one line) or ``--token``,
else ``$SOONG_AGENT_SERVE_TOKEN``, else generated; binding a non-loopback host without an explicit token is
refused (exit 2). ``--token`` warns once: the value is in the process list (``/proc/<pid>/cmdline``) until
it is scrubbed at startup (:mod:`agent_core.cli._cmdline`) and in the shell history. The token is
registered with the process redactor, so a command that prints it reaches neither the model nor storage. Once the server accepts connections it
prints exactly one line to stdout, ``serving http://HOST:PORT/?token=T`` (``--port 0`` picks a free
port); logs go to stderr. SIGTERM and Ctrl-C (SIGINT) stop it: runs are cancelled, the runtime closes,
pending approvals expire; exit 0 after SIGTERM, 130 after Ctrl-C (at any moment, also while it starts).
Startup errors (config, credentials, storage, port in use) exit 1 with one line. The ``[[channels]]`` of
the served project run inside the server (``agent_core.adapters.channels``): their permission questions are
durable approvals like every other, also posted to the chat as buttons; a channel configuration error is a
warning, the server goes on without channels.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import secrets
import signal
import socket
import stat
from typing import TYPE_CHECKING, TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._terminal import Output, error_text

if TYPE_CHECKING:
    from agent_core import AgentRuntime
    from agent_core.adapters.channels import ChannelHub
    from agent_core.permissions import PermissionDeferral
    from agent_core.server import ApprovalBroker, QuestionBroker
    from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
TOKEN_ENV = "SOONG_AGENT_SERVE_TOKEN"


class _ChannelAsker:
    """The server's permission and question callbacks: every request is a durable approval or question
    (the web UI and the API answer it); one of a chat channel's session is also posted to its conversation,
    answered through the same broker (first answer wins)."""

    def __init__(self, broker: ApprovalBroker, questions: QuestionBroker) -> None:
        self.broker = broker
        self.questions = questions
        self.hub: ChannelHub | None = None

    async def __call__(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        decision = await self.broker.callback(request)
        if self.hub is not None:
            await self.hub.ask(request)
        return decision

    async def ask_user(self, question: UserQuestion) -> str | PermissionDeferral:
        """The question callback: a durable question (web UI, ``/api/questions``), also posted to the chat
        of a channel session; the first answer wins."""
        answer = await self.questions.callback(question)
        if self.hub is not None:
            await self.hub.ask_user(question)
        return answer


def _channel_hub(
    runtime: AgentRuntime, broker: ApprovalBroker, questions: QuestionBroker, err: Output
) -> ChannelHub | None:
    """The hub of the ``[[channels]]`` whose project is the served one; others are named in a warning
    (``soong-agent channels`` runs them). A channel configuration error is a warning: serve goes on."""
    from agent_core.adapters.channels import ChannelHub, build_channel, project_of
    from agent_core.config import load_config
    from agent_core.errors import AgentCoreError

    try:
        config = load_config(project_dir=runtime.project_dir)
        channels = []
        for index, section in enumerate(config.settings.channels):
            if project_of(section, runtime.project_dir) != runtime.project_dir.resolve():
                err.write(
                    f"soong-agent: warning: channel {section.channel_name} runs on another project; "
                    "start it with soong-agent channels\n"
                )
                continue
            channels.append(build_channel(index, section))
    except AgentCoreError as exc:
        err.write(f"soong-agent: warning: chat channels are not running: {exc.message}\n")
        return None
    if not channels:
        return None
    from agent_core.store import QuestionAnswer

    async def answer_question(request_id: str, text: str) -> object:
        return await questions.answer(request_id, QuestionAnswer(answer=text))

    return ChannelHub(runtime, channels, answer=broker.answer, answer_question=answer_question)


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


class TokenFileError(Exception):
    """``--token-file`` cannot be used; the message is the one line to print."""


def read_token_file(path: str) -> str:
    """The token in ``path`` (surrounding whitespace stripped). Refused: a missing, non-regular or empty
    file, and one other users may read or write (any group/other permission bit: ``chmod 600``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOCTTY)
    except OSError as exc:
        raise TokenFileError(f"cannot read --token-file {path}: {exc.strerror or exc}") from exc
    try:
        st = os.fstat(fd)  # checked and read through the same descriptor
        if not stat.S_ISREG(st.st_mode):
            raise TokenFileError(f"--token-file {path} is not a regular file")
        mode = stat.S_IMODE(st.st_mode)
        if mode & 0o077:
            raise TokenFileError(
                f"--token-file {path} has mode {mode:04o}: other users can read it; run chmod 600 {path}"
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(65_536)
    finally:
        os.close(fd)
    token = data.decode("utf-8", errors="replace").strip()
    if not token or any(c.isspace() for c in token):
        raise TokenFileError(f"--token-file {path} must hold one token (no spaces), found none")
    return token


def _explicit_token(args: argparse.Namespace, err: Output) -> str | None:
    """The token the user chose (see the module docstring); warns about ``--token`` once."""
    if getattr(args, "token_file", None):
        return read_token_file(args.token_file)
    if args.token:
        from agent_core.cli._cmdline import scrub_from_cmdline

        scrubbed = scrub_from_cmdline(args.token)
        where = (
            "it was visible to other local users in the process list until scrubbed at startup"
            if scrubbed
            else "it stays visible to other local users in the process list (it cannot be scrubbed here)"
        )
        err.write(
            f"soong-agent: warning: --token puts the token on the command line: {where}, and it is in "
            f"your shell history; prefer --token-file (mode 0600) or ${TOKEN_ENV}\n"
        )
        return str(args.token)
    return os.environ.get(TOKEN_ENV) or None


async def serve_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent serve`` until SIGINT/SIGTERM; returns the exit status."""
    try:
        explicit = _explicit_token(args, err)
    except TokenFileError as exc:
        err.write(f"soong-agent: error: {exc}\n")
        return EXIT_USAGE
    if not is_loopback(args.host) and not explicit:
        err.write(
            f"soong-agent: error: refusing to bind non-loopback host {args.host!r} without an explicit "
            f"token (pass --token-file or set ${TOKEN_ENV})\n"
        )
        return EXIT_USAGE
    token = explicit or secrets.token_urlsafe(24)
    from agent_core.redaction import register_secret

    register_secret(token)  # a command printing it reaches neither the model nor storage nor the logs

    import uvicorn

    from agent_core import AgentRuntime
    from agent_core.errors import AgentCoreError
    from agent_core.server import ApprovalBroker, QuestionBroker, close_state, create_app, open_state

    broker = ApprovalBroker()
    questions = QuestionBroker()
    asker = _ChannelAsker(broker, questions)
    try:
        runtime = AgentRuntime(
            project_dir=args.path, permission_callback=asker, question_callback=asker.ask_user
        )
        state = await open_state(runtime, broker, questions)
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    asker.hub = _channel_hub(runtime, broker, questions, err)
    try:
        if interrupts.pending():  # Ctrl-C while the runtime opened: serve nothing
            return EXIT_INTERRUPTED
        try:
            sock = _bind(args.host, args.port)
        except OSError as exc:
            err.write(
                f"soong-agent: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}\n"
            )
            return EXIT_FAILED
        config = uvicorn.Config(
            create_app(state, token),
            log_level="debug" if args.debug else "warning",
            access_log=bool(args.debug),
            lifespan="off",
            timeout_graceful_shutdown=3,
            log_config=None,
        )
        server = uvicorn.Server(config)
        # uvicorn re-raises a captured SIGINT/SIGTERM after serve() returns, which would kill the process
        # before the runtime closes: the signals only ask the server to exit here
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]
        loop = asyncio.get_running_loop()
        interrupted = False

        def stop() -> None:
            server.should_exit = True
            state.approvals.end_streams()  # open approval streams never end by themselves
            state.questions.end_streams()

        def on_interrupt() -> None:
            nonlocal interrupted
            interrupted = True
            stop()

        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, stop)
        tasks = TaskOwner("serve command")
        with interrupts.on_interrupt(on_interrupt):
            serving = tasks.spawn(server.serve(sockets=[sock]), name="uvicorn")
            while not server.started and not serving.done():
                await asyncio.sleep(0.02)
            if server.started and not server.should_exit:
                host, port = sock.getsockname()[:2]
                shown = f"[{host}]" if ":" in host else host
                out.write(f"serving http://{shown}:{port}/?token={token}\n")
                # due schedules of the project run in serve too (docs/jobs-and-schedules.md#schedules, issue
                # 22)
                try:
                    await runtime.scheduler().start()
                except AgentCoreError as exc:
                    err.write(f"soong-agent: warning: schedules are not running: {exc.message}\n")
            try:
                async with asyncio.TaskGroup() as group:  # the project's chat channels (docs/channels.md)
                    channels = group.create_task(asker.hub.run()) if asker.hub is not None else None
                    try:
                        await serving
                    finally:
                        if channels is not None:
                            channels.cancel()
            finally:
                await tasks.aclose()
        sock.close()
        if interrupted:
            return EXIT_INTERRUPTED
        return EXIT_OK if server.started else EXIT_FAILED
    finally:
        await close_state(state)
