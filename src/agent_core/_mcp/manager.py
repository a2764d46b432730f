"""The per-runtime MCP manager: lazy connect, discovery cache, tool registration, failure isolation.

Contract (docs/hooks-and-mcp.md):

* Nothing connects at construction. :meth:`McpManager.ensure_connected` is called by the runtime at run
  start; with ``needed=False`` (the run's role/requested set excludes every ``mcp.*`` tool) it connects
  nothing. Otherwise every catalog server not listed in ``tools.mcp.disabled_servers`` is connected
  (concurrently; one attempt per server at a time — runs that waited for an attempt share its outcome),
  discovered with ``tools/list`` and its tools registered in the :class:`ToolRegistry` as one
  :class:`McpServerAdapter` (privileged path, ``mcp.<server_id>.<tool>`` names). It returns the ids of the
  servers that failed; their tools are unregistered and must be passed as ``failed_mcp_servers`` to the
  effective-tool computation. A failed server is retried at the next run start that needs it.
* Connections live for the runtime; discovery results are cached in memory per ``(server_id,
  config_hash)`` for ``tools.mcp.discovery_cache_ttl_ms``; an expired entry is refreshed on the live
  session (reconnecting when the session died).
* Failures (connect/initialize error or timeout, discovery error, missing env var) emit
  ``mcp_server_failed`` ``{server_id, phase, error}`` (redacted) through the ``emit`` callback; they never
  raise. Skipped tools are logged and reported in a debug ``provider_debug`` event (``kind =
  "mcp_discovery"``, ``skipped_tools``).
* Calls: per-call timeout ``timeout_ms`` → ``timeout``; a JSON-RPC error → ``internal_error`` /
  ``mcp_tool_error``; a transport failure → ``internal_error`` / ``mcp_transport_error``, an
  ``mcp_server_failed`` (``phase: "call"``) event, and the server's tools are removed from the rest of the
  run: its id is added to ``scope.mcp_failed_servers``, its tools are dropped from
  ``scope.effective_tools``, and later calls get ``tool_not_available`` at pre-flight. The connection is
  closed so the next run start reconnects.
* :meth:`McpManager.close` closes every client (stdio processes stop); idempotent.

The SDK is imported only by :mod:`agent_core._mcp.client`, lazily, when a server is first connected.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import TaskOwner
from agent_core._mcp.catalog import McpCatalog, McpServerConfig
from agent_core._mcp.features import (
    LIST_RESOURCES,
    McpHost,
    ServerHandlers,
    content_blocks,
    resource_definitions,
    resource_listing,
)
from agent_core._mcp.mapping import build_definitions, map_result, unmatched_overrides
from agent_core._mcp.remote import (
    McpCallError,
    McpTimeoutError,
    McpTransportError,
    PromptMessage,
    RemotePrompt,
    RemoteResource,
    ResourceContent,
)
from agent_core._redaction import SECRET_ENV_NAME, SENSITIVE_KEY, Redactor
from agent_core.config.schema import Settings
from agent_core.errors import (
    AgentCoreError,
    ConfigError,
    ErrorCode,
    FileOperationError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OperationTimeoutError,
    ToolNotAvailableError,
)
from agent_core.tools._command import build_env, resolve_executable
from agent_core.tools._normalize import error_result
from agent_core.tools.context import RunScope, ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.tools.registry import ToolRegistry
from agent_core.types import events as ev
from agent_core.types.content import ArtifactRefBlock, ContentBlock, ErrorPayload, TextBlock
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

if TYPE_CHECKING:
    from agent_core._mcp.client import McpClient
    from agent_core._mcp.oauth import Opener

logger = logging.getLogger(__name__)

Emit = Callable[[ev.EventPayload], Awaitable[None]]
"""Emits one event of the calling run; ``ToolRunSink.emit`` fits."""


@dataclass(eq=False, slots=True)
class _ServerState:
    config: McpServerConfig
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    client: McpClient | None = None
    adapter: McpServerAdapter | None = None
    cache_key: tuple[str, str] | None = None
    discovered_at: float | None = None
    failed: bool = False
    last_failure: ev.McpServerFailed | None = None
    attempts: int = 0
    skipped: list[dict[str, str]] = field(default_factory=list)
    active: list[ToolContext] = field(default_factory=list)
    """The server's tool calls in progress (a sampling or elicitation request belongs to the newest)."""


