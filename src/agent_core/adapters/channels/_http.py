"""A small HTTP/1.1 endpoint for platform callbacks (Slack's Events API and interactivity requests).

One request per connection (``Connection: close``), bodies with ``Content-Length`` only (no chunked
uploads; platforms send small JSON or form bodies), headers at most 16 KiB, bodies at most 1 MiB, 10 s to
send a request. It installs no signal handlers and owns its connection tasks: :func:`serve_http` runs
until cancelled and closes the listening socket on the way out. TLS belongs to a reverse proxy in front.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("agent_core.adapters.channels")

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 1024 * 1024
READ_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names."""
    body: bytes


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"


Handler = Callable[[HttpRequest], Awaitable[HttpResponse]]


async def _read(reader: asyncio.StreamReader) -> HttpRequest | HttpResponse:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        return HttpResponse(431, b"request header too large")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        return HttpResponse(400, b"bad request line")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            return HttpResponse(400, b"bad header")
        headers[name.strip().lower()] = value.strip()
    if "transfer-encoding" in headers:
        return HttpResponse(411, b"send a Content-Length")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        return HttpResponse(400, b"bad Content-Length")
    if length < 0 or length > MAX_BODY_BYTES:
        return HttpResponse(413, b"body too large")
    body = await reader.readexactly(length) if length else b""
    return HttpRequest(parts[0].upper(), parts[1].split("?", 1)[0], headers, body)


def _encode(response: HttpResponse) -> bytes:
    try:
        phrase = http.HTTPStatus(response.status).phrase
    except ValueError:
        phrase = "Status"
    head = (
        f"HTTP/1.1 {response.status} {phrase}\r\n"
        f"Content-Type: {response.content_type}\r\n"
        f"Content-Length: {len(response.body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode("latin-1") + response.body


async def serve_http(host: str, port: int, handler: Handler, on_listening: Callable[[int], None]) -> None:
    """Serves ``handler`` on ``host:port`` until cancelled; ``on_listening(port)`` once bound."""
    connections: set[asyncio.Task[None]] = set()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            connections.add(task)
        try:
            try:
                parsed = await asyncio.wait_for(_read(reader), READ_TIMEOUT_S)
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                return
            if isinstance(parsed, HttpResponse):
                response = parsed
            else:
                try:
                    response = await handler(parsed)
                except Exception:
                    log.exception("channel endpoint: handling %s %s failed", parsed.method, parsed.path)
                    response = HttpResponse(500, b"internal error")
            writer.write(_encode(response))
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            if task is not None:
                connections.discard(task)

    server = await asyncio.start_server(connection, host, port, limit=MAX_HEADER_BYTES)
    try:
        bound = server.sockets[0].getsockname()[1]
        on_listening(int(bound))
        await asyncio.Event().wait()  # until cancelled
    finally:
        server.close()
        for task in list(connections):
            task.cancel()
        if connections:
            await asyncio.gather(*connections, return_exceptions=True)
        with contextlib.suppress(Exception):
            await server.wait_closed()
