"""The vendors' request rules the scripted servers enforce (public via ``agent_core.testing``).

A scripted server answers a request that breaks one of its vendor's rules as the vendor does — the same
HTTP status and the same error body — before any scripted response is used, so a test against it fails
the way a real call would. :class:`ModelRules` says what a model accepts; give a server ``models={name:
ModelRules(...)}`` (other names get the server's defaults). The rules:

* **OpenAI Chat Completions** — a reasoning model (``reasoning=True``; by default any name starting with
  ``o1``-``o9`` or ``gpt-5``) refuses ``max_tokens`` (``unsupported_parameter``: use
  ``max_completion_tokens``) and any ``temperature`` but 1 (``unsupported_value``).
* **OpenAI Responses** — a reasoning model refuses ``temperature``; ``max_tokens`` is an unknown parameter;
  with ``store: false`` an input item carrying an ``id`` (nothing is stored to look it up) and a reasoning
  item without ``encrypted_content`` are "not found"; encrypted content this server never issued does not
  verify; a ``function_call_output`` needs its ``function_call`` in the input.
* **Anthropic** — with ``thinking`` enabled: ``budget_tokens`` at least 1024 and below ``max_tokens``, no
  ``temperature`` but 1, no forced ``tool_choice``; a request that continues a tool loop must begin the
  last assistant message with a ``thinking``/``redacted_thinking`` block, and every thinking block must
  carry the signature this server issued for exactly that text; no ``cache_control`` on thinking blocks.
* **Ollama** — ``think`` needs the ``thinking`` capability; images need ``vision``.
* **Every server** — image parts (and PDF parts) for a model whose ``input_modalities`` lack them; a prompt
  over ``context_window`` (estimated as a quarter of the characters of its messages and tools) gets the
  vendor's exact "too long" error (Ollama only with ``truncate: false``: by default it drops the start of
  the prompt silently, as Ollama does).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REASONING_NAME = re.compile(r"^(o[1-9]|gpt-5)")
ANTHROPIC_THINKING_DOCS = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


@dataclass(frozen=True, slots=True)
class ModelRules:
    """What one model accepts (see the module docstring)."""

    reasoning: bool | None = None
    """OpenAI reasoning model; ``None``: decided by the name (``o1``..``o9``, ``gpt-5``)."""
    input_modalities: tuple[str, ...] = ("text", "image", "pdf")
    context_window: int | None = None
    """Prompts estimated above this many tokens get the vendor's overflow error (``None``: no limit)."""

    def is_reasoning(self, name: str) -> bool:
        return self.reasoning if self.reasoning is not None else bool(REASONING_NAME.match(name))


Rejection = tuple[int, dict[str, Any]]
"""``(HTTP status, JSON error body)``."""


