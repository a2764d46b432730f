"""What the loop does when a model call fails in a way another attempt can fix (issue 34).

- **The provider says the prompt is too long** although the estimate fit (``providers/_overflow.py``):
  :func:`recover_overflow` learns the estimate's error from the provider's figures, writes
  ``context_overflow`` and marks the next build for one recovery compaction; the request is retried once.
  A second refusal ends the run ``prompt_too_long`` with the provider's figures
  (:func:`provider_overflow_outcome`).
- **A fallback model** (``[model] fallback_profiles``): after a retriable error outlasted the adapter's
  retries, or an ``unsupported_capability``, with nothing streamed yet, :func:`fall_back` moves the run
  to the next profile for the rest of the run and writes ``model_fallback``.
"""

from __future__ import annotations

from agent_core._events import payloads as ev
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.spec import LoopSpec, LoopState, NoCompaction
from agent_core.config._pricing import Prices
from agent_core.errors import ErrorCode
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.model import ProviderErrorPayload

OVERFLOW_CONFIG_KEYS = (
    "model.context_window",
    "context.min_output_tokens",
    "context.reserve_output_tokens",
    "tools.disabled",
)


FALLBACK_TYPES = frozenset({"server", "timeout", "rate_limit", "network", "unsupported_capability"})
"""Final errors after which a ``[model] fallback_profiles`` model gets the request: retriable ones (5xx,
overload, timeout, rate limit, transient network) once the adapter's retries are spent, and a capability
the model lacks."""


def can_fall_back(spec: LoopSpec, state: LoopState, error: ProviderErrorPayload) -> bool:
    return state.fallbacks_used < len(spec.fallbacks) and (
        error.type in FALLBACK_TYPES or error.code == "unsupported_capability"
    )


async def fall_back(spec: LoopSpec, state: LoopState, error: ProviderErrorPayload) -> None:
    """Moves the run to the next fallback model (for the rest of the run) and says so."""
    fallback = spec.fallbacks[state.fallbacks_used]
    state.fallbacks_used += 1
    config = fallback.config
    event = ev.ModelFallback(
        from_provider=spec.provider,
        from_model=spec.model,
        to_provider=config.provider,
        to_model=config.name,
        profile=fallback.profile,
        error=error.model_copy(
            update={"message": spec.redactor.text(error.message), "raw": None}
        ).model_dump(),
        turn=state.turns + 1,
    )
    spec.adapter = fallback.adapter()
    spec.provider, spec.model = config.provider, config.name
    spec.temperature, spec.max_output_tokens = config.temperature, config.max_output_tokens
    if spec.limits is not None:
        spec.limits.prices = Prices.for_model(config)
    spec.model_prices[f"{config.provider}/{config.name}"] = Prices.for_model(config)
    if spec.use_model is not None:
        spec.use_model(config)
    await spec.recorder.emit(event)


async def recover_overflow(spec: LoopSpec, state: LoopState, error: ProviderErrorPayload) -> None:
    """The provider says the prompt exceeds the window although the estimate fit: learn the estimate's
    error from its figures, and build the request again with one recovery compaction."""
    factor = 1.0
    if spec.calibration is not None:
        factor = spec.calibration.overflowed(
            spec.provider, spec.model, state.last_estimate, error.prompt_tokens
        )
    state.overflow_retry = True
    state.force_recovery = True
    await spec.recorder.emit(
        ev.ContextOverflow(
            provider=spec.provider,
            model=spec.model,
            estimated_tokens=state.last_estimate,
            prompt_tokens=error.prompt_tokens,
            context_window=error.context_window,
            estimate_factor=factor,
            compacted=not isinstance(spec.compaction, NoCompaction),
            turn=state.turns + 1,
        )
    )


def provider_overflow_outcome(spec: LoopSpec, state: LoopState, error: ProviderErrorPayload) -> LoopOutcome:
    """The retried request was still too long for the provider: the run ends ``prompt_too_long`` with the
    provider's figures."""
    figures = ""
    if error.prompt_tokens is not None and error.context_window is not None:
        figures = f" ({error.prompt_tokens} prompt tokens, window {error.context_window})"
    message = (
        f"the provider still refused the prompt as too long after a compaction{figures}: "
        f"{spec.redactor.text(error.message)}. Set model.context_window to the model's real window, or "
        "send less (tools.disabled, smaller tool results)"
    )
    payload = ErrorPayload(
        type="prompt_too_long",
        code=ErrorCode.validation_error,
        message=message,
        details={
            "provider": spec.provider,
            "model": spec.model,
            "provider_prompt_tokens": error.prompt_tokens,
            "provider_context_window": error.context_window,
            "estimated_tokens": state.last_estimate,
            "compact_attempted": True,
            "config_keys": list(OVERFLOW_CONFIG_KEYS),
        },
        redacted=True,
    )
    return LoopOutcome(RunStatus.failed, EndReason.prompt_too_long, error=payload, turn_count=state.turns)
