"""Recognising a provider's "the prompt is too long" answer (issue 34 item 5), by code and by message.

The shapes (HTTP 400 unless noted):

- OpenAI Chat Completions: ``{"error": {"code": "context_length_exceeded", "message": "This model's maximum
  context length is 128000 tokens. However, your messages resulted in 130532 tokens. ..."}}``; the Responses
  API: the same code with "Your input exceeds the context window of this model. ..." (also in a
  ``response.failed`` event); vLLM: "... maximum context length is 4096 tokens. However, you requested 5000
  tokens (4000 in the messages, 1000 in the completion) ...".
- Anthropic: ``{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long:
  208310 tokens > 200000 maximum"}}`` and "input length and `max_tokens` exceed context limit: 197000 +
  8192 > 200000, ...".
- llama.cpp server: ``{"error": {"type": "exceed_context_size_error", "message": "the request exceeds the
  available context size, ...", "n_prompt_tokens": 9000, "n_ctx": 8192}}`` (400; older servers 500).
- Ollama (``truncate: false``): ``{"error": "the input length exceeds the context length"}``.

:func:`recognise_overflow` returns the provider's figures when it gave them (prompt tokens, window).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "prompt_too_long"})
_MESSAGE = re.compile(
    r"(?i)prompt is too long|context[_ ]length[_ ]exceeded|maximum context length|exceeds? (?:the )?"
    r"(?:available )?context (?:size|length|window)|input exceeds the context|exceed context limit|"
    r"input length and `?max_tokens`? exceed|context window of this model|too many tokens in the prompt"
)
_FIGURES = (
    # Anthropic: "prompt is too long: 208310 tokens > 200000 maximum"
    (re.compile(r"(?i)too long:\s*([\d,]+)\s*tokens?\s*>\s*([\d,]+)"), "prompt", "window"),
    # Anthropic: "exceed context limit: 197000 + 8192 > 200000"
    (re.compile(r"(?i)context limit:\s*([\d,]+)\s*\+\s*[\d,]+\s*>\s*([\d,]+)"), "prompt", "window"),
    # vLLM: "maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages"
    (
        re.compile(r"(?i)maximum context length is\s*([\d,]+).*?\(([\d,]+) in the messages"),
        "window",
        "prompt",
    ),
    # OpenAI: "maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens"
    (re.compile(r"(?i)maximum context length is\s*([\d,]+).*?resulted in\s*([\d,]+)"), "window", "prompt"),
)


@dataclass(frozen=True, slots=True)
class Overflow:
    prompt_tokens: int | None = None
    context_window: int | None = None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.replace(",", ""))
        except ValueError:
            return None
    return None


def _error_object(raw: dict[str, Any]) -> dict[str, Any]:
    error = raw.get("error")
    if isinstance(error, dict):
        return error
    response = raw.get("response")  # a Responses API ``response.failed`` event
    if isinstance(response, dict) and isinstance(response.get("error"), dict):
        return dict(response["error"])
    return raw


def recognise_overflow(raw: dict[str, Any] | None, message: str = "") -> Overflow | None:
    """The overflow a provider error body (``raw``) or message reports, else ``None``."""
    raw = raw or {}
    error = _error_object(raw)
    text = str(error.get("message") or (raw.get("error") if isinstance(raw.get("error"), str) else "") or "")
    text = f"{text} {message}".strip()
    codes = {str(error.get(key) or "") for key in ("code", "type")}
    if not (codes & OVERFLOW_CODES) and not _MESSAGE.search(text):
        return None
    prompt = _int(error.get("n_prompt_tokens"))
    window = _int(error.get("n_ctx"))
    for pattern, first, _second in _FIGURES:
        match = pattern.search(text)
        if match is None:
            continue
        a, b = _int(match.group(1)), _int(match.group(2))
        found = {"prompt": a, "window": b} if first == "prompt" else {"window": a, "prompt": b}
        prompt = prompt if prompt is not None else found["prompt"]
        window = window if window is not None else found["window"]
        break
    return Overflow(prompt_tokens=prompt, context_window=window)


def overflow_message(provider: str, overflow: Overflow, detail: str) -> str:
    """The one-line message of a ``prompt_too_long`` provider error."""
    figures = ""
    if overflow.prompt_tokens is not None and overflow.context_window is not None:
        figures = f" ({overflow.prompt_tokens} prompt tokens > {overflow.context_window})"
    elif overflow.context_window is not None:
        figures = f" (window {overflow.context_window} tokens)"
    return f"{provider}: the prompt is too long for the model{figures}: {detail}"