def failed_for_run(scope: RunScope) -> set[str]:
    """Servers that failed during this run (``scope.mcp_failed_servers``, a mutable set)."""
    return scope.mcp_failed_servers


class McpServerAdapter:
    """The :class:`ToolAdapter` of one discovered server (registered via the privileged path)."""

    def __init__(
        self, manager: McpManager, server: McpServerConfig, definitions: list[ToolDefinition]
    ) -> None:
        self._manager = manager
        self.server = server
        self._definitions = {d.name: d for d in definitions}

    def definitions(self) -> list[ToolDefinition]:
        return list(self._definitions.values())

    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        if self.server.server_id in failed_for_run(ctx.scope):
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
            )
        return Preflight(target_scope=None, network_host=self.server.network_host)

    def network_host(self, call: ToolCall, ctx: ToolContext) -> str | None:
        return self.server.network_host

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        definition = self._definitions.get(call.name)
        if definition is None:
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
            )
        if definition.metadata.get("mcp_builtin") is not None:
            return await self._manager.resource_tool(self.server.server_id, definition, call, ctx)
        return await self._manager.call_tool(self.server.server_id, definition, call, ctx)

    async def close(self) -> None:
        await self._manager.close_server(self.server.server_id)


def literal_secrets(server: McpServerConfig) -> list[str]:
    """Secret values written literally into an ``mcp.json`` entry: values of secret-looking ``env`` names
    (``API_KEY``, ``*_TOKEN``, ...) and of sensitive headers (``Authorization``, ``X-Api-Key``, ...; for
    ``<scheme> <credential>`` also the credential alone). They are registered with the redactor, so a
    command printing the file or the server's environment does not pass them on."""
    found = [v for k, v in server.env.items() if SECRET_ENV_NAME.search(k)]
    for header, value in server.headers.items():
        if SENSITIVE_KEY.search(header) or "auth" in header.lower() or "key" in header.lower():
            found.append(value)
            scheme, _, credential = value.partition(" ")
            if credential.strip() and scheme.isalpha():
                found.append(credential.strip())
    return found


