"""The one place that decides which request fields a model accepts (issue 34 item 1).

Every built-in adapter asks :func:`request_fields` what to send for the sampling and output fields and
:func:`media_problem` whether the model can read the request's images and documents. The rules:

- **Temperature.** ``[model] temperature = "default"`` sends none. A reasoning model (``reasoning_effort``
  set, OpenAI protocols) and Anthropic extended thinking accept only their default temperature, so none is
  sent for them either (a note says so).
- **Output limit.** Chat Completions: ``max_completion_tokens`` when ``[model] openai_token_field`` says so
  or reasoning is configured, else ``max_tokens`` (what compatible servers take). The Responses API always
  uses ``max_output_tokens``; Anthropic ``max_tokens``; Ollama ``options.num_predict``.
- **Reasoning.** ``reasoning_effort`` (Chat Completions) / ``reasoning.effort`` (Responses) from
  ``[model] reasoning_effort``. Anthropic thinking from ``thinking_budget_tokens``: the budget must be at
  least 1024 and below ``max_tokens`` (a smaller ``max_tokens`` for one request — the window leaves less —
  lowers it; below 1024 thinking is off for that request), and thinking is off for a request that forces a
  tool (Anthropic refuses both together). Ollama: ``think`` is the effort (``low``/``medium``/``high``,
  gpt-oss) or ``true`` when a thinking budget is set.
- **Media.** Images need ``"image"`` and PDFs ``"pdf"`` in ``[model] input_modalities``; Ollama reads no
  PDF at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core._memo import WireMemo
from agent_core.config.model import ResolvedModelConfig
from agent_core.types.content import MediaBlock, media_blocks
from agent_core.types.model import ModelRequest, ToolChoiceNamed

ANTHROPIC_MIN_THINKING_BUDGET = 1024
OPENAI_PROTOCOLS = frozenset({"openai", "openai_responses"})


@dataclass(frozen=True, slots=True)
class RequestFields:
    """What one request sends for its sampling, output and reasoning fields."""

    temperature: float | None
    """``None``: no temperature field."""
    token_field: str
    """The name of the output-limit field (``max_tokens``, ``max_completion_tokens``, ...)."""
    max_output_tokens: int | None
    reasoning_effort: str | None = None
    """OpenAI protocols: the effort to send (``None``: no reasoning field)."""
    thinking_budget: int | None = None
    """Anthropic: the thinking budget (``None``: thinking off for this request)."""
    think: bool | str | None = None
    """Ollama: the ``think`` value (``None``: not sent)."""
    notes: tuple[str, ...] = ()
    """Why a configured field was left out of this request."""


class FieldsError(ValueError):
    """A configuration the provider would refuse (the adapter fails the call ``config_error``)."""


def is_reasoning_model(config: ResolvedModelConfig) -> bool:
    """Reasoning is configured for an OpenAI-protocol model."""
    return config.reasoning_effort is not None


def request_fields(provider: str, config: ResolvedModelConfig, request: ModelRequest) -> RequestFields:
    """The fields ``provider`` sends for ``request`` under ``config``; raises :class:`FieldsError`."""
    notes: list[str] = []
    temperature = request.temperature
    max_output = request.max_output_tokens
    if provider in OPENAI_PROTOCOLS:
        reasoning = is_reasoning_model(config)
        if reasoning and temperature is not None:
            notes.append("temperature not sent: reasoning models accept only their default")
            temperature = None
        if provider == "openai_responses":
            token_field = "max_output_tokens"
        else:
            token_field = config.openai_token_field or (
                "max_completion_tokens" if reasoning else "max_tokens"
            )
        return RequestFields(
            temperature, token_field, max_output, reasoning_effort=config.reasoning_effort, notes=tuple(notes)
        )
    if provider == "anthropic":
        return _anthropic(config, request, temperature, max_output, notes)
    if provider == "ollama":
        think: bool | str | None = None
        if config.reasoning_effort in ("low", "medium", "high"):
            think = config.reasoning_effort
        elif config.thinking_budget_tokens is not None:
            think = True
        return RequestFields(temperature, "num_predict", max_output, think=think)
    return RequestFields(temperature, "max_tokens", max_output)


def _anthropic(
    config: ResolvedModelConfig,
    request: ModelRequest,
    temperature: float | None,
    max_output: int | None,
    notes: list[str],
) -> RequestFields:
    budget = config.thinking_budget_tokens
    if budget is None:
        return RequestFields(temperature, "max_tokens", max_output)
    if budget < ANTHROPIC_MIN_THINKING_BUDGET:
        raise FieldsError(
            f"model.thinking_budget_tokens = {budget} is below Anthropic's minimum of "
            f"{ANTHROPIC_MIN_THINKING_BUDGET}; raise it (configured at {config.source or 'unknown source'})"
        )
    if budget >= config.max_output_tokens:
        raise FieldsError(
            f"model.thinking_budget_tokens = {budget} must be below model.max_output_tokens = "
            f"{config.max_output_tokens} (Anthropic counts the thinking in max_tokens); raise "
            f"model.max_output_tokens or lower the budget (configured at {config.source or 'unknown source'})"
        )
    limit = max_output if max_output is not None else config.max_output_tokens
    thinking: int | None = min(budget, limit - 1)
    if thinking is not None and thinking < ANTHROPIC_MIN_THINKING_BUDGET:
        notes.append(f"thinking off for this request: only {limit} output tokens are left in the window")
        thinking = None
    if thinking is not None and (
        isinstance(request.tool_choice, ToolChoiceNamed) or request.tool_choice == "required"
    ):
        notes.append(
            "thinking off for this request: it forces a tool call, which Anthropic refuses with thinking"
        )
        thinking = None
    if thinking is not None and temperature is not None:
        notes.append("temperature not sent: Anthropic extended thinking accepts only its default")
        temperature = None
    return RequestFields(temperature, "max_tokens", max_output, thinking_budget=thinking, notes=tuple(notes))


_MESSAGE_MEDIA = WireMemo()
"""A message's image and document blocks, by message identity (a long session's messages reach every
request again: one lookup each instead of a walk over their blocks)."""


def request_media(request: ModelRequest) -> list[MediaBlock]:
    """The image and document blocks of the request's messages (tool results included), in order."""
    found: list[MediaBlock] = []
    for message in request.messages:
        media = _MESSAGE_MEDIA.get(message)
        if media is None:
            media = tuple(media_blocks(message.content))
            _MESSAGE_MEDIA.put(message, media)
        found.extend(media)
    return found


