"""The SDK exception tree: one class for every :class:`ErrorCode`, so callers branch with ``except``.

::

    Exception
     └── AgentCoreError                    code: ErrorCode, to_payload() -> redacted ErrorPayload
          ├── InvalidArgumentError (+ValueError)      validation_error
          │    ├── InvalidArgumentTypeError (+TypeError)
          │    └── NotFoundError                      an unknown session, run, node, request ...
          │         └── SessionNotFoundError
          ├── SchemaError (+ValueError)                schema_error
          ├── ConfigError                              config_error
          ├── PermissionDeniedError                    permission_denied (never Python's PermissionError)
          ├── OperationTimeoutError                    timeout
          ├── OperationCancelledError                  cancelled
          ├── InternalError                            internal_error
          ├── ToolError                                (default internal_error) a tool call's failure
          │    ├── ToolNotAvailableError               tool_not_available
          │    ├── FileOperationError                  path_conflict, file_not_found, text_not_found,
          │    │                                       ambiguous_edit, patch_*, write_outside_allowed_roots
          │    ├── MemoryOperationError                memory_recall_failed, memory_write_failed
          │    └── SkillError                          skill_not_found, skill_load_failed
          ├── ProviderError                            provider_error (carries a ProviderErrorPayload)
          │    ├── ProviderAuthError                   provider_auth_failed
          │    ├── ProviderRateLimitError              provider_rate_limited
          │    ├── ProviderTimeoutError                provider_timeout
          │    └── UnsupportedCapabilityError          unsupported_capability
          ├── StorageError                             storage_error
          │    ├── MigrationError                      migration_failed
          │    └── SessionBusyError                    session_active
          ├── AgentDefinitionError (+ValueError)       invalid_agent_definition, duplicate_agent_definition,
          │                                            invalid_agent_override
          ├── ChildAgentLimitError                     child_agent_limit_exceeded
          ├── WorkerUnavailableError                   worker_busy, worker_not_available, worker_pool_busy
          └── TaskError                                task_terminal, task_not_dispatchable, dependency_cycle
               ├── TaskNotFoundError                   task_not_found
               ├── TaskWalUnavailableError             task_wal_unavailable
               └── StepError                           step_not_ready, step_already_claimed(_by_run),
                    │                                  step_has_dependents, no_step_claimed
                    └── StepNotFoundError              step_not_found

Every code maps to exactly one class (:func:`error_class`); the project raises that class (or a subclass)
for the code, and a code known only at run time (a stored run error, a provider payload) becomes an
exception through :func:`error_for` / :meth:`AgentCoreError.from_payload`. ``code`` stays on every
exception, so code written against the codes keeps working. The constructor is the same for every class:
``Class(code=None, message="", *, retryable=False, details=None, cause=None)``; an omitted code is the
class's ``default_code``.

A caller's misuse of the SDK (a wrong argument value or type) raises :class:`InvalidArgumentError` (a
``ValueError``) or :class:`InvalidArgumentTypeError` (also a ``TypeError``) with code ``validation_error``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from agent_core.errors.codes import ErrorCode
from agent_core.errors.payloads import ErrorPayload, ProviderErrorPayload

if TYPE_CHECKING:
    from agent_core._redaction import Redactor

E = TypeVar("E", bound="AgentCoreError")


class AgentCoreError(Exception):
    """Base of every expected SDK error; ``code`` says which (the class says which family)."""

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

    @staticmethod
    def from_payload(payload: ErrorPayload) -> AgentCoreError:
        """The exception of ``payload``'s code (:func:`error_class`) carrying its message and details."""
        return error_for(
            payload.code, payload.message, retryable=payload.retryable, details=dict(payload.details)
        )


# ---- common ----------------------------------------------------------------------------------------
class InvalidArgumentError(AgentCoreError, ValueError):
    """Input that cannot be accepted: a caller's argument, a tool call's arguments, an unknown id."""

    default_code = ErrorCode.validation_error


class InvalidArgumentTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type (also a ``TypeError``)."""


class NotFoundError(InvalidArgumentError):
    """An id that names nothing (a session, run, node, schedule, permission request ...)."""


class SessionNotFoundError(NotFoundError):
    """An unknown ``session_id``; ``details["session_id"]`` names it."""


class SchemaError(AgentCoreError, ValueError):
    """Data or a schema that cannot be converted or is outside the supported subset."""

    default_code = ErrorCode.schema_error


class ConfigError(AgentCoreError):
    """Configuration, paths or packaged assets that prevent startup (the message names the key or path)."""

    default_code = ErrorCode.config_error


class PermissionDeniedError(AgentCoreError):
    """An agent action the permission policy, the user or a hook refused (never Python's
    ``PermissionError``)."""

    default_code = ErrorCode.permission_denied


class OperationTimeoutError(AgentCoreError):
    """An operation that ran past its time limit."""

    default_code = ErrorCode.timeout


class OperationCancelledError(AgentCoreError):
    """An operation stopped because its run (or the caller) cancelled it."""

    default_code = ErrorCode.cancelled


class InternalError(AgentCoreError):
    """A failure of the SDK itself or of something it relies on that no other class describes."""

    default_code = ErrorCode.internal_error


# ---- tools -----------------------------------------------------------------------------------------
class ToolError(AgentCoreError):
    """A tool call's failure, returned to the model as the call's error result; a custom tool's handler
    may raise it with any code."""

    default_code = ErrorCode.internal_error


class ToolNotAvailableError(ToolError):
    default_code = ErrorCode.tool_not_available


class FileOperationError(ToolError):
    """A file tool's refusal or failure: a missing file, an edit that does not apply, a path outside the
    allowed roots ... (``code`` says which)."""

    default_code = ErrorCode.file_not_found


class MemoryOperationError(ToolError):
    """Long-term memory could not be recalled or written."""

    default_code = ErrorCode.memory_write_failed


class SkillError(ToolError):
    """A skill that does not exist or cannot be loaded."""

    default_code = ErrorCode.skill_load_failed


# ---- providers -------------------------------------------------------------------------------------
class ProviderError(AgentCoreError):
    """Provider failure; ``payload`` is the normalised :class:`ProviderErrorPayload`.

    :meth:`for_payload` builds the subclass of the payload's code (auth, rate limit, timeout, capability).
    """

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
            code = code or _known_code(payload.code) or self.default_code
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

    @staticmethod
    def for_payload(payload: ProviderErrorPayload, *, cause: BaseException | None = None) -> ProviderError:
        """The :class:`ProviderError` subclass of ``payload.code`` (``ProviderError`` itself for a code
        outside the provider family)."""
        code = _known_code(payload.code)
        cls = _CLASSES.get(code) if code is not None else None
        if cls is None or not issubclass(cls, ProviderError):
            cls = ProviderError
        return cls(code, payload=payload, cause=cause)


class ProviderAuthError(ProviderError):
    """The provider refused the credentials (never retried)."""

    default_code = ErrorCode.provider_auth_failed


class ProviderRateLimitError(ProviderError):
    """The provider's rate limit held after the retries (``payload.retry_after_ms`` when it said)."""

    default_code = ErrorCode.provider_rate_limited


class ProviderTimeoutError(ProviderError):
    default_code = ErrorCode.provider_timeout


class UnsupportedCapabilityError(ProviderError):
    """The model or adapter lacks a capability the request needs (``payload.capability``)."""

    default_code = ErrorCode.unsupported_capability


# ---- storage and sessions --------------------------------------------------------------------------
class StorageError(AgentCoreError):
    """The session store (or an artifact file) could not be read or written."""

    default_code = ErrorCode.storage_error


class MigrationError(StorageError):
    default_code = ErrorCode.migration_failed


class SessionBusyError(StorageError):
    """The session has a queued or running run (or another process holds it) so the operation cannot
    proceed now; ``details["session_id"]`` names it."""

    default_code = ErrorCode.session_active


# ---- agents ----------------------------------------------------------------------------------------
class AgentDefinitionError(AgentCoreError, ValueError):
    """An invalid, duplicate or badly overridden agent definition."""

    default_code = ErrorCode.invalid_agent_definition


class ChildAgentLimitError(AgentCoreError):
    """A child agent would exceed the configured depth or concurrency limits."""

    default_code = ErrorCode.child_agent_limit_exceeded


class WorkerUnavailableError(AgentCoreError):
    """No worker (or pool) can take the dispatch now: busy, unknown or at capacity."""

    default_code = ErrorCode.worker_not_available