class McpManager:
    """MCP servers of one runtime (see the module docstring)."""

    def __init__(
        self,
        catalog: McpCatalog,
        settings: Settings,
        *,
        registry: ToolRegistry,
        redactor: Redactor | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        roots: Sequence[Path] = (),
        oauth_opener: Opener | None = None,
    ) -> None:
        """``roots``: what ``roots/list`` answers (the project); ``oauth_opener``: sends the user to an
        authorization page (default: a WARNING log line with the URL)."""
        self._catalog = catalog
        self._settings = settings
        self._registry = registry
        self._redactor = redactor or Redactor()
        self._environ = environ
        self._clock = clock
        self._states = {s.server_id: _ServerState(config=s) for s in catalog}
        self._closed = False
        self._closing = TaskOwner("mcp client closes")
        """Closes of dropped clients, awaited by :meth:`close`."""
        self._roots = list(roots)
        self._oauth_opener = oauth_opener
        self._host: McpHost | None = None
        for server in catalog:
            for name in (*server.env_allowlist, *server.headers_env.values()):
                self._redactor.add_secret_env(name)
            for secret in literal_secrets(server):
                self._redactor.add_secret(secret)

    def attach_host(self, host: McpHost) -> None:
        """Who answers the servers' sampling and elicitation requests (the runtime, once it is wired)."""
        self._host = host

    # -- introspection ------------------------------------------------------------------------------

    @property
    def catalog(self) -> McpCatalog:
        return self._catalog

    @property
    def failed_servers(self) -> frozenset[str]:
        """Servers whose last connect/discovery attempt (or a call) failed."""
        return frozenset(sid for sid, s in self._states.items() if s.failed)

    def connected(self, server_id: str) -> bool:
        state = self._states.get(server_id)
        return bool(state and state.client is not None and state.client.alive)

    def skipped_tools(self, server_id: str) -> list[dict[str, str]]:
        state = self._states.get(server_id)
        return list(state.skipped) if state else []

    def definitions(self) -> list[ToolDefinition]:
        """Every currently registered MCP tool definition."""
        return [d for s in self._states.values() if s.adapter is not None for d in s.adapter.definitions()]

    # -- run start ----------------------------------------------------------------------------------

    async def ensure_connected(
        self, needed: bool, emit: Emit | None = None, *, servers: Collection[str] | None = None
    ) -> set[str]:
        """Connects/refreshes the servers a run needs; returns the ids that failed (see module docstring).

        ``servers`` narrows the attempt to those ids (e.g. a child whose ``allowed_tools`` names only some
        servers). Servers that are not healthy are always part of the result, so stale tools never leak
        into an effective set.
        """
        disabled = set(self._settings.tools.mcp.disabled_servers)
        wanted = [
            s
            for sid, s in self._states.items()
            if sid not in disabled and (servers is None or sid in servers)
        ]
        if needed and not self._closed and wanted:
            await asyncio.gather(*(self._ensure(state, emit) for state in wanted))
        return {sid for sid, s in self._states.items() if sid not in disabled and not self._healthy(s)}

    def _healthy(self, state: _ServerState) -> bool:
        return (
            not state.failed and state.adapter is not None and state.client is not None and state.client.alive
        )

    def _fresh(self, state: _ServerState) -> bool:
        if not self._healthy(state) or state.discovered_at is None:
            return False
        if state.cache_key != (state.config.server_id, state.config.config_hash):
            return False
        ttl_s = self._settings.tools.mcp.discovery_cache_ttl_ms / 1000
        return self._clock() - state.discovered_at < ttl_s

    async def _ensure(self, state: _ServerState, emit: Emit | None) -> None:
        seen = state.attempts
        async with state.lock:
            if state.attempts != seen:  # an attempt finished while we waited: share its outcome
                if state.failed and state.last_failure is not None and emit is not None:
                    await emit(state.last_failure)
                return
            if self._fresh(state):
                return
            state.attempts += 1
            await self._connect_and_discover(state, emit)

    async def _connect(self, state: _ServerState, deadline: float) -> McpClient:
        await self._drop_client(state)
        client = self._new_client(state.config)
        state.client = client
        await client.connect(max(deadline - time.monotonic(), 0.001))
        return client

    async def _connect_and_discover(self, state: _ServerState, emit: Emit | None) -> None:
        server = state.config
        deadline = time.monotonic() + server.startup_timeout_ms / 1000
        phase = "connect"
        try:
            reused = state.client is not None and state.client.alive
            client = (
                state.client if reused and state.client is not None else await self._connect(state, deadline)
            )
            phase = "discover"
            try:
                remote = await client.list_tools(max(deadline - time.monotonic(), 0.001))
            except McpTransportError:
                if not reused:
                    raise
                phase = "connect"  # the cached session died while idle: reconnect once
                client = await self._connect(state, deadline)
                phase = "discover"
                remote = await client.list_tools(max(deadline - time.monotonic(), 0.001))
        except (AgentCoreError, McpTransportError, McpTimeoutError, McpCallError, OSError) as exc:
            await self._fail(state, phase, exc, emit)
            return
        overrides = self._settings.tools.mcp.tool_overrides
        definitions, skipped = build_definitions(server, remote, overrides)
        if "resources" in client.capabilities:
            definitions += resource_definitions(server, {d.name for d in definitions})
        adapter = McpServerAdapter(self, server, definitions)
        if state.adapter is not None:
            self._registry.unregister_adapter(state.adapter)
            state.adapter = None
        try:
            self._registry.register_adapter(adapter, internal=True)
        except AgentCoreError as exc:
            await self._fail(state, "discover", exc, emit)
            return
        state.adapter = adapter
        state.failed = False
        state.last_failure = None
        state.cache_key = (server.server_id, server.config_hash)
        state.discovered_at = self._clock()
        state.skipped = skipped
        for key in unmatched_overrides(server.server_id, (d.name for d in definitions), overrides):
            logger.warning("tools.mcp.tool_overrides[%r] matches no discovered tool; ignored", key)
        if skipped:
            logger.debug("MCP server %s: skipped tools %s", server.server_id, skipped)
            if emit is not None:
                data = {"server_id": server.server_id, "skipped_tools": skipped}
                discovery = ev.ProviderDebug("mcp", "mcp_discovery", data, extra=data)
                await emit(discovery.redacted(self._redactor))

    def _new_client(self, server: McpServerConfig) -> McpClient:
        from agent_core._mcp.client import McpClient  # the only place the SDK gets imported

        consumer = f"MCP server {server.server_id} ({self._catalog.path})"
        if server.transport == "http":
            source = self._environ if self._environ is not None else os.environ
            headers = dict(server.headers)
            for header, variable in server.headers_env.items():
                if variable not in source:
                    raise ConfigError(
                        ErrorCode.config_error,
                        f"environment variable {variable!r} required by {consumer}, headers_env.{header}, is not set",
                        details={
                            "variable": variable,
                            "server_id": server.server_id,
                            "source": str(self._catalog.path),
                        },
                    )
                headers[header] = source[variable]
            assert server.url is not None
            auth = None
            if server.oauth is not None:
                from agent_core._mcp.oauth import oauth_provider  # OAuth servers only

                auth = oauth_provider(server, self._catalog.path.parent, self._redactor, self._oauth_opener)
            return McpClient(
                server.server_id, url=server.url, headers=headers, handlers=self._handlers(server), auth=auth
            )
        assert server.command is not None and server.cwd is not None
        try:
            env = build_env(
                self._settings.tools.env_allowlist,
                required=server.env_allowlist,
                required_by=f"{consumer}, env_allowlist",
                extra=server.env,
                environ=self._environ,
            )
        except AgentCoreError as exc:
            details = {**exc.details, "server_id": server.server_id, "source": str(self._catalog.path)}
            raise ConfigError(ErrorCode.config_error, exc.message, details=details) from exc
        if not server.cwd.is_dir():
            raise FileOperationError(
                ErrorCode.file_not_found, f"cwd {server.cwd} of {consumer} does not exist"
            )
        executable = resolve_executable(server.command, cwd=server.cwd, env=env)
        return McpClient(
            server.server_id,
            command=str(executable),
            args=server.args,
            cwd=server.cwd,
            env=env,
            handlers=self._handlers(server),
        )

    def _handlers(self, server: McpServerConfig) -> ServerHandlers:
        state = self._states[server.server_id]
        return ServerHandlers(
            server, lambda: self._host, lambda: state.active[-1] if state.active else None, self._roots
        )

    def _failure(self, server_id: str, phase: str, exc: BaseException) -> ev.McpServerFailed:
        if isinstance(exc, AgentCoreError):
            error = exc.to_payload(self._redactor)
        elif isinstance(exc, McpTimeoutError):
            error = ErrorPayload(type="mcp_timeout", code=ErrorCode.timeout, message=str(exc))
        else:
            kind = (
                "mcp_transport_error"
                if isinstance(exc, McpTransportError | OSError)
                else "mcp_protocol_error"
            )
            error = ErrorPayload(
                type=kind, code=ErrorCode.internal_error, message=str(exc) or type(exc).__name__
            )
        error.details.setdefault("server_id", server_id)
        error.details.setdefault("source", str(self._catalog.path))
        dumped = error.redacted_copy(self._redactor).model_dump(mode="json")
        return ev.McpServerFailed(server_id=server_id, phase=phase, error=dumped)

    async def _fail(self, state: _ServerState, phase: str, exc: BaseException, emit: Emit | None) -> None:
        server_id = state.config.server_id
        failure = self._failure(server_id, phase, exc)
        logger.warning("MCP server %s failed (%s): %s", server_id, phase, failure.error["message"])
        state.failed = True
        state.last_failure = failure
        await self._drop_client(state)
        if emit is not None:
            await emit(failure)

    async def _drop_client(self, state: _ServerState) -> None:
        """Unregisters the server's tools and closes its client in the background (a dead stdio server
        may take the SDK's termination grace to reap; no run start waits for that). :meth:`close` awaits
        every pending close."""
        if state.adapter is not None:
            self._registry.unregister_adapter(state.adapter)
            state.adapter = None
        client, state.client = state.client, None
        state.discovered_at = None
        if client is not None:
            self._closing.spawn(client.close(), name=f"mcp-close-{state.config.server_id}")

    # -- calls --------------------------------------------------------------------------------------

    async def call_tool(
        self, server_id: str, definition: ToolDefinition, call: ToolCall, ctx: ToolContext
    ) -> ToolResult:
        """Executes one MCP tool call for the pipeline (see the module docstring for error mapping)."""
        state = self._states[server_id]
        server = state.config
        client = state.client
        timeout_ms = server.timeout_ms

        async def progress(value: float, total: float | None, message: str | None) -> None:
            await ctx.emit_progress({"progress": value, "total": total, "message": message})

        async def create(
            data: bytes, filename: str, mime: str | None, summary: str | None
        ) -> ArtifactRefBlock:
            return await ctx.create_artifact(data, filename, mime, summary)

        try:
            if client is None or not client.alive:
                raise McpTransportError(f"MCP server {server_id} is not connected")
            tool_name = str(definition.metadata.get("mcp_tool_name") or call.name.split(".", 2)[2])
            state.active.append(ctx)
            try:
                remote = await client.call_tool(tool_name, dict(call.arguments), timeout_ms / 1000, progress)
            finally:
                state.active.remove(ctx)
        except McpTimeoutError:
            raise OperationTimeoutError(
                ErrorCode.timeout,
                f"MCP tool {call.name} timed out after {timeout_ms} ms",
                details={"timeout_ms": timeout_ms},
            ) from None
        except McpCallError as exc:
            message = self._redactor.text(f"MCP server {server_id} rejected the call: {exc}")
            return error_result(
                call.tool_call_id, call.name, ErrorCode.internal_error, message, error_type="mcp_tool_error"
            )
        except McpTransportError as exc:
            await self._call_failed(state, client, exc, ctx)
            message = self._redactor.text(f"MCP server {server_id} transport failure: {exc}")
            return error_result(
                call.tool_call_id,
                call.name,
                ErrorCode.internal_error,
                message,
                error_type="mcp_transport_error",
            )
        return await map_result(remote, call, create, ctx.scope.media)

    async def _call_failed(
        self, state: _ServerState, client: McpClient | None, exc: McpTransportError, ctx: ToolContext
    ) -> None:
        server_id = state.config.server_id
        scope = ctx.scope
        failed_for_run(scope).add(server_id)
        prefix = f"mcp.{server_id}."
        scope.effective_tools = frozenset(n for n in scope.effective_tools if not n.startswith(prefix))
        failure = self._failure(server_id, "call", exc)
        logger.warning("MCP server %s failed during a call: %s", server_id, failure.error["message"])
        await ctx.sink.emit(failure, tool_call_id=ctx.tool_call_id)
        async with state.lock:
            if state.client is client:
                state.failed = True
                state.last_failure = failure
                await self._drop_client(state)

    async def resource_tool(
        self, server_id: str, definition: ToolDefinition, call: ToolCall, ctx: ToolContext
    ) -> ToolResult:
        """``mcp.<server>.list_resources`` / ``read_resource`` (``_mcp.features``)."""

        async def create(
            data: bytes, filename: str, mime: str | None, summary: str | None
        ) -> ArtifactRefBlock:
            return await ctx.create_artifact(data, filename, mime, summary)

        try:
            if definition.metadata.get("mcp_builtin") == LIST_RESOURCES:
                listing = resource_listing(await self.list_resources(server_id, connect=False))
                return ToolResult(
                    tool_call_id=call.tool_call_id, tool_name=call.name, content=[TextBlock(text=listing)]
                )
            uri = str(call.arguments.get("uri", ""))
            contents = await self.read_resource(server_id, uri, connect=False)
        except AgentCoreError as exc:
            return error_result(
                call.tool_call_id,
                call.name,
                exc.code,
                self._redactor.text(exc.message),
                error_type="mcp_resource_error",
            )
        blocks = await content_blocks(contents, create)
        return ToolResult(tool_call_id=call.tool_call_id, tool_name=call.name, content=blocks)

    # -- resources and prompts for surfaces ---------------------------------------------------------

    async def _live_client(self, server_id: str, connect: bool) -> McpClient:
        state = self._states.get(server_id)
        if state is None or server_id in self._settings.tools.mcp.disabled_servers:
            raise NotFoundError(
                ErrorCode.validation_error,
                f"unknown MCP server {server_id!r}",
                details={"server_id": server_id, "source": str(self._catalog.path)},
            )
        if connect:
            await self.ensure_connected(True, servers={server_id})
        client = state.client
        if client is None or not client.alive:
            reason = state.last_failure.error.get("message") if state.last_failure else "not connected"
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available,
                f"MCP server {server_id} is not available: {reason}",
                details={"server_id": server_id},
            )
        return client

    async def _ask(
        self, server_id: str, what: str, request: Callable[[McpClient], Awaitable[Any]], connect: bool
    ) -> Any:
        client = await self._live_client(server_id, connect)
        try:
            return await request(client)
        except McpTimeoutError:
            raise OperationTimeoutError(
                ErrorCode.timeout, f"MCP server {server_id}: {what} timed out"
            ) from None
        except McpCallError as exc:
            message = self._redactor.text(f"MCP server {server_id} refused {what}: {exc}")
            raise InvalidArgumentError(
                ErrorCode.validation_error, message, details={"server_id": server_id}
            ) from None
        except McpTransportError as exc:
            message = self._redactor.text(f"MCP server {server_id}: {what} failed: {exc}")
            raise InternalError(ErrorCode.internal_error, message, details={"server_id": server_id}) from None

    def _timeout_s(self, server_id: str) -> float:
        return self._states[server_id].config.timeout_ms / 1000

    async def list_resources(self, server_id: str, *, connect: bool = True) -> list[RemoteResource]:
        """The server's resources and templates (connects it when needed; errors as ``AgentCoreError``)."""
        timeout = self._timeout_s(server_id) if server_id in self._states else None
        return list(
            await self._ask(server_id, "resources/list", lambda c: c.list_resources(timeout), connect)
        )

    async def read_resource(self, server_id: str, uri: str, *, connect: bool = True) -> list[ResourceContent]:
        if not uri:
            raise InvalidArgumentError(ErrorCode.validation_error, "a resource URI is required")
        timeout = self._timeout_s(server_id) if server_id in self._states else None
        return list(
            await self._ask(
                server_id, f"resources/read {uri}", lambda c: c.read_resource(uri, timeout), connect
            )
        )

    async def read_resource_blocks(self, server_id: str, uri: str) -> list[ContentBlock]:
        """A resource as blocks for a user message (binary contents described, not attached)."""
        return await content_blocks(await self.read_resource(server_id, uri), None)

    async def list_prompts(self, server_ids: Collection[str] | None = None) -> dict[str, list[RemotePrompt]]:
        """Prompts of every connectable server (or of ``server_ids``); a failing server lists none."""
        disabled = set(self._settings.tools.mcp.disabled_servers)
        wanted = [s for s in self._states if s not in disabled and (server_ids is None or s in server_ids)]
        await self.ensure_connected(True, servers=wanted)
        found: dict[str, list[RemotePrompt]] = {}
        for server_id in wanted:
            timeout = self._timeout_s(server_id)

            async def listing(client: McpClient, timeout: float = timeout) -> list[RemotePrompt]:
                return await client.list_prompts(timeout)

            try:
                found[server_id] = list(await self._ask(server_id, "prompts/list", listing, False))
            except AgentCoreError as exc:
                logger.warning("MCP server %s: cannot list prompts: %s", server_id, exc.message)
                found[server_id] = []
        return found

    async def get_prompt(
        self, server_id: str, name: str, arguments: Mapping[str, str]
    ) -> list[PromptMessage]:
        timeout = self._timeout_s(server_id) if server_id in self._states else None
        args = {str(k): str(v) for k, v in arguments.items()}
        return list(
            await self._ask(
                server_id, f"prompts/get {name}", lambda c: c.get_prompt(name, args, timeout), True
            )
        )

    # -- shutdown -----------------------------------------------------------------------------------

    async def close_server(self, server_id: str) -> None:
        state = self._states.get(server_id)
        if state is None:
            return
        client, state.client = state.client, None
        state.discovered_at = None
        if client is not None:
            await client.close()

    async def close(self) -> None:
        """Closes every client and stops stdio server processes; idempotent."""
        self._closed = True
        await asyncio.gather(*(self.close_server(sid) for sid in list(self._states)), return_exceptions=True)
        await self._closing.wait()  # each close is bounded by the client's own timeouts
        await self._closing.aclose()
