"""Model configuration types: the ``[model]`` table, partial profiles and the resolved model config."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agent_core.types.base import FrozenModel, StrictModel

ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
"""OpenAI's ``reasoning_effort`` values (``none`` and ``xhigh`` exist only on some models)."""
InputModality = Literal["text", "image", "pdf"]
DEFAULT_IMAGE_MAX_EDGE_PX = 1568
"""Anthropic's recommended long edge (larger images are downscaled by the API anyway); OpenAI's high
detail works on at most 2048 x 768."""
DEFAULT_IMAGE_MAX_BYTES = 5 * 1024 * 1024
"""Anthropic's per-image limit (OpenAI takes up to 20 MB)."""
DEFAULT_PDF_MAX_BYTES = 32 * 1024 * 1024
"""Anthropic's request limit for a PDF (OpenAI: 50 MB per request)."""


def _temperature(value: Any) -> Any:
    """A number, ``"default"`` or nothing: one clear error for anything else (not one per union arm)."""
    if isinstance(value, str) and value != "default":
        raise ValueError('must be a number or "default" (send no temperature)')
    return value


def _text_only() -> list[InputModality]:
    return ["text"]


def section_default() -> Any:
    """The default of a table-valued key: an empty table, validated like one given in the file."""
    return {}


class RetryConfig(FrozenModel):
    max_attempts: int = Field(default=3, ge=1)
    initial_backoff_ms: int = Field(default=500, ge=1)
    max_backoff_ms: int = Field(default=8000, ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> "RetryConfig":
        if self.initial_backoff_ms > self.max_backoff_ms:
            raise ValueError("retry.initial_backoff_ms must be <= retry.max_backoff_ms")
        return self


class PartialRetryConfig(StrictModel):
    max_attempts: int | None = Field(default=None, ge=1)
    initial_backoff_ms: int | None = Field(default=None, ge=1)
    max_backoff_ms: int | None = Field(default=None, ge=1)


class ModelSection(StrictModel):
    """``[model]``: only ``provider`` and ``name`` are required."""

    provider: str
    base_url: str = ""
    api_key_env: str = ""
    name: str
    context_window: int = Field(default=8192, ge=1)
    max_output_tokens: int = Field(default=4096, ge=1)
    temperature: float | Literal["default"] | None = 0.2
    """Sampling temperature; ``"default"`` sends none (the model's default; reasoning models accept
    only that)."""
    timeout_ms: int = Field(default=60000, ge=1)
    retry: RetryConfig = Field(default_factory=section_default, validate_default=True)
    reasoning_effort: ReasoningEffort | None = None
    """OpenAI (and compatible) reasoning models: ``reasoning_effort`` (Chat Completions) or
    ``reasoning.effort`` (Responses API). Setting it marks the model as a reasoning model: the output
    limit goes out as ``max_completion_tokens`` and no temperature is sent."""
    thinking_budget_tokens: int | None = Field(default=None, ge=1)
    """Anthropic extended thinking (``thinking: {type: enabled, budget_tokens}``; at least 1024 and
    below ``max_output_tokens``); Ollama sends ``think: true`` when it is set."""
    openai_token_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    """The Chat Completions field for ``max_output_tokens``; unset: ``max_completion_tokens`` when
    ``reasoning_effort`` is set, else ``max_tokens`` (what most compatible servers take)."""
    input_modalities: list[InputModality] = Field(default_factory=_text_only)
    """What the model reads besides text: ``"image"``, ``"pdf"``. An image or PDF sent to a model
    without it fails ``unsupported_capability`` (or goes to a ``fallback_profiles`` model)."""
    fallback_profiles: list[str] = Field(default_factory=list)
    """``[model_overrides]`` profiles tried in order when a call still fails after its retries with a
    retriable error (5xx, overload, timeout, rate limit) or ``unsupported_capability``."""
    image_max_edge_px: int = Field(default=DEFAULT_IMAGE_MAX_EDGE_PX, ge=16)
    """Images with a longer edge are downscaled when stored (needs the ``images`` extra, Pillow)."""
    image_max_bytes: int = Field(default=DEFAULT_IMAGE_MAX_BYTES, ge=1024)
    """Images larger than this are downscaled (re-encoded) when stored, or refused without Pillow."""
    pdf_max_bytes: int = Field(default=DEFAULT_PDF_MAX_BYTES, ge=1024)
    """PDFs larger than this are refused."""
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million input tokens (usage cost and ``limits.max_cost_usd``); unset: no cost."""
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    price_cache_read_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million input tokens read from the provider's prompt cache; unset: Anthropic 0.1x the
    input price, other providers the input price."""
    price_cache_write_per_mtok: float | None = Field(default=None, ge=0)
    """USD per million input tokens written to the prompt cache; unset: Anthropic 1.25x the input price
    (2x with ``prompt_cache_ttl = "1h"``), other providers the input price."""
    prompt_cache: Literal["auto", "off"] = "auto"
    """``auto``: ask the provider to cache the prompt prefix (Anthropic ``cache_control`` breakpoints,
    OpenAI ``prompt_cache_key``, llama.cpp ``cache_prompt``); ``off``: send no cache hints."""
    prompt_cache_ttl: Literal["5m", "1h"] = "5m"
    """Lifetime of Anthropic cache entries (``1h`` costs more per write; see the price keys)."""
    openai_cache_fields: bool = True
    """OpenAI-protocol servers: send ``prompt_cache_key`` (and, to a server on this machine or a private
    network, llama.cpp's ``cache_prompt``). Set false for a server that rejects unknown request fields."""

    _check_temperature = field_validator("temperature", mode="before")(_temperature)

    @field_validator("input_modalities")
    @classmethod
    def _with_text(cls, value: list[str]) -> list[str]:
        if "text" not in value:
            raise ValueError('must include "text"')
        return list(dict.fromkeys(value))


class ModelProfile(StrictModel):
    """A partial model config (``[model_overrides.<name>]`` or an inline ``model_profile`` table)."""

    provider: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    name: str | None = None
    context_window: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | Literal["default"] | None = None
    timeout_ms: int | None = Field(default=None, ge=1)
    retry: PartialRetryConfig | None = None
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    price_cache_read_per_mtok: float | None = Field(default=None, ge=0)
    price_cache_write_per_mtok: float | None = Field(default=None, ge=0)
    prompt_cache: Literal["auto", "off"] | None = None
    prompt_cache_ttl: Literal["5m", "1h"] | None = None
    openai_cache_fields: bool | None = None
    reasoning_effort: ReasoningEffort | None = None
    thinking_budget_tokens: int | None = Field(default=None, ge=1)
    openai_token_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    input_modalities: list[InputModality] | None = None
    fallback_profiles: list[str] | None = None
    image_max_edge_px: int | None = Field(default=None, ge=16)
    image_max_bytes: int | None = Field(default=None, ge=1024)
    pdf_max_bytes: int | None = Field(default=None, ge=1024)

    _check_temperature = field_validator("temperature", mode="before")(_temperature)

    @field_validator("input_modalities")
    @classmethod
    def _with_text(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and "text" not in value:
            raise ValueError('must include "text"')
        return None if value is None else list(dict.fromkeys(value))


class ResolvedModelConfig(FrozenModel):
    """Main ``[model]`` overlaid with the applicable profile; handed to provider factories.

    ``temperature = "default"`` resolves to ``None`` (no temperature is sent).
    """

    provider: str
    base_url: str
    api_key_env: str
    name: str
    context_window: int
    max_output_tokens: int
    temperature: float | None
    timeout_ms: int
    retry: RetryConfig
    price_input_per_mtok: float | None = None
    price_output_per_mtok: float | None = None
    price_cache_read_per_mtok: float | None = None
    price_cache_write_per_mtok: float | None = None
    prompt_cache: Literal["auto", "off"] = "auto"
    prompt_cache_ttl: Literal["5m", "1h"] = "5m"
    openai_cache_fields: bool = True
    reasoning_effort: ReasoningEffort | None = None
    thinking_budget_tokens: int | None = None
    openai_token_field: Literal["max_tokens", "max_completion_tokens"] | None = None
    input_modalities: tuple[InputModality, ...] = ("text",)
    fallback_profiles: tuple[str, ...] = ()
    image_max_edge_px: int = DEFAULT_IMAGE_MAX_EDGE_PX
    image_max_bytes: int = DEFAULT_IMAGE_MAX_BYTES
    pdf_max_bytes: int = DEFAULT_PDF_MAX_BYTES
    purpose: str = "main"
    profile: str | None = None
    source: str = ""
