"""The ASGI application of ``soong-agent serve``: the API, ``/openapi.json`` and the web UI.

:func:`create_app` wires the security headers (outermost, ``_headers``), auth, the API routes, ``GET /openapi.json``, the UI (``GET /`` and
``/static/*`` from the packaged ``server/static`` directory) and JSON error handlers around a
:class:`~agent_core.server._state.ServerState` whose runtime is open (``_state.open_state``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.server._auth import TokenAuth
from agent_core.server._errors import ApiError, status_for
from agent_core.server._headers import SecurityHeaders
from agent_core.server._openapi import openapi_document
from agent_core.server._routes import API_ROUTES
from agent_core.server._state import ServerState
from agent_core.server._views import VIEW_ROUTES

log = logging.getLogger("agent_core.server")

STATIC_DIR = Path(__file__).with_name("static")


def _error_response(status: int, code: ErrorCode, message: str) -> JSONResponse:
    return ApiError(status, code, message).response()


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    message = {404: "no such route", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
    response = _error_response(exc.status_code, ErrorCode.validation_error, message)
    response.headers.update(exc.headers or {})  # e.g. Allow on 405
    return response


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _core_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AgentCoreError)
    payload = exc.to_payload()
    return JSONResponse({"error": payload.model_dump(mode="json")}, status_code=status_for(exc))


async def _internal_error(request: Request, exc: Exception) -> Response:
    log.exception("internal error serving %s %s", request.method, request.url.path)
    return _error_response(500, ErrorCode.internal_error, f"internal error: {type(exc).__name__}")


def create_app(state: ServerState, token: str) -> Any:
    """The ASGI app (auth middleware around Starlette)."""

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def openapi(request: Request) -> Response:
        return JSONResponse(openapi_document(state.version))

    app = Starlette(
        routes=[
            *API_ROUTES,
            *VIEW_ROUTES,
            Route("/openapi.json", openapi, methods=["GET"]),
            Route("/", index, methods=["GET"]),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        exception_handlers={
            HTTPException: _http_error,
            ApiError: _api_error,
            AgentCoreError: _core_error,
            Exception: _internal_error,
        },
    )
    app.state.server = state
    return SecurityHeaders(TokenAuth(app, token))
