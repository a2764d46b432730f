"""``soong-agent mcp-server [--path <project>] [--http [--port N] [--token-file F]]`` (issue 38 item 2).

Without ``--http`` it serves one MCP client on stdin/stdout (stdout carries only the protocol; logs go to
stderr) until the client closes stdin. With ``--http`` it serves streamable HTTP at
``http://127.0.0.1:PORT/mcp`` (loopback only; ``--port 0`` picks a free port) and prints one line once it
accepts connections: ``serving http://127.0.0.1:PORT/mcp`` (followed by `` token T`` when the token was
generated). Every request needs ``Authorization: Bearer <token>``: the token comes from ``--token-file``
(a file of mode 0600, refused otherwise) or ``$SOONG_AGENT_MCP_TOKEN``, else it is generated; it is never
taken from the command line. Configuration and startup errors: one line, exit 1; a bad token file: exit 2.
Ctrl-C stops it (exit 130; runs are cancelled and the runtime closes), SIGTERM too (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import secrets
from typing import TYPE_CHECKING, TextIO

from agent_core._concurrency import TaskOwner
from agent_core.cli import _interrupts as interrupts
from agent_core.cli._serve import TokenFileError, _bind, read_token_file
from agent_core.cli._terminal import Output, error_text

if TYPE_CHECKING:
    from agent_core.adapters.mcp_server import SoongMcpServer

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
TOKEN_ENV = "SOONG_AGENT_MCP_TOKEN"
HOST = "127.0.0.1"


async def mcp_server_command(args: argparse.Namespace, out: Output, err: Output, stdin: TextIO | None) -> int:
    """Serves MCP on stdio or streamable HTTP; returns the exit status."""
    token = ""
    if args.http:
        try:
            token = read_token_file(args.token_file) if args.token_file else os.environ.get(TOKEN_ENV, "")
        except TokenFileError as exc:
            err.write(f"soong-agent: error: {exc}\n")
            return EXIT_USAGE
    generated = args.http and not token
    if args.http:
        token = token or secrets.token_urlsafe(24)
        from agent_core.redaction import register_secret

        register_secret(token)  # a command printing it reaches neither the model nor storage nor the logs
    from agent_core.adapters.mcp_server import SoongMcpServer
    from agent_core.errors import AgentCoreError

    try:
        server = SoongMcpServer(project_dir=args.path)
        await server.open()
    except AgentCoreError as exc:
        err.write(error_text(exc))
        return EXIT_FAILED
    stopped_by: list[str] = []
    tasks = TaskOwner("mcp server")
    try:
        if interrupts.pending():
            return EXIT_INTERRUPTED
        if args.http:
            status = await _serve_http(server, args.port, token, generated, out, err, stopped_by)
        else:
            await interrupts.serve_until_stopped(tasks.spawn(server.serve_stdio()), stopped_by)
            status = EXIT_OK
    finally:
        await tasks.aclose()
        await server.close()
    if "SIGINT" in stopped_by:
        return EXIT_INTERRUPTED
    return status


async def _serve_http(
    server: SoongMcpServer,
    port: int,
    token: str,
    generated: bool,
    out: Output,
    err: Output,
    stopped_by: list[str],
) -> int:
    import uvicorn

    from agent_core.adapters.mcp_server import http_app

    try:
        sock = _bind(HOST, port)
    except OSError as exc:
        err.write(f"soong-agent: error: cannot listen on {HOST}:{port}: {exc.strerror or exc}\n")
        return EXIT_FAILED
    bound = sock.getsockname()[1]
    app, manager = http_app(server, token, bound)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", log_config=None)
    web = uvicorn.Server(config)
    # the signals only ask the server to exit (uvicorn would re-raise them after serve() returns)
    web.capture_signals = contextlib.nullcontext  # type: ignore[method-assign,assignment]

    async def serve() -> None:
        async with manager.run(), TaskOwner("mcp http server") as owner:
            task = owner.spawn(web.serve(sockets=[sock]))
            try:
                while not web.started and not task.done():
                    await asyncio.sleep(0.02)
                if web.started:
                    shown = f" token {token}" if generated else ""
                    out.write(f"serving http://{HOST}:{bound}/mcp{shown}\n")
                await task
            finally:
                web.should_exit = True
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    try:
        async with TaskOwner("mcp http") as tasks:
            await interrupts.serve_until_stopped(tasks.spawn(serve()), stopped_by)
            return EXIT_OK
    finally:
        sock.close()
