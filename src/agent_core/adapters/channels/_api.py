"""The platforms' HTTP calls, made without the URL or a token ever reaching a log line.

The Telegram Bot API carries the bot token in the URL path, and ``httpx.AsyncClient`` logs every request
URL at INFO level; these calls therefore go straight to an ``httpx.AsyncHTTPTransport`` (no client-level
logging), and errors name the platform method, never the URL. :class:`ChannelError` is what a channel
raises; ``fatal`` ones (a revoked token) stop that channel, the others are retried.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class ChannelError(Exception):
    """A platform call failed; ``retry_after`` when the platform asked to slow down."""

    def __init__(self, message: str, *, fatal: bool = False, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.fatal = fatal
        self.retry_after = retry_after


class PlatformHttp:
    """POSTs JSON (or form data) to a platform API and returns the decoded JSON answer."""

    def __init__(self, platform: str, *, read_timeout_s: float = 30.0) -> None:
        self._platform = platform
        self._transport = httpx.AsyncHTTPTransport(retries=0)
        self._timeout = httpx.Timeout(10.0, read=read_timeout_s).as_dict()

    async def post(
        self, url: str, method: str, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """``(status, parsed JSON)``; network failures and non-JSON answers raise :class:`ChannelError`."""
        request = httpx.Request(
            "POST",
            url,
            content=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json; charset=utf-8", **(headers or {})},
            extensions={"timeout": self._timeout},
        )
        try:
            response = await self._transport.handle_async_request(request)
            try:
                data = await _read_limited(response)
            finally:
                await response.aclose()
        except httpx.TimeoutException:
            raise ChannelError(f"{self._platform} {method}: timed out") from None
        except httpx.HTTPError as exc:
            raise ChannelError(f"{self._platform} {method}: {type(exc).__name__}") from None
        try:
            return response.status_code, json.loads(data)
        except ValueError:
            raise ChannelError(
                f"{self._platform} {method}: HTTP {response.status_code} with a non-JSON body"
            ) from None

    async def aclose(self) -> None:
        await self._transport.aclose()


async def _read_limited(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        size += len(chunk)
        if size > MAX_RESPONSE_BYTES:
            raise httpx.DecodingError("response too large")
        chunks.append(chunk)
    return b"".join(chunks)


def split_text(text: str, limit: int) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at line ends where possible."""
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit)
        if cut < limit // 2:
            cut = limit
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    if rest or not pieces:
        pieces.append(rest)
    return pieces
