"""The MCP server catalog from ``${SOONG_AGENT_HOME}/mcp.json`` (docs/hooks-and-mcp.md#configuration,
docs/hooks-and-mcp.md#connecting-and-discovery, docs/hooks-and-mcp.md#tools).

:func:`load_mcp_catalog` reads the user-level file once per runtime and connects nothing; no project-level
file is ever read. A missing file is an empty catalog. Invalid JSON or any schema violation — unknown field,
bad ``server_id`` (``^[A-Za-z0-9_-]+$``, ≤ 64 chars), missing ``command``/``url``, fields of the other
transport, non-lowercase tags, ``timeout_ms`` above ``tools.max_timeout_ms`` — raises
``ConfigError(config_error)`` naming the file and the server. A ``tools.mcp.tool_overrides`` key whose
server is not in the catalog is a ``config_error`` as well.

Each server's cache identity is ``(server_id, config_hash)`` where ``config_hash`` is the SHA-256 of the
canonical JSON (sorted keys) of its ``mcp.json`` entry.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError

from agent_core._jsontext import compact_json
from agent_core.config._json_file import MISSING, json_file_error, read_json_file
from agent_core.config.loader import LoadedConfig
from agent_core.config.schema import Settings, expand_placeholders, format_validation_error
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.tools._paths import resolve_path
from agent_core.types.base import StrictModel

MCP_FILENAME = "mcp.json"
SERVER_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DEFAULT_STARTUP_TIMEOUT_MS = 30000
_STDIO_ONLY = ("command", "args", "cwd", "env", "env_allowlist")
_HTTP_ONLY = ("url", "headers", "headers_env", "oauth")


class McpOAuthEntry(StrictModel):
    """``oauth`` of an HTTP server: OAuth 2.1 with PKCE through the ``mcp`` SDK's auth client."""

    scopes: list[str] | None = None
    """Scopes to request (default: what the server's metadata names)."""
    client_id: str | None = Field(default=None, min_length=1)
    """A client registered beforehand (public client, PKCE); default: dynamic client registration."""
    client_name: str = Field(default="soong-agent", min_length=1)
    redirect_port: int | None = Field(default=None, ge=1, le=65535)
    """Port of the local redirect listener (``http://127.0.0.1:<port>/callback``); default: the one of
    the stored registration, else a free port."""


class McpServerEntry(StrictModel):
    """One ``mcpServers`` entry (docs/hooks-and-mcp.md#configuration)."""

    type: Literal["stdio", "http"] | None = None
    command: str | None = Field(default=None, min_length=1)
    args: list[str] | None = None
    cwd: str | None = Field(default=None, min_length=1)
    env: dict[str, str] | None = None
    env_allowlist: list[str] | None = None
    url: str | None = Field(default=None, min_length=1)
    headers: dict[str, str] | None = None
    headers_env: dict[str, str] | None = None
    tags: list[str] = Field(default_factory=list)
    startup_timeout_ms: int | None = Field(default=None, ge=1)
    timeout_ms: int | None = Field(default=None, ge=1)
    oauth: McpOAuthEntry | None = None
    trusted: bool = False


class McpFile(StrictModel):
    mcpServers: dict[str, McpServerEntry]


@dataclass(frozen=True, slots=True)
class McpServerConfig:
    """A validated server entry with defaults applied and placeholders expanded."""

    server_id: str
    transport: Literal["stdio", "http"]
    config_hash: str
    tags: tuple[str, ...]
    startup_timeout_ms: int
    timeout_ms: int
    command: str | None = None
    args: tuple[str, ...] = ()
    cwd: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    env_allowlist: tuple[str, ...] = ()
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    headers_env: Mapping[str, str] = field(default_factory=dict)
    source: Path | None = None
    oauth: McpOAuthEntry | None = None
    trusted: bool = False
    """Sampling requests of this server run without asking the user."""

    @property
    def network_host(self) -> str | None:
        """Lowercased host of ``url`` for HTTP servers, ``None`` for stdio (docs/hooks-and-mcp.md#tools)."""
        if self.transport != "http" or self.url is None:
            return None
        host = urlsplit(self.url).hostname
        return host.lower() if host else None


@dataclass(frozen=True, slots=True)
class McpCatalog:
    """Every configured server, in file order."""

    path: Path
    servers: dict[str, McpServerConfig]

    def __iter__(self) -> Any:
        return iter(self.servers.values())

    def __len__(self) -> int:
        return len(self.servers)

    def get(self, server_id: str) -> McpServerConfig | None:
        return self.servers.get(server_id)


