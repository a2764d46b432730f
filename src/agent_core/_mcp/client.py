"""The MCP client: the only module that imports the official ``mcp`` SDK (mcp-hooks.md §A2).

It is imported lazily by :mod:`agent_core._mcp.manager`, so ``import agent_core`` never loads the SDK.

:class:`McpClient` holds one connection. The SDK's transports and :class:`ClientSession` are async context
managers that must be entered and left in one task, so each connection is owned by a background task
that opens the transport (``stdio_client`` or the streamable HTTP client), initialises the session, then
waits until :meth:`McpClient.close` (or a transport failure) ends it. Requests from any task go through the
live session; the connection task ending makes every pending and later request fail with
:class:`McpTransportError`.

stdio: the process gets exactly the environment the caller passes. The SDK always merges a few "safe"
variables (``HOME``, ``PATH``, ...) into a child's environment, so the server is started through ``env -u
NAME ...`` for every such variable the caller did not pass; the executable is resolved beforehand and
passed as an absolute path. The server's stderr is read through a pipe: lines go to debug logging and the
last few kilobytes are kept for error messages. The client advertises no sampling, elicitation or roots
capability (the SDK's default handlers decline such server requests). ``tools/list`` pagination is
followed to the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, cast

import anyio
import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp.shared.exceptions import McpError
from mcp.shared.session import ProgressFnT
from mcp.types import CONNECTION_CLOSED, Implementation

from agent_core._concurrency import CancelEvent, TaskOwner, cancel_and_wait, race
from agent_core._mcp.remote import McpCallError, McpTimeoutError, McpTransportError, RemoteResult, RemoteTool
from agent_core.tools._executables import trusted_which

logger = logging.getLogger(__name__)

STDERR_KEEP = 4096
MAX_PAGES = 1000
CLOSE_TIMEOUT_S = 5.0
CLIENT_INFO = Implementation(name="soong-agent", version="1")

ProgressCallback = Callable[[float, float | None, str | None], Awaitable[None]]


class _StderrPipe:
    """A pipe whose write end is handed to the server process; the read end is drained by a task of the
    client's owner."""

    def __init__(self, server_id: str) -> None:
        read_fd, write_fd = os.pipe()
        self.writer = os.fdopen(write_fd, "w")
        self._reader = os.fdopen(read_fd, "rb")
        self._server_id = server_id
        self._tail = bytearray()
        self._task: asyncio.Task[None] | None = None

    def start(self, owner: TaskOwner) -> None:
        self._task = owner.spawn(self._drain(), name=f"mcp-stderr-{self._server_id}")

    def close_writer(self) -> None:
        with contextlib.suppress(OSError):
            self.writer.close()

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        transport, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self._reader
        )
        try:
            while line := await reader.readline():
                self._tail += line
                if len(self._tail) > STDERR_KEEP:
                    del self._tail[: len(self._tail) - STDERR_KEEP]
                logger.debug(
                    "mcp server %s stderr: %s", self._server_id, line.decode("utf-8", "replace").rstrip()
                )
        finally:
            transport.close()

    def tail(self) -> str:
        return self._tail.decode("utf-8", "replace").strip()

    async def close(self) -> None:
        self.close_writer()
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=1.0)  # the rest of what the server wrote
            await cancel_and_wait(self._task)
        else:
            with contextlib.suppress(OSError):
                self._reader.close()


