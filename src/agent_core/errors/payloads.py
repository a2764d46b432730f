"""Error payload models: :class:`ErrorPayload` (docs/errors.md#errorpayload) and
:class:`ProviderErrorPayload`.

They sit in ``errors/`` (the bottom layer) so :class:`~agent_core.errors.AgentCoreError` can build them
without importing ``types/``; ``types.content`` and ``types.model`` re-export them under their contract
paths.
"""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Any

from pydantic import Field, model_validator

from agent_core._redaction import Redactor, default_redactor
from agent_core.errors.codes import ErrorCode
from agent_core.types.base import StrictModel


class ErrorPayload(StrictModel):
    """Structured, traceback-free error sent to the model, events and ``runs.error_json``."""

    type: str = ""
    code: ErrorCode
    message: str
    retryable: bool = False
    details: dict[str, Any] = Field(default_factory=dict)
    redacted: bool = False

    @model_validator(mode="after")
    def _default_type(self) -> "ErrorPayload":
        if not self.type:
            self.type = self.code.value
        return self

    def redacted_copy(self, redactor: Redactor | None = None) -> "ErrorPayload":
        """Copy with secret values replaced in message and details, flagged ``redacted=True``."""
        r = redactor or default_redactor
        return self.model_copy(
            update={"message": r.text(self.message), "details": r.value(self.details), "redacted": True}
        )


class ProviderErrorPayload(StrictModel):
    type: str
    code: str
    message: str
    retryable: bool
    raw: dict[str, Any] | None = None
    provider: str | None = None
    model: str | None = None
    capability: str | None = None
    request_feature: str | None = None
    status_code: int | None = None
    retry_after_ms: int | None = None
    prompt_tokens: int | None = None
    """For ``type="prompt_too_long"``: the prompt size the provider reported, when it said."""
    context_window: int | None = None
    """For ``type="prompt_too_long"``: the model's window the provider reported, when it said."""