# ---- the Task board --------------------------------------------------------------------------------
class TaskError(AgentCoreError):
    """A Task board operation refused in the Task's current state."""

    default_code = ErrorCode.task_terminal


class TaskNotFoundError(TaskError):
    default_code = ErrorCode.task_not_found


class TaskWalUnavailableError(TaskError):
    """The Task's write-ahead log cannot be read or appended."""

    default_code = ErrorCode.task_wal_unavailable


class StepError(TaskError):
    """A step operation refused in the step's current state (not ready, claimed, has dependents ...)."""

    default_code = ErrorCode.step_not_ready


class StepNotFoundError(StepError):
    default_code = ErrorCode.step_not_found


_CLASSES: Mapping[ErrorCode, type[AgentCoreError]] = {
    ErrorCode.validation_error: InvalidArgumentError,
    ErrorCode.schema_error: SchemaError,
    ErrorCode.config_error: ConfigError,
    ErrorCode.permission_denied: PermissionDeniedError,
    ErrorCode.tool_not_available: ToolNotAvailableError,
    ErrorCode.timeout: OperationTimeoutError,
    ErrorCode.cancelled: OperationCancelledError,
    ErrorCode.internal_error: InternalError,
    ErrorCode.provider_error: ProviderError,
    ErrorCode.unsupported_capability: UnsupportedCapabilityError,
    ErrorCode.provider_auth_failed: ProviderAuthError,
    ErrorCode.provider_rate_limited: ProviderRateLimitError,
    ErrorCode.provider_timeout: ProviderTimeoutError,
    ErrorCode.storage_error: StorageError,
    ErrorCode.migration_failed: MigrationError,
    ErrorCode.session_active: SessionBusyError,
    ErrorCode.path_conflict: FileOperationError,
    ErrorCode.file_not_found: FileOperationError,
    ErrorCode.text_not_found: FileOperationError,
    ErrorCode.ambiguous_edit: FileOperationError,
    ErrorCode.patch_apply_failed: FileOperationError,
    ErrorCode.patch_path_mismatch: FileOperationError,
    ErrorCode.write_outside_allowed_roots: FileOperationError,
    ErrorCode.invalid_agent_definition: AgentDefinitionError,
    ErrorCode.duplicate_agent_definition: AgentDefinitionError,
    ErrorCode.invalid_agent_override: AgentDefinitionError,
    ErrorCode.child_agent_limit_exceeded: ChildAgentLimitError,
    ErrorCode.worker_busy: WorkerUnavailableError,
    ErrorCode.worker_not_available: WorkerUnavailableError,
    ErrorCode.worker_pool_busy: WorkerUnavailableError,
    ErrorCode.task_not_found: TaskNotFoundError,
    ErrorCode.task_terminal: TaskError,
    ErrorCode.task_not_dispatchable: TaskError,
    ErrorCode.dependency_cycle: TaskError,
    ErrorCode.step_not_found: StepNotFoundError,
    ErrorCode.step_not_ready: StepError,
    ErrorCode.step_already_claimed: StepError,
    ErrorCode.step_already_claimed_by_run: StepError,
    ErrorCode.step_has_dependents: StepError,
    ErrorCode.no_step_claimed: StepError,
    ErrorCode.task_wal_unavailable: TaskWalUnavailableError,
    ErrorCode.memory_recall_failed: MemoryOperationError,
    ErrorCode.memory_write_failed: MemoryOperationError,
    ErrorCode.skill_not_found: SkillError,
    ErrorCode.skill_load_failed: SkillError,
}


def error_class(code: ErrorCode | str) -> type[AgentCoreError]:
    """The exception class of ``code`` (raise it, or a subclass of it, for that code)."""
    return _CLASSES[ErrorCode(code)]


def error_for(
    code: ErrorCode | str,
    message: str = "",
    *,
    retryable: bool = False,
    details: dict[str, Any] | None = None,
    cause: BaseException | None = None,
) -> AgentCoreError:
    """An instance of ``code``'s class: for a code known only at run time (a stored run error ...)."""
    cls = error_class(code)
    return cls(code, message, retryable=retryable, details=details, cause=cause)


def _known_code(value: str) -> ErrorCode | None:
    try:
        return ErrorCode(value)
    except ValueError:
        return None
