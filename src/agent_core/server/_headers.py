"""Response headers every ``soong-agent serve`` response carries (issue 31 item 10).

The UI must not be framed by another page (clickjacking: another origin, e.g. a page on another
127.0.0.1 port, could overlay the signed-in UI and trick clicks onto "Allow"): ``X-Frame-Options: DENY``
and a ``Content-Security-Policy`` whose ``frame-ancestors 'none'`` (a ``<meta>`` CSP cannot say that).
``GET /`` and ``/static/*`` get the UI's full policy; API and other responses a deny-everything one.
``X-Content-Type-Options: nosniff`` and ``Referrer-Policy: no-referrer`` go everywhere.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

UI_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
API_POLICY = "default-src 'none'; frame-ancestors 'none'"


def _is_ui(path: str) -> bool:
    return path == "/" or path.startswith("/static/")


class SecurityHeaders:
    """ASGI middleware adding the headers above to every HTTP response (outermost, so the auth
    middleware's own 401/403/303 answers carry them too)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        policy = (UI_POLICY if _is_ui(scope.get("path", "")) else API_POLICY).encode()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _OWN]
                headers += [
                    (b"x-frame-options", b"DENY"),
                    (b"content-security-policy", policy),
                    (b"x-content-type-options", b"nosniff"),
                    (b"referrer-policy", b"no-referrer"),
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


_OWN = frozenset(
    {b"x-frame-options", b"content-security-policy", b"x-content-type-options", b"referrer-policy"}
)
