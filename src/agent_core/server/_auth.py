"""Token auth and same-origin enforcement for ``soong-agent serve`` (docs/serve.md#authentication, Decision).

* every ``/api/*`` request needs the token: ``Authorization: Bearer <t>`` or the ``soong_token`` cookie;
  a wrong or missing token → 401 before any handler runs (nothing changes). ``?token=`` is never
  accepted there (URLs end up in logs, history and ``Referer`` headers);
* ``GET /?token=<t>`` (only there) with the right token sets the token as an ``HttpOnly;
  SameSite=Strict`` cookie and redirects to ``/`` (the token leaves the address bar); the UI's static
  files need no token (they hold no data);
* cross-origin requests are refused with 403: an ``Origin`` header that is not this server's own origin,
  or ``Sec-Fetch-Site: cross-site``; no CORS header is ever sent (preflights get 403 too).
"""

from __future__ import annotations

import hmac
import json
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

COOKIE = "soong_token"


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}


def _error(status: int, message: str, code: str = "permission_denied") -> tuple[int, bytes]:
    payload = {"error": {"type": "AgentCoreError", "code": code, "message": message, "retryable": False}}
    payload["error"].update(details={}, redacted=False)
    return status, json.dumps(payload).encode()


class TokenAuth:
    """ASGI middleware in front of the whole app."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self._token)

    def _presented(self, scope: Scope, headers: dict[str, str]) -> list[str]:
        found: list[str] = []
        auth = headers.get("authorization", "")
        if auth[:7].lower() == "bearer ":
            found.append(auth[7:].strip())
        if "cookie" in headers:
            cookie: SimpleCookie = SimpleCookie()
            try:
                cookie.load(headers["cookie"])
            except Exception:
                cookie = SimpleCookie()
            if COOKIE in cookie:
                found.append(cookie[COOKIE].value)
        return found

    @staticmethod
    def _cross_origin(scope: Scope, headers: dict[str, str]) -> bool:
        if headers.get("sec-fetch-site") == "cross-site":
            return True
        origin = headers.get("origin")
        if origin is None:
            return False
        return origin != f"http://{headers.get('host', '')}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        path: str = scope["path"]
        if self._cross_origin(scope, headers) or scope.get("method") == "OPTIONS":
            await _send(send, *_error(403, "cross-origin requests are refused"))
            return
        presented = self._presented(scope, headers)
        valid = any(self._ok(t) for t in presented)
        if path.startswith("/api/") and not valid:
            await _send(send, *_error(401, "missing or wrong token (Authorization: Bearer <token>)"))
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if (
            path == "/"
            and scope.get("method") == "GET"
            and query.get("token")
            and self._ok(query["token"][0])
        ):
            cookie = f"{COOKIE}={self._token.decode()}; HttpOnly; SameSite=Strict; Path=/"
            await _send(send, 303, b"", extra=[(b"location", b"/"), (b"set-cookie", cookie.encode())])
            return
        await self.app(scope, receive, send)


async def _send(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    headers: list[Any] = [(b"content-length", str(len(body)).encode()), *(extra or [])]
    if body:
        headers.append((b"content-type", b"application/json"))
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