def estimate_tokens(*parts: Any) -> int:
    """A quarter of the characters of the parts' compact JSON (how the servers size a prompt)."""
    text = "".join(json.dumps(p, separators=(",", ":"), ensure_ascii=False) for p in parts if p)
    return -(-len(text) // 4)


def _openai_error(message: str, param: str | None, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def openai_overflow(window: int, prompt: int) -> dict[str, Any]:
    """OpenAI's Chat Completions ``context_length_exceeded`` body."""
    return _openai_error(
        f"This model's maximum context length is {window} tokens. However, your messages resulted in "
        f"{prompt} tokens. Please reduce the length of the messages.",
        "messages",
        "context_length_exceeded",
    )


def responses_overflow() -> dict[str, Any]:
    """The Responses API's ``context_length_exceeded`` body."""
    return _openai_error(
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "input",
        "context_length_exceeded",
    )


def anthropic_error(message: str, type_: str = "invalid_request_error") -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def anthropic_overflow(prompt: int, window: int) -> dict[str, Any]:
    """Anthropic's "prompt is too long" body."""
    return anthropic_error(f"prompt is too long: {prompt} tokens > {window} maximum")


def llamacpp_overflow(prompt: int, window: int) -> dict[str, Any]:
    """llama.cpp server's ``exceed_context_size_error`` body (HTTP 400)."""
    return {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": prompt,
            "n_ctx": window,
        }
    }


OLLAMA_OVERFLOW = {"error": "the input length exceeds the context length"}


def ollama_overflow() -> dict[str, Any]:
    """Ollama's body for a prompt over ``num_ctx`` sent with ``truncate: false``."""
    return dict(OLLAMA_OVERFLOW)


def _parts(messages: Iterable[Any]) -> Iterable[tuple[int, int, dict[str, Any]]]:
    for i, message in enumerate(messages):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for j, part in enumerate(content):
                if isinstance(part, dict):
                    yield i, j, part


# -- OpenAI Chat Completions --------------------------------------------------------------------------
def check_openai_chat(body: dict[str, Any], rules: ModelRules) -> Rejection | None:
    model = str(body.get("model") or "")
    if rules.is_reasoning(model):
        if "max_tokens" in body:
            return 400, _openai_error(
                "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                "'max_completion_tokens' instead.",
                "max_tokens",
                "unsupported_parameter",
            )
        temperature = body.get("temperature")
        if temperature is not None and temperature != 1:
            return 400, _openai_error(
                f"Unsupported value: 'temperature' does not support {temperature} with this model. Only "
                "the default (1) value is supported.",
                "temperature",
                "unsupported_value",
            )
    for i, j, part in _parts(body.get("messages") or []):
        kind = part.get("type")
        if kind == "image_url" and "image" not in rules.input_modalities:
            return 400, _openai_error(
                "Invalid content type. image_url is only supported by certain models.",
                f"messages.[{i}].content.[{j}].type",
                None,
            )
        if kind == "file" and "pdf" not in rules.input_modalities:
            return 400, _openai_error(
                "Invalid content type. file is only supported by certain models.",
                f"messages.[{i}].content.[{j}].type",
                None,
            )
    if rules.context_window is not None:
        prompt = estimate_tokens(body.get("messages"), body.get("tools"))
        if prompt > rules.context_window:
            return 400, openai_overflow(rules.context_window, prompt)
    return None


# -- OpenAI Responses ---------------------------------------------------------------------------------
def check_responses(body: dict[str, Any], rules: ModelRules, issued: set[str]) -> Rejection | None:
    model = str(body.get("model") or "")
    if "max_tokens" in body:
        return 400, _openai_error("Unknown parameter: 'max_tokens'.", "max_tokens", "unknown_parameter")
    if rules.is_reasoning(model) and body.get("temperature") is not None:
        return 400, _openai_error(
            "Unsupported parameter: 'temperature' is not supported with this model.",
            "temperature",
            "unsupported_parameter",
        )
    items = body.get("input") or []
    stored = body.get("store", True) is not False
    calls = {str(i.get("call_id")) for i in items if isinstance(i, dict) and i.get("type") == "function_call"}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if not stored and item.get("id"):
            return 400, _openai_error(
                f"Item with id '{item['id']}' not found. Items are not persisted when `store` is set to "
                "false. Try again with `store` set to true, or remove this item from your input.",
                "input",
                None,
            )
        if kind == "reasoning":
            encrypted = item.get("encrypted_content")
            if not stored and not encrypted:
                return 400, _openai_error(
                    "Reasoning items need their encrypted_content when `store` is set to false: include "
                    "'reasoning.encrypted_content' and pass the items back unchanged.",
                    f"input[{index}]",
                    None,
                )
            if encrypted and encrypted not in issued:
                return 400, _openai_error(
                    f"The encrypted content of input[{index}] could not be verified.",
                    f"input[{index}].encrypted_content",
                    "invalid_encrypted_content",
                )
        if kind == "function_call_output" and str(item.get("call_id")) not in calls:
            return 400, _openai_error(
                f"No tool call found for function call output with call_id {item.get('call_id')}.",
                "input",
                None,
            )
        parts = item.get("content") if isinstance(item.get("content"), list) else item.get("output")
        for part in parts if isinstance(parts, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "input_image" and "image" not in rules.input_modalities:
                return 400, _openai_error(
                    "Image input is not supported by this model.", f"input[{index}]", None
                )
            if kind == "input_file" and "pdf" not in rules.input_modalities:
                return 400, _openai_error(
                    "File input is not supported by this model.", f"input[{index}]", None
                )
    window = rules.context_window
    if window is not None and estimate_tokens(body.get("instructions"), items, body.get("tools")) > window:
        return 400, responses_overflow()
    return None


# -- Anthropic ----------------------------------------------------------------------------------------
THINKING = frozenset({"thinking", "redacted_thinking"})


def check_anthropic(
    body: dict[str, Any], rules: ModelRules, signatures: dict[str, str], redacted: set[str]
) -> Rejection | None:
    """``signatures``: issued signature → the thinking text it signs; ``redacted``: issued data."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    for i, j, part in _parts(messages):
        kind = part.get("type")
        if kind in THINKING and "cache_control" in part:
            return 400, anthropic_error(
                f"messages.{i}.content.{j}.{kind}.cache_control: Extra inputs are not permitted"
            )
        if kind == "thinking" and signatures.get(str(part.get("signature"))) != part.get("thinking"):
            return 400, anthropic_error(f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block")
        if kind == "redacted_thinking" and part.get("data") not in redacted:
            return 400, anthropic_error(
                f"messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
            )
        media = [part] if kind in ("image", "document") else []
        if kind == "tool_result" and isinstance(part.get("content"), list):
            media = [
                p for p in part["content"] if isinstance(p, dict) and p.get("type") in ("image", "document")
            ]
        for block in media:
            needed = "image" if block.get("type") == "image" else "pdf"
            if needed not in rules.input_modalities:
                return 400, anthropic_error(
                    f"messages.{i}.content.{j}: {block.get('type')} input is not supported by this model"
                )
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        problem = _thinking_rules(body, thinking, messages)
        if problem is not None:
            return 400, anthropic_error(problem)
    if rules.context_window is not None:
        prompt = estimate_tokens(body.get("system"), messages, body.get("tools"))
        if prompt > rules.context_window:
            return 400, anthropic_overflow(prompt, rules.context_window)
    return None


def _thinking_rules(
    body: dict[str, Any], thinking: dict[str, Any], messages: list[dict[str, Any]]
) -> str | None:
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] <= budget:
        return (
            "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
            f"{ANTHROPIC_THINKING_DOCS}#max-tokens-and-context-window-size"
        )
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return (
            "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at "
            f"{ANTHROPIC_THINKING_DOCS}#feature-compatibility"
        )
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    last = messages[-1] if messages else None
    content = last.get("content") if last else None
    loop = isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "tool_result" for p in content
    )
    if last is not None and last.get("role") == "user" and loop:
        for index in range(len(messages) - 2, -1, -1):
            if messages[index].get("role") != "assistant":
                continue
            blocks = messages[index].get("content")
            first = blocks[0] if isinstance(blocks, list) and blocks else {}
            found = first.get("type") if isinstance(first, dict) else "text"
            if found not in THINKING:
                return (
                    f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
                    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We "
                    "recommend you include thinking blocks from previous turns. To avoid this requirement, "
                    f"disable `thinking`. Please consult our documentation at {ANTHROPIC_THINKING_DOCS}"
                )
            break
    return None


def observe_anthropic_frames(
    frames: Iterable[str | bytes], signatures: dict[str, str], redacted: set[str]
) -> None:
    """Records the thinking signatures (and redacted data) a response issues, with the text they sign."""
    texts: dict[int, str] = {}
    for event in _sse_objects(frames):
        kind = event.get("type")
        index = event.get("index")
        if kind == "content_block_start" and isinstance(index, int):
            block = event.get("content_block") or {}
            if block.get("type") == "thinking":
                texts[index] = str(block.get("thinking") or "")
                if block.get("signature"):
                    signatures[str(block["signature"])] = texts[index]
            elif block.get("type") == "redacted_thinking":
                redacted.add(str(block.get("data")))
        elif kind == "content_block_delta" and isinstance(index, int):
            delta = event.get("delta") or {}
            if delta.get("type") == "thinking_delta":
                texts[index] = texts.get(index, "") + str(delta.get("thinking") or "")
            elif delta.get("type") == "signature_delta":
                signatures[str(delta.get("signature"))] = texts.get(index, "")


def _sse_objects(frames: Iterable[str | bytes]) -> Iterable[dict[str, Any]]:
    for frame in frames:
        text = frame.decode("utf-8", "replace") if isinstance(frame, bytes) else frame
        for line in text.splitlines():
            if line.startswith("data:"):
                try:
                    value = json.loads(line[5:].strip())
                except ValueError:
                    continue
                if isinstance(value, dict):
                    yield value


# -- Ollama -------------------------------------------------------------------------------------------
def check_ollama(body: dict[str, Any], rules: ModelRules, capabilities: list[str] | None) -> Rejection | None:
    model = str(body.get("model") or "")
    caps = capabilities or []
    if body.get("think") not in (None, False) and "thinking" not in caps:
        return 400, {"error": f'"{model}" does not support thinking'}
    images = any(isinstance(m, dict) and m.get("images") for m in body.get("messages") or [])
    if images and ("vision" not in caps or "image" not in rules.input_modalities):
        return 400, {"error": "this model is missing data required for image input"}
    window = rules.context_window
    prompt = estimate_tokens(body.get("messages"), body.get("tools")) if window is not None else 0
    if window is not None and body.get("truncate") is False and prompt > window:
        return 400, dict(OLLAMA_OVERFLOW)
    return None