def config_hash(entry: Any) -> str:
    """SHA-256 of the canonical JSON (sorted keys, compact) of a server's raw ``mcp.json`` entry."""
    text = compact_json(entry, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _error(path: Path, message: str, **details: Any) -> ConfigError:
    return json_file_error(path, "MCP config", message, **details)


def _check_url(path: Path, where: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _error(
            path, f"{where}.url: must be an http(s) URL with a host, got {url!r}", key=f"{where}.url"
        )


def _server(
    server_id: str,
    entry: McpServerEntry,
    raw: Any,
    *,
    path: Path,
    settings: Settings,
    home: Path,
    project: Path,
) -> McpServerConfig:
    where = f"mcpServers.{server_id}"
    if not SERVER_ID.match(server_id):
        raise _error(
            path, f"server_id {server_id!r} must match ^[A-Za-z0-9_-]+$ (at most 64 characters)", key=where
        )
    transport = entry.type or ("http" if entry.command is None and entry.url is not None else "stdio")
    required, foreign = ("command", _HTTP_ONLY) if transport == "stdio" else ("url", _STDIO_ONLY)
    if getattr(entry, required) is None:
        raise _error(
            path, f"{where}: {transport} server {server_id!r} needs '{required}'", key=f"{where}.{required}"
        )
    wrong = [name for name in foreign if getattr(entry, name) is not None]
    if wrong:
        raise _error(path, f"{where}: {', '.join(wrong)} not allowed for a {transport} server", key=where)
    tags = tuple(dict.fromkeys(entry.tags))
    if any(not t or t != t.lower() for t in tags):
        raise _error(path, f"{where}.tags: tags must be non-empty lowercase strings", key=f"{where}.tags")
    names = [*(entry.env_allowlist or []), *(entry.headers_env or {}).values()]
    bad = [n for n in names if not ENV_NAME.match(n)]
    if bad:
        raise _error(path, f"{where}: invalid environment variable name(s) {bad!r}", key=where)
    max_timeout = settings.tools.max_timeout_ms
    if entry.timeout_ms is not None and entry.timeout_ms > max_timeout:
        raise _error(
            path,
            f"{where}.timeout_ms: {entry.timeout_ms} exceeds tools.max_timeout_ms ({max_timeout})",
            key=where,
        )
    common: dict[str, Any] = {
        "server_id": server_id,
        "transport": transport,
        "config_hash": config_hash(raw),
        "tags": tags,
        "startup_timeout_ms": entry.startup_timeout_ms or DEFAULT_STARTUP_TIMEOUT_MS,
        "timeout_ms": entry.timeout_ms or settings.tools.default_timeout_ms,
        "source": path,
        "trusted": entry.trusted,
    }
    if transport == "http":
        assert entry.url is not None
        _check_url(path, where, entry.url)
        if entry.oauth is not None and any(
            h.lower() == "authorization" for h in (*(entry.headers or {}), *(entry.headers_env or {}))
        ):
            raise _error(
                path, f"{where}: oauth and an Authorization header exclude each other", key=f"{where}.oauth"
            )
        return McpServerConfig(
            **common,
            url=entry.url,
            headers=dict(entry.headers or {}),
            headers_env=dict(entry.headers_env or {}),
            oauth=entry.oauth,
        )
    cwd = project
    if entry.cwd is not None:
        try:
            cwd = resolve_path(expand_placeholders(entry.cwd, home, project), base=project)
        except AgentCoreError as exc:
            raise _error(path, f"{where}.cwd: {exc.message}", key=f"{where}.cwd") from exc
    return McpServerConfig(
        **common,
        command=entry.command,
        args=tuple(entry.args or ()),
        cwd=cwd,
        env=dict(entry.env or {}),
        env_allowlist=tuple(dict.fromkeys(entry.env_allowlist or ())),
    )


def check_overrides(catalog: McpCatalog, settings: Settings) -> None:
    """``tools.mcp.tool_overrides`` keys must name a catalog server; override tags must be lowercase."""
    for key, override in settings.tools.mcp.tool_overrides.items():
        server_id = key.split(".")[1]
        if server_id not in catalog.servers:
            raise ConfigError(
                ErrorCode.config_error,
                f"config key tools.mcp.tool_overrides.{key!r}: server {server_id!r} is not declared in {catalog.path}",
                details={"key": f"tools.mcp.tool_overrides.{key}", "server_id": server_id},
            )
        if override.tags is not None and any(not t or t != t.lower() for t in override.tags):
            raise ConfigError(
                ErrorCode.config_error,
                f"config key tools.mcp.tool_overrides.{key!r}: tags must be non-empty lowercase strings",
                details={"key": f"tools.mcp.tool_overrides.{key}"},
            )


def build_catalog(data: Any, *, path: Path, settings: Settings, home: Path, project: Path) -> McpCatalog:
    """Validates parsed ``mcp.json`` data (see the module docstring)."""
    try:
        parsed = McpFile.model_validate(data, strict=True)
    except ValidationError as exc:
        message, items = format_validation_error(exc, str(path))
        raise ConfigError(
            ErrorCode.config_error,
            message.replace("invalid config", "invalid MCP config", 1),
            details={"path": str(path), "errors": items},
            cause=exc,
        ) from exc
    raw_servers = data["mcpServers"]
    servers = {
        server_id: _server(
            server_id, entry, raw_servers[server_id], path=path, settings=settings, home=home, project=project
        )
        for server_id, entry in parsed.mcpServers.items()
    }
    catalog = McpCatalog(path=path, servers=servers)
    check_overrides(catalog, settings)
    return catalog


def load_mcp_catalog(config: LoadedConfig) -> McpCatalog:
    """Reads ``${SOONG_AGENT_HOME}/mcp.json`` (missing → empty catalog); never connects anything."""
    path = config.home / MCP_FILENAME
    data = read_json_file(path, "MCP config")
    if data is MISSING:
        catalog = McpCatalog(path=path, servers={})
        check_overrides(catalog, config.settings)
        return catalog
    return build_catalog(data, path=path, settings=config.settings, home=config.home, project=config.project)
