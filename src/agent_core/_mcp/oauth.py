"""OAuth 2.1 for remote (HTTP) MCP servers, through the ``mcp`` SDK's auth client (``docs/hooks-and-mcp.md``).

Contract:

- A server with ``"oauth": {...}`` in ``mcp.json`` connects with the SDK's ``OAuthClientProvider`` as the
  ``httpx.Auth`` of its connection: discovery of the protected resource and authorization server metadata,
  dynamic client registration (unless ``client_id`` names a registered client), authorization code with
  PKCE (S256), token refresh, and re-authorization when the server answers ``401``.
- Tokens and the client registration live in ``<home>/mcp-oauth/<server_id>.json`` (directory 0700, file
  0600, replaced atomically), with the absolute expiry time, so a restarted runtime refreshes an expired
  token instead of asking again. Every token value is registered with the runtime's redactor; none is
  logged, stored elsewhere, put into an event or sent to a model.
- Authorization: the user is sent to the authorization URL by ``opener(server_id, url)`` (default: one
  WARNING log line naming the server and the URL, which the CLI shows on stderr); the redirect comes back
  to a listener on ``http://127.0.0.1:<port>/callback`` (``redirect_port``, else the port of the stored
  registration, else a free one), which answers the browser and hands code and state to the SDK (which
  checks the state). The listener runs only while an authorization waits, at most ``timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from agent_core._mcp.catalog import McpServerConfig
from agent_core._private_fs import make_private_dirs
from agent_core._redaction import Redactor

logger = logging.getLogger(__name__)

Opener = Callable[[str, str], Awaitable[None]]
"""``(server_id, authorization_url)``: sends the user to the authorization page."""
AUTHORIZE_TIMEOUT_S = 300.0


async def log_opener(server_id: str, url: str) -> None:
    logger.warning("MCP server %s needs authorization: open %s", server_id, url)


def token_path(home: Path, server_id: str) -> Path:
    return home / "mcp-oauth" / f"{server_id}.json"


class FileTokenStorage(TokenStorage):
    """The SDK's ``TokenStorage`` on one private JSON file (see the module docstring)."""

    def __init__(self, path: Path, server_url: str, redactor: Redactor) -> None:
        self.path = path
        self._url = server_url
        self._redactor = redactor
        self._data = self._load()
        for secret in self._secrets():
            redactor.add_secret(secret)

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("server_url") != self._url:
            return {}  # another server's registration: start over
        return data

    def _secrets(self) -> list[str]:
        tokens = self._data.get("tokens") or {}
        client = self._data.get("client_info") or {}
        values = [tokens.get("access_token"), tokens.get("refresh_token"), client.get("client_secret")]
        return [v for v in values if isinstance(v, str) and v]

    def _save(self) -> None:
        make_private_dirs(self.path.parent)
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({**self._data, "server_url": self._url}, handle)
            os.replace(temp, self.path)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise

    @property
    def expires_at(self) -> float | None:
        value = self._data.get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    @property
    def redirect_uri(self) -> str | None:
        client = self._data.get("client_info") or {}
        uris = client.get("redirect_uris") or []
        return str(uris[0]) if uris else None

    def seed_client(self, client_id: str, redirect_uri: str) -> None:
        """A client registered beforehand (no dynamic registration); a stored registration wins."""
        if self._data.get("client_info") is None:
            self._data["client_info"] = {
                "client_id": client_id,
                "redirect_uris": [redirect_uri],
                "token_endpoint_auth_method": "none",
            }

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._data.get("tokens")
        return OAuthToken.model_validate(tokens) if isinstance(tokens, dict) else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._data["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        expires = time.time() + tokens.expires_in if tokens.expires_in is not None else None
        self._data["expires_at"] = expires
        for secret in self._secrets():
            self._redactor.add_secret(secret)
        self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = self._data.get("client_info")
        return OAuthClientInformationFull.model_validate(info) if isinstance(info, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._data["client_info"] = client_info.model_dump(mode="json", exclude_none=True)
        for secret in self._secrets():
            self._redactor.add_secret(secret)
        self._save()


def _first(query: dict[str, list[str]], key: str) -> str | None:
    values = query.get(key)
    return values[0] if values else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedirectListener:
    """Receives the authorization redirect on ``127.0.0.1:<port>/callback`` (one at a time)."""

    def __init__(self, port: int, timeout_s: float) -> None:
        self.port = port
        self._timeout_s = timeout_s
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[tuple[str, str | None]] | None = None

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self.port}/callback"

    async def start(self) -> None:
        """Listens before the user is sent away, so the redirect cannot arrive too early."""
        await self.stop()
        self._result = asyncio.get_running_loop().create_future()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", self.port, limit=16 * 1024)

    async def wait(self) -> tuple[str, str | None]:
        if self._result is None:
            await self.start()
        assert self._result is not None
        try:
            # asyncio.wait leaves the shared future alone when the wait ends (no shield needed)
            await asyncio.wait({self._result}, timeout=self._timeout_s)
            if not self._result.done():
                raise TimeoutError
            return self._result.result()
        finally:
            await self.stop()

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = (await asyncio.wait_for(reader.readline(), 10)).decode("latin-1")
            parts = line.split(" ")
            target = urlsplit(parts[1]) if len(parts) >= 2 else urlsplit("/")
            query = parse_qs(target.query)
            code, state, error = (_first(query, k) for k in ("code", "state", "error"))
            if target.path != "/callback" or (code is None and error is None):
                status, body = "404 Not Found", "not the authorization callback"
            elif error is not None:
                status, body = "400 Bad Request", "authorization was refused; you can close this window"
                if self._result is not None and not self._result.done():
                    self._result.set_exception(PermissionError(f"authorization refused: {error}"))
            else:
                status, body = "200 OK", "soong-agent is authorized; you can close this window"
                if self._result is not None and not self._result.done() and code is not None:
                    self._result.set_result((code, state))
            payload = body.encode()
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeError):
            pass
        finally:
            writer.close()


def oauth_provider(
    server: McpServerConfig,
    home: Path,
    redactor: Redactor,
    opener: Opener | None = None,
    *,
    timeout_s: float = AUTHORIZE_TIMEOUT_S,
) -> OAuthClientProvider:
    """The ``httpx.Auth`` of an OAuth server's connection (see the module docstring)."""
    assert server.url is not None and server.oauth is not None
    settings = server.oauth
    storage = FileTokenStorage(token_path(home, server.server_id), server.url, redactor)
    port = settings.redirect_port
    if port is None and storage.redirect_uri is not None:
        port = urlsplit(storage.redirect_uri).port
    listener = RedirectListener(port or _free_port(), timeout_s)
    open_url = opener or log_opener

    async def redirect(url: str) -> None:
        await listener.start()
        await open_url(server.server_id, url)

    metadata = OAuthClientMetadata(
        redirect_uris=[listener.redirect_uri],
        client_name=settings.client_name,
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(settings.scopes) if settings.scopes else None,
    )
    if settings.client_id is not None:
        storage.seed_client(settings.client_id, listener.redirect_uri)
    provider = OAuthClientProvider(
        server.url,
        metadata,
        storage,
        redirect_handler=redirect,
        callback_handler=listener.wait,
        timeout=timeout_s,
    )
    # the SDK keeps the expiry only for tokens it obtained in this process: carry the stored one over,
    # so an expired stored token is refreshed rather than sent
    provider.context.token_expiry_time = storage.expires_at
    return provider
