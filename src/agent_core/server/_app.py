"""The ASGI application of ``soong-agent serve``: one open :class:`AgentRuntime`, the API, the web UI.

:func:`create_app` wires auth (outermost), the API routes, ``GET /openapi.json``, the UI (``GET /`` and
``/static/*`` from the packaged ``server/static`` directory) and JSON error handlers. The caller owns the
runtime: it must be open (``await open_state(...)``) before the app serves and closed afterwards.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent_core.api.handles import RunHandle
from agent_core.api.runtime import AgentRuntime
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.server._approvals import ApprovalBroker
from agent_core.server._auth import TokenAuth
from agent_core.server._openapi import openapi_document
from agent_core.server._routes import API_ROUTES, ApiError, status_for
from agent_core.server._sse import RunFeeds
from agent_core.storage.approvals import ApprovalStore
from agent_core.storage.sqlite import StorageManager
from agent_core.types.runtime import CancelResult

log = logging.getLogger("agent_core.server")

STATIC_DIR = Path(__file__).with_name("static")


def _version() -> str:
    try:
        return metadata.version("soong-agent")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass(eq=False)
class ServerState:
    """Everything a request handler needs."""

    runtime: AgentRuntime
    approvals: ApprovalBroker
    feeds: RunFeeds = field(default_factory=RunFeeds)
    version: str = field(default_factory=_version)

    @property
    def storage(self) -> StorageManager:
        manager = self.runtime._manager
        if manager is None:
            raise AgentCoreError(ErrorCode.internal_error, "the runtime is not open")
        return manager.services.storage

    async def cancel(self, run_id: str) -> CancelResult:
        """Cancels a run of this process (root or child); a run not live here is reported as it stands."""
        handle = self.feeds.handles.get(run_id)
        manager = self.runtime._manager
        if handle is None and manager is not None and run_id in manager.runs:
            handle = RunHandle(self.runtime, manager.runs[run_id])
        if handle is not None:
            return await handle.cancel()
        record = await self.storage.get_run(run_id)
        if record is None:
            raise ApiError(404, ErrorCode.validation_error, f"unknown run {run_id!r}")
        return CancelResult(run_id=run_id, status=record.status, already_terminal=record.status.terminal)


async def open_state(runtime: AgentRuntime, approvals: ApprovalBroker) -> ServerState:
    """Opens ``runtime`` and expires pending approvals left by an earlier process (never allowed)."""
    await runtime.__aenter__()
    state = ServerState(runtime=runtime, approvals=approvals)
    approvals.attach(runtime, ApprovalStore(state.storage))
    expired = await approvals.expire_all()
    if expired:
        log.warning("%d pending permission request(s) of an earlier server process expired", expired)
    return state


async def close_state(state: ServerState) -> None:
    """Expires pending approvals (never allowed later), then closes the runtime (cancels its runs)."""
    try:
        with contextlib.suppress(AgentCoreError):
            await state.approvals.expire_all()
        await state.runtime.close()
    finally:
        await state.feeds.close()


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
    return TokenAuth(app, token)
