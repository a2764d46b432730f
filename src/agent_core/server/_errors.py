"""Error responses of ``soong-agent serve``: ``{"error": ErrorPayload}`` with an HTTP status."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from agent_core.errors import AgentCoreError, ErrorCode


class ApiError(Exception):
    """An error response: HTTP ``status`` with an ``ErrorPayload`` body."""

    def __init__(self, status: int, code: ErrorCode, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details or {}

    def response(self) -> JSONResponse:
        payload = AgentCoreError(self.code, self.message, details=self.details).to_payload()
        return JSONResponse({"error": payload.model_dump(mode="json")}, status_code=self.status)


def status_for(exc: AgentCoreError) -> int:
    if exc.code in (ErrorCode.session_active, ErrorCode.path_conflict):
        return 409
    if exc.code in (ErrorCode.validation_error, ErrorCode.schema_error):
        return 400
    return 500
