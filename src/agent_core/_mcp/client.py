"""The MCP client: the only module that imports the official ``mcp`` SDK
(docs/hooks-and-mcp.md#connecting-and-discovery).

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
capability unless the caller passes :class:`~agent_core._mcp.remote.ClientHandlers`: then it advertises
sampling, elicitation and roots and answers those server requests through them (a handler's
:class:`McpRequestRefused` becomes a JSON-RPC error for the server). Every ``*/list`` pagination is
followed to the end. An HTTP connection may carry an ``httpx.Auth`` (the OAuth 2.1 provider of
:mod:`agent_core._mcp.oauth`); the server's capabilities from ``initialize`` are kept in
:attr:`McpClient.capabilities`.
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
from mcp import types as mcp_types
from mcp.client.stdio import DEFAULT_INHERITED_ENV_VARS, stdio_client
from mcp.shared.exceptions import McpError
from mcp.shared.session import ProgressFnT
from mcp.types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, Implementation

from agent_core._concurrency import CancelEvent, TaskOwner, cancel_and_wait, first_of
from agent_core._mcp.remote import (
    ClientHandlers,
    ElicitationRequest,
    McpCallError,
    McpRequestRefused,
    McpTimeoutError,
    McpTransportError,
    PromptArgument,
    PromptMessage,
    RemotePrompt,
    RemoteResource,
    RemoteResult,
    RemoteTool,
    ResourceContent,
    SamplingRequest,
)
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


def _content_text(content: Any) -> str:
    """Text of a content block (or a list of them): text as is, embedded text resources inlined, other
    kinds as a ``[kind content]`` marker."""
    if isinstance(content, list):
        return "\n".join(_content_text(c) for c in content)
    kind = getattr(content, "type", "")
    if kind == "text":
        return str(content.text)
    if kind == "resource":
        resource = content.resource
        text = getattr(resource, "text", None)
        if isinstance(text, str):
            return f"[resource {resource.uri}]\n{text}"
        return f"[binary resource {resource.uri}]"
    if kind == "resource_link":
        return f"[resource link {content.uri}]"
    return f"[{kind or 'unknown'} content]"


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
        handlers: ClientHandlers | None = None,
        auth: httpx.Auth | None = None,
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
        self._handlers = handlers
        self._auth = auth
        self._host_busy = 0
        self._host_since = 0.0
        self._host_total = 0.0
        self.capabilities: dict[str, Any] = {}
        """The server's capabilities from ``initialize`` (``tools``, ``resources``, ``prompts``, ...)."""
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
            httpx.AsyncClient(headers=self._headers, timeout=httpx.Timeout(30.0, read=300.0), auth=self._auth)
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
                session = await stack.enter_async_context(self._client_session(read, write))
                initialized = await session.initialize()
                self.capabilities = initialized.capabilities.model_dump(mode="json", exclude_none=True)
                self._session = session
                self._ready.set()
                await self._stop.wait()
        except Exception as exc:
            self._error = exc
        finally:
            self._session = None
            self._ended.set()
            self._ready.set()

    def _client_session(self, read: Any, write: Any) -> ClientSession:
        if self._handlers is None:
            return ClientSession(read, write, client_info=CLIENT_INFO)
        return ClientSession(
            read,
            write,
            client_info=CLIENT_INFO,
            sampling_callback=self._on_sampling,
            elicitation_callback=self._on_elicitation,
            list_roots_callback=self._on_roots,
        )

    # -- server requests ----------------------------------------------------------------------------

    def _host_seconds(self) -> float:
        """Seconds spent answering the server's requests so far (the one in progress included)."""
        ongoing = asyncio.get_running_loop().time() - self._host_since if self._host_busy else 0.0
        return self._host_total + ongoing

    async def _answer(self, what: str, produce: Callable[[], Awaitable[Any]]) -> Any:
        loop = asyncio.get_running_loop()
        if self._host_busy == 0:
            self._host_since = loop.time()
        self._host_busy += 1
        try:
            return await produce()
        except McpRequestRefused as exc:
            return mcp_types.ErrorData(code=INVALID_REQUEST, message=str(exc))
        except Exception as exc:
            logger.warning("MCP server %s: answering %s failed: %s", self.server_id, what, _describe(exc))
            return mcp_types.ErrorData(code=INTERNAL_ERROR, message=f"{what} failed: {type(exc).__name__}")
        finally:
            self._host_busy -= 1
            if self._host_busy == 0:
                self._host_total += loop.time() - self._host_since

    async def _on_sampling(self, context: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        assert self._handlers is not None
        handlers = self._handlers

        async def produce() -> Any:
            preferences = params.modelPreferences
            hints = tuple(h.name for h in (preferences.hints or []) if h.name) if preferences else ()
            request = SamplingRequest(
                messages=tuple(PromptMessage(m.role, _content_text(m.content)) for m in params.messages),
                max_tokens=params.maxTokens,
                system_prompt=params.systemPrompt,
                temperature=params.temperature,
                stop_sequences=tuple(params.stopSequences or ()),
                model_hints=hints,
            )
            reply = await handlers.sample(request)
            stop = {"max_tokens": "maxTokens", "stop_sequence": "stopSequence"}.get(
                reply.stop_reason or "", "endTurn"
            )
            return mcp_types.CreateMessageResult(
                role="assistant",
                content=mcp_types.TextContent(type="text", text=reply.text),
                model=reply.model,
                stopReason=stop,
            )

        return await self._answer("sampling", produce)

    async def _on_elicitation(self, context: Any, params: Any) -> Any:
        assert self._handlers is not None
        handlers = self._handlers

        async def produce() -> Any:
            if getattr(params, "mode", "form") == "url":
                request = ElicitationRequest(message=params.message, url=str(params.url))
            else:
                schema = params.requestedSchema
                request = ElicitationRequest(message=params.message, requested_schema=dict(schema))
            reply = await handlers.elicit(request)
            content = reply.content if reply.action == "accept" else None
            return mcp_types.ElicitResult(action=reply.action, content=content)

        return await self._answer("elicitation", produce)

    async def _on_roots(self, context: Any) -> Any:
        assert self._handlers is not None
        handlers = self._handlers

        async def produce() -> Any:
            roots = [mcp_types.Root(uri=uri, name=name) for uri, name in handlers.roots()]
            return mcp_types.ListRootsResult(roots=roots)

        return await self._answer("roots", produce)

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
        loop = asyncio.get_running_loop()
        started, host_before = loop.time(), self._host_seconds()
        async with TaskOwner("mcp request") as owner:
            request = owner.spawn(factory(session))
            while True:
                # the time the host spends on the server's own requests (a user answering an
                # elicitation, a sampling call) does not count against this request's timeout
                remaining = None
                if timeout_s is not None:
                    spent = loop.time() - started - (self._host_seconds() - host_before)
                    remaining = max(timeout_s - spent, 0.5 if self._host_busy else 0.0)
                await first_of(request, self._ended, remaining)
                if request.done() or self._ended.is_set() or timeout_s is None:
                    break
                if (
                    self._host_busy == 0
                    and loop.time() - started - (self._host_seconds() - host_before) >= timeout_s
                ):
                    break
            if not request.done():
                await cancel_and_wait(request)
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

    async def _pages(
        self,
        fetch: Callable[[ClientSession, str | None], Awaitable[Any]],
        field: str,
        timeout_s: float | None,
    ) -> list[Any]:
        items: list[Any] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(MAX_PAGES):
            page_cursor = cursor

            async def one(session: ClientSession, page: str | None = page_cursor) -> Any:
                return await fetch(session, page)

            result = await self._request(one, timeout_s)
            items.extend(getattr(result, field))
            cursor = result.nextCursor
            if not cursor or cursor in seen:
                return items
            seen.add(cursor)
        raise McpCallError(f"{field} listing returned more than {MAX_PAGES} pages")

    async def list_resources(self, timeout_s: float | None) -> list[RemoteResource]:
        """Every resource and resource template of the server (empty without the capability)."""
        if "resources" not in self.capabilities:
            return []

        async def resources(session: ClientSession, page: str | None) -> Any:
            return await session.list_resources(page) if page is not None else await session.list_resources()

        async def templates(session: ClientSession, page: str | None) -> Any:
            if page is not None:
                return await session.list_resource_templates(page)
            return await session.list_resource_templates()

        found = [
            RemoteResource(
                uri=str(r.uri), name=r.name, description=r.description or r.title or "", mime_type=r.mimeType
            )
            for r in await self._pages(resources, "resources", timeout_s)
        ]
        try:
            listed = await self._pages(templates, "resourceTemplates", timeout_s)
        except McpCallError:  # templates are optional for a server
            listed = []
        found += [
            RemoteResource(
                uri=t.uriTemplate,
                name=t.name,
                description=t.description or t.title or "",
                mime_type=t.mimeType,
                template=True,
            )
            for t in listed
        ]
        return found

    async def read_resource(self, uri: str, timeout_s: float | None) -> list[ResourceContent]:
        """The contents of one resource (text, or base64 blobs)."""

        async def read(session: ClientSession) -> Any:
            return await session.read_resource(uri)  # type: ignore[arg-type]

        result = await self._request(read, timeout_s)
        contents: list[ResourceContent] = []
        for item in result.contents:
            text = getattr(item, "text", None)
            blob = getattr(item, "blob", None)
            contents.append(ResourceContent(uri=str(item.uri), mime_type=item.mimeType, text=text, blob=blob))
        return contents

    async def list_prompts(self, timeout_s: float | None) -> list[RemotePrompt]:
        """Every prompt of the server (empty without the capability)."""
        if "prompts" not in self.capabilities:
            return []

        async def prompts(session: ClientSession, page: str | None) -> Any:
            return await session.list_prompts(page) if page is not None else await session.list_prompts()

        return [
            RemotePrompt(
                name=p.name,
                description=p.description or p.title or "",
                arguments=tuple(
                    PromptArgument(a.name, a.description or "", bool(a.required)) for a in p.arguments or ()
                ),
            )
            for p in await self._pages(prompts, "prompts", timeout_s)
        ]

    async def get_prompt(
        self, name: str, arguments: dict[str, str], timeout_s: float | None
    ) -> list[PromptMessage]:
        """The messages of one prompt with ``arguments`` filled in by the server."""

        async def get(session: ClientSession) -> Any:
            return await session.get_prompt(name, arguments)

        result = await self._request(get, timeout_s)
        return [PromptMessage(m.role, _content_text(m.content)) for m in result.messages]

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
