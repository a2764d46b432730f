"""The SDK exception tree.

::

    Exception
     └── AgentCoreError            code: ErrorCode (any), to_payload() -> redacted ErrorPayload
          ├── ConfigError          default code config_error
          ├── ProviderError        default code provider_error (carries a ProviderErrorPayload)
          ├── ToolError            default code internal_error
          ├── StorageError         default code storage_error
          ├── SchemaError          default code schema_error
          └── PermissionDeniedError default code permission_denied (never Python's PermissionError)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from agent_core.errors.codes import ErrorCode
from agent_core.errors.payloads import ErrorPayload, ProviderErrorPayload

if TYPE_CHECKING:
    from agent_core._redaction import Redactor


class AgentCoreError(Exception):
    """Base of every expected SDK error."""

    default_code: ClassVar[ErrorCode] = ErrorCode.internal_error

    def __init__(
        self,
        code: ErrorCode | str | None = None,
        message: str = "",
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
        cause: BaseException | None = None,
    ) -> None:
        self.code: ErrorCode = ErrorCode(code) if code is not None else self.default_code
        self.message = message or self.code.value
        self.retryable = retryable
        self.details: dict[str, Any] = dict(details or {})
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"[{self.code.value}] {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code.value!r}, message={self.message!r})"

    def to_payload(self, redactor: Redactor | None = None) -> ErrorPayload:
        """Returns a redacted :class:`ErrorPayload` (no traceback, secrets replaced)."""
        return ErrorPayload(
            code=self.code, message=self.message, retryable=self.retryable, details=self.details
        ).redacted_copy(redactor)


class ConfigError(AgentCoreError):
    default_code = ErrorCode.config_error


class ProviderError(AgentCoreError):
    """Provider failure; ``payload`` is the normalised :class:`ProviderErrorPayload`."""

    default_code = ErrorCode.provider_error

    def __init__(
        self,
        code: ErrorCode | str | None = None,
        message: str = "",
        *,
        retryable: bool = False,
        details: dict[str, Any] | None = None,
        cause: BaseException | None = None,
        payload: ProviderErrorPayload | None = None,
    ) -> None:
        if payload is not None:
            code = code or payload.code
            message = message or payload.message
            retryable = retryable or payload.retryable
        super().__init__(code, message, retryable=retryable, details=details, cause=cause)
        if payload is None:
            payload = ProviderErrorPayload(
                type="internal" if self.code == ErrorCode.internal_error else "provider",
                code=self.code.value,
                message=self.message,
                retryable=self.retryable,
            )
        self.payload: ProviderErrorPayload = payload


class ToolError(AgentCoreError):
    default_code = ErrorCode.internal_error


class StorageError(AgentCoreError):
    default_code = ErrorCode.storage_error


class SchemaError(AgentCoreError):
    default_code = ErrorCode.schema_error


class PermissionDeniedError(AgentCoreError):
    default_code = ErrorCode.permission_denied