def _exact_env_command(executable: str, args: list[str], env: Mapping[str, str]) -> tuple[str, list[str]]:
    """``(command, args)`` that start ``executable`` with exactly ``env`` despite the SDK's env merge."""
    unset = [name for name in DEFAULT_INHERITED_ENV_VARS if name not in env]
    env_tool = trusted_which("env", path_value=os.defpath) or trusted_which("env")
    if not unset or env_tool is None:
        return executable, args
    prefix: list[str] = []
    for name in unset:
        prefix += ["-u", name]
    return env_tool, [*prefix, "--", executable, *args]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    if isinstance(exc, McpError):
        return exc.error.message
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpClient:
    """One connection to one MCP server (see the module docstring)."""

    def __init__(
        self,
        server_id: str,
        *,
        command: str | None = None,
        args: tuple[str, ...] = (),
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if (command is None) == (url is None):
            raise ValueError("exactly one of command (stdio) and url (http) is required")
        self.server_id = server_id
        self._command = command
        self._args = list(args)
        self._cwd = cwd
        self._env = dict(env or {})
        self._url = url
        self._headers = dict(headers or {})
        self._session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._ended = CancelEvent()
        self._error: BaseException | None = None
        self._tasks = TaskOwner(f"mcp client {server_id}")
        """The connection task (the SDK's session lives in it, start to end) and the stderr drain."""
        self._task: asyncio.Task[None] | None = None
        self._stderr: _StderrPipe | None = None

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._ended.is_set()

    def stderr_tail(self) -> str:
        return self._stderr.tail() if self._stderr is not None else ""

    def _failure(self, prefix: str) -> str:
        reason = _describe(self._error) if self._error is not None else "connection closed"
        tail = self.stderr_tail()
        return f"{prefix}: {reason}" + (f" (stderr: {tail[-500:]})" if tail else "")

    # -- connection task ----------------------------------------------------------------------------

    async def _open_transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        if self._command is not None:
            command, args = _exact_env_command(self._command, self._args, self._env)
            params = StdioServerParameters(command=command, args=args, env=self._env, cwd=self._cwd)
            self._stderr = _StderrPipe(self.server_id)
            self._stderr.start(self._tasks)
            try:
                streams = await stack.enter_async_context(stdio_client(params, errlog=self._stderr.writer))
            finally:
                self._stderr.close_writer()
            return streams[0], streams[1]
        assert self._url is not None
        http = await stack.enter_async_context(
            httpx.AsyncClient(headers=self._headers, timeout=httpx.Timeout(30.0, read=300.0))
        )
        from mcp.client import streamable_http

        factory = getattr(streamable_http, "streamable_http_client", None)
        if factory is not None:
            streams = await stack.enter_async_context(factory(self._url, http_client=http))
        else:  # mcp < 1.2x
            streams = await stack.enter_async_context(
                streamable_http.streamablehttp_client(self._url, headers=self._headers)
            )
        return streams[0], streams[1]

    async def _run(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._open_transport(stack)
                session = await stack.enter_async_context(ClientSession(read, write, client_info=CLIENT_INFO))
                await session.initialize()
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self._error = exc
        finally:
            self._session = None
            self._ended.set()
            self._ready.set()

    async def connect(self, timeout_s: float) -> None:
        """Starts the connection task and waits for ``initialize``; raises :class:`McpTransportError` or
        :class:`McpTimeoutError` (the connection is then closed)."""
        if self._task is not None:
            raise RuntimeError("connect() may be called only once per client")
        self._task = self._tasks.spawn(self._run(), name=f"mcp-{self.server_id}")
        try:
            await asyncio.wait_for(self._ready.wait(), timeout_s)
        except TimeoutError:
            await self.close()
            raise McpTimeoutError(f"no answer to initialize within {timeout_s:g} s") from None
        if self._session is None:
            await self.close()
            raise McpTransportError(self._failure("cannot connect"))

    # -- requests -----------------------------------------------------------------------------------

    async def _request(
        self, factory: Callable[[ClientSession], Awaitable[Any]], timeout_s: float | None
    ) -> Any:
        session = self._session
        if session is None or self._ended.is_set():
            raise McpTransportError(self._failure("not connected"))
        request = await race(factory(session), self._ended, timeout_s)
        if request.cancelled():
            if self._ended.is_set():
                raise McpTransportError(self._failure("connection lost"))
            raise McpTimeoutError(f"no answer within {timeout_s:g} s")
        exc = request.exception()
        if exc is None:
            return request.result()
        if isinstance(exc, McpError):
            if exc.error.code == CONNECTION_CLOSED:
                raise McpTransportError(self._failure("connection closed")) from exc
            raise McpCallError(exc.error.message) from exc
        if isinstance(
            exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError | EOFError | httpx.HTTPError
        ):
            raise McpTransportError(f"transport failure: {_describe(exc)}") from exc
        raise McpCallError(_describe(exc)) from exc

    async def list_tools(self, timeout_s: float | None) -> list[RemoteTool]:
        """Every tool of the server, following ``nextCursor`` to the end."""
        tools: list[RemoteTool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page_cursor = cursor

            async def fetch(session: ClientSession, page: str | None = page_cursor) -> Any:
                return await session.list_tools(page) if page is not None else await session.list_tools()

            result = await self._request(fetch, timeout_s)
            for tool in result.tools:
                annotations = (
                    tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else None
                )
                tools.append(
                    RemoteTool(
                        name=tool.name,
                        description=tool.description or tool.title or "",
                        input_schema=tool.inputSchema,
                        annotations=annotations,
                    )
                )
            cursor = result.nextCursor
            if not cursor or cursor in seen:
                return tools
            seen.add(cursor)
        raise McpCallError(f"tools/list returned more than {MAX_PAGES} pages")

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float | None,
        progress: ProgressCallback | None = None,
    ) -> RemoteResult:
        """Calls one tool; the result's content items are returned as JSON dicts."""

        async def call(session: ClientSession) -> Any:
            return await session.call_tool(
                name, arguments, progress_callback=cast(ProgressFnT | None, progress)
            )

        result = await self._request(call, timeout_s)
        items = [item.model_dump(mode="json", by_alias=True, exclude_none=True) for item in result.content]
        return RemoteResult(items=items, structured=result.structuredContent, is_error=bool(result.isError))

    # -- shutdown -----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Closes the session and stops a stdio server process; idempotent."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            try:
                if self._session is not None:  # connected: the session ends by itself on the stop signal
                    await asyncio.wait({task}, timeout=CLOSE_TIMEOUT_S)
            finally:  # still connecting (nothing waits for the stop signal yet), too slow, or cancelled
                await cancel_and_wait(task)
        if self._stderr is not None:
            await self._stderr.close()
        await self._tasks.aclose()
        self._session = None
        self._ended.set()
