"""Model configuration types: the ``[model]`` table, partial profiles and the resolved model config."""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from typing import Any, Literal

from pydantic import Field, model_validator

from agent_core.types.base import FrozenModel, StrictModel


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
    temperature: float | None = 0.2
    timeout_ms: int = Field(default=60000, ge=1)
    retry: RetryConfig = Field(default_factory=section_default, validate_default=True)
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


class ModelProfile(StrictModel):
    """A partial model config (``[model_overrides.<name>]`` or an inline ``model_profile`` table)."""

    provider: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    name: str | None = None
    context_window: int | None = Field(default=None, ge=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = None
    timeout_ms: int | None = Field(default=None, ge=1)
    retry: PartialRetryConfig | None = None
    price_input_per_mtok: float | None = Field(default=None, ge=0)
    price_output_per_mtok: float | None = Field(default=None, ge=0)
    price_cache_read_per_mtok: float | None = Field(default=None, ge=0)
    price_cache_write_per_mtok: float | None = Field(default=None, ge=0)
    prompt_cache: Literal["auto", "off"] | None = None
    prompt_cache_ttl: Literal["5m", "1h"] | None = None
    openai_cache_fields: bool | None = None


class ResolvedModelConfig(FrozenModel):
    """Main ``[model]`` overlaid with the applicable profile; handed to provider factories."""

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
    purpose: str = "main"
    profile: str | None = None
    source: str = ""