def media_kinds(request: ModelRequest) -> set[str]:
    """``"image"`` / ``"pdf"`` when the request's messages carry such blocks (tool results included)."""
    return _kinds(request_media(request))


def _kinds(blocks: list[MediaBlock]) -> set[str]:
    return {"image" if block.type == "image" else "pdf" for block in blocks}


def media_problem(
    provider: str, config: ResolvedModelConfig, request: ModelRequest
) -> tuple[str, str] | None:
    """``(capability, message)`` when the model cannot read the request's images or documents."""
    media = request_media(request)
    if not media:
        return None
    for kind in sorted(_kinds(media)):
        if kind not in config.input_modalities:
            what = "images" if kind == "image" else "PDF documents"
            return kind, (
                f"the request carries {what}, but model {config.name!r} ({provider}) does not take them: "
                f'model.input_modalities = {list(config.input_modalities)} lacks "{kind}" (add it if the model '
                "reads them, or set model.fallback_profiles to a model that does)"
            )
        if kind == "pdf" and provider == "ollama":
            return (
                kind,
                "ollama models cannot read PDF documents; use model.fallback_profiles for a model that does",
            )
    for block in media:
        if block.artifact_id not in request.attachments:
            return "attachment", f"the bytes of artifact {block.artifact_id} are not in the request"
    return None
