"""``soong-agent serve``: one runtime for ``<project>`` behind the HTTP API and web UI (surfaces.md §2).

Contract: the token is ``--token``, else ``$SOONG_AGENT_SERVE_TOKEN``, else generated; binding a
non-loopback host without an explicit token is refused (exit 2). Once the server accepts connections it
prints exactly one line to stdout, ``serving http://HOST:PORT/?token=T`` (``--port 0`` picks a free
port); logs go to stderr. SIGINT/SIGTERM stop it: runs are cancelled, the runtime closes, pending
approvals expire; exit 0. Startup errors (config, storage, port in use) exit 1 with one line.
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
from typing import TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli._terminal import Output

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
TOKEN_ENV = "SOONG_AGENT_SERVE_TOKEN"


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


async def serve_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Runs ``soong-agent serve`` until SIGINT/SIGTERM; returns the exit status."""
    explicit = args.token or os.environ.get(TOKEN_ENV) or None
    if not is_loopback(args.host) and not explicit:
        err.write(
            f"soong-agent: error: refusing to bind non-loopback host {args.host!r} without an explicit "
            f"token (pass --token or set ${TOKEN_ENV})\n"
        )
        return EXIT_USAGE
    token = explicit or secrets.token_urlsafe(24)

    import uvicorn

    from agent_core._api.runtime import AgentRuntime
    from agent_core.errors import AgentCoreError
    from agent_core.server._app import create_app
    from agent_core.server._approvals import ApprovalBroker
    from agent_core.server._state import close_state, open_state

    broker = ApprovalBroker()
    try:
        runtime = AgentRuntime(project_dir=args.path, permission_callback=broker.callback)
        state = await open_state(runtime, broker)
    except AgentCoreError as exc:
        err.write(f"soong-agent: error: {exc.message}\n")
        return EXIT_FAILED
    try:
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

        def stop() -> None:
            server.should_exit = True
            state.approvals.end_streams()  # open approval streams never end by themselves

        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop)
        tasks = TaskOwner("serve command")
        serving = tasks.spawn(server.serve(sockets=[sock]), name="uvicorn")
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if server.started:
            host, port = sock.getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            out.write(f"serving http://{shown}:{port}/?token={token}\n")
            try:  # due schedules of the project run in serve too (surfaces.md §6, issue 22)
                await runtime.scheduler().start()
            except AgentCoreError as exc:
                err.write(f"soong-agent: warning: schedules are not running: {exc.message}\n")
        try:
            await serving
        finally:
            await tasks.aclose()
        sock.close()
        return EXIT_OK if server.started else EXIT_FAILED
    finally:
        await close_state(state)
