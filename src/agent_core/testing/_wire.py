"""Wire-format frame builders for the scripted provider servers (public via ``agent_core.testing``).

``OpenAIWire`` (Chat Completions SSE ``data:`` frames), ``AnthropicWire`` (Messages SSE named events) and
``OllamaWire`` (``/api/chat`` NDJSON lines) build exactly what the vendors send; tests pass the frames to
``stream(...)``, ``hold_open(...)`` or ``drop_after(...)``. Tool names in scripted tool calls should come
from the request (``advertised_tool_name``), never be hard-coded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol


class _Request(Protocol):
    json: Any


def split_text(text: str, parts: int = 3) -> list[str]:
    """Splits ``text`` into ``parts`` non-empty fragments (fewer when the text is shorter)."""
    parts = max(1, min(parts, len(text)))
    size, rest = divmod(len(text), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < rest else 0)
        out.append(text[start:end])
        start = end
    return out


def advertised_tool_name(request: _Request, contains: str) -> str:
    """The provider tool name the adapter advertised in ``request`` that contains ``contains``."""
    tools = (request.json or {}).get("tools") or []
    for tool in tools:
        name = tool.get("function", {}).get("name") if "function" in tool else tool.get("name")
        if name and contains in name:
            return str(name)
    raise AssertionError(f"no advertised tool containing {contains!r} in {tools!r}")


class OpenAIWire:
    """Chat Completions SSE frames."""

    DONE = "data: [DONE]\n\n"

    @staticmethod
    def frame(obj: Any) -> str:
        return f"data: {json.dumps(obj)}\n\n"

    @classmethod
    def chunk(
        cls,
        delta: dict[str, Any] | None = None,
        finish_reason: str | None = None,
        *,
        id: str = "chatcmpl-scripted",
    ) -> str:
        return cls.frame(
            {
                "id": id,
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "test-model",
                "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}],
            }
        )

    @classmethod
    def role(cls) -> str:
        return cls.chunk({"role": "assistant", "content": ""})

    @classmethod
    def text(cls, text: str) -> str:
        return cls.chunk({"content": text})

    @classmethod
    def reasoning(cls, text: str, field: str = "reasoning_content") -> str:
        """A reasoning delta as DeepSeek, vLLM and llama.cpp stream it (``reasoning`` for OpenRouter)."""
        return cls.chunk({field: text})

    @classmethod
    def tool_call(cls, index: int, call_id: str, name: str, arguments: str = "") -> str:
        call = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": arguments},
        }
        return cls.chunk({"tool_calls": [call]})

    @classmethod
    def tool_args(cls, index: int, fragment: str) -> str:
        return cls.chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})

    @classmethod
    def finish(cls, reason: str = "stop") -> str:
        return cls.chunk({}, reason)

    @classmethod
    def usage(
        cls, prompt: int = 10, completion: int = 5, total: int | None = None, *, cached: int | None = None
    ) -> str:
        usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion if total is None else total,
        }
        if cached is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        return cls.frame(
            {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "choices": [], "usage": usage}
        )

    @classmethod
    def error(cls, message: str = "boom", type_: str = "server_error") -> str:
        return cls.frame({"error": {"message": message, "type": type_, "code": None}})

    @classmethod
    def text_stream(
        cls, *texts: str, finish_reason: str = "stop", usage: tuple[int, int] | None = (10, 5)
    ) -> list[str]:
        frames = [cls.role(), *(cls.text(t) for t in texts), cls.finish(finish_reason)]
        if usage is not None:
            frames.append(cls.usage(*usage))
        return [*frames, cls.DONE]

    @classmethod
    def tool_stream(
        cls,
        calls: Sequence[tuple[str, str, dict[str, Any]]],
        *,
        text: str | None = None,
        fragments: int = 3,
        finish_reason: str = "tool_calls",
        usage: tuple[int, int] | None = (10, 5),
    ) -> list[str]:
        """Tool calls ``(id, provider name, arguments)`` with arguments split into ``fragments`` chunks."""
        frames = [cls.role()]
        if text:
            frames.append(cls.text(text))
        for index, (call_id, name, arguments) in enumerate(calls):
            frames.append(cls.tool_call(index, call_id, name))
            frames.extend(cls.tool_args(index, part) for part in split_text(json.dumps(arguments), fragments))
        frames.append(cls.finish(finish_reason))
        if usage is not None:
            frames.append(cls.usage(*usage))
        return [*frames, cls.DONE]


class AnthropicWire:
    """Messages SSE frames (named events)."""

    @staticmethod
    def frame(event: str, obj: dict[str, Any]) -> str:
        return f"event: {event}\ndata: {json.dumps({'type': event, **obj})}\n\n"

    @classmethod
    def message_start(
        cls,
        *,
        id: str = "msg_scripted",
        input_tokens: int = 10,
        cache_read: int | None = None,
        cache_write: int | None = None,
    ) -> str:
        usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": 1}
        if cache_read is not None:
            usage["cache_read_input_tokens"] = cache_read
        if cache_write is not None:
            usage["cache_creation_input_tokens"] = cache_write
        message: dict[str, Any] = {
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": "test-model",
            "content": [],
            "stop_reason": None,
            "usage": usage,
        }
        return cls.frame("message_start", {"message": message})

    @classmethod
    def text_start(cls, index: int) -> str:
        return cls.frame(
            "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
        )

    @classmethod
    def text_delta(cls, index: int, text: str) -> str:
        return cls.frame(
            "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": text}}
        )

    @classmethod
    def tool_use_start(cls, index: int, call_id: str, name: str) -> str:
        block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
        return cls.frame("content_block_start", {"index": index, "content_block": block})

    @classmethod
    def thinking_start(cls, index: int) -> str:
        block = {"type": "thinking", "thinking": ""}
        return cls.frame("content_block_start", {"index": index, "content_block": block})

    @classmethod
    def thinking_delta(cls, index: int, text: str) -> str:
        delta = {"type": "thinking_delta", "thinking": text}
        return cls.frame("content_block_delta", {"index": index, "delta": delta})

    @classmethod
    def signature_delta(cls, index: int, signature: str) -> str:
        delta = {"type": "signature_delta", "signature": signature}
        return cls.frame("content_block_delta", {"index": index, "delta": delta})

    @classmethod
    def redacted_thinking(cls, index: int, data: str) -> str:
        """A ``redacted_thinking`` block (it arrives whole, in its start event)."""
        block = {"type": "redacted_thinking", "data": data}
        return cls.frame("content_block_start", {"index": index, "content_block": block})

    @classmethod
    def input_json(cls, index: int, partial: str) -> str:
        delta = {"type": "input_json_delta", "partial_json": partial}
        return cls.frame("content_block_delta", {"index": index, "delta": delta})

    @classmethod
    def block_stop(cls, index: int) -> str:
        return cls.frame("content_block_stop", {"index": index})

    @classmethod
    def message_delta(cls, stop_reason: str = "end_turn", output_tokens: int = 5) -> str:
        return cls.frame(
            "message_delta",
            {
                "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )

    @classmethod
    def message_stop(cls) -> str:
        return cls.frame("message_stop", {})

    @classmethod
    def ping(cls) -> str:
        return cls.frame("ping", {})

    @classmethod
    def error(cls, type_: str = "overloaded_error", message: str = "Overloaded") -> str:
        return cls.frame("error", {"error": {"type": type_, "message": message}})

    @classmethod
    def thinking(cls, index: int, text: str, signature: str) -> list[str]:
        """A whole thinking block: its text in deltas, then its signature."""
        parts = split_text(text, 2) if text else []
        return [
            cls.thinking_start(index),
            *(cls.thinking_delta(index, part) for part in parts),
            cls.signature_delta(index, signature),
            cls.block_stop(index),
        ]

    @classmethod
    def text_stream(
        cls,
        *texts: str,
        stop_reason: str = "end_turn",
        input_tokens: int = 10,
        output_tokens: int = 5,
        thinking: tuple[str, str] | None = None,
    ) -> list[str]:
        """A text answer; ``thinking`` = (text, signature) puts a thinking block before it."""
        frames = [cls.message_start(input_tokens=input_tokens)]
        index = 0
        if thinking is not None:
            frames += cls.thinking(0, *thinking)
            index = 1
        return [
            *frames,
            cls.text_start(index),
            cls.ping(),
            *(cls.text_delta(index, t) for t in texts),
            cls.block_stop(index),
            cls.message_delta(stop_reason, output_tokens),
            cls.message_stop(),
        ]

    @classmethod
    def tool_stream(
        cls,
        calls: Sequence[tuple[str, str, dict[str, Any]]],
        *,
        text: str | None = None,
        fragments: int = 3,
        cache_read: int | None = None,
        cache_write: int | None = None,
        thinking: tuple[str, str] | None = None,
    ) -> list[str]:
        """Tool calls ``(id, provider name, arguments)``; ``thinking`` = (text, signature) comes first."""
        frames = [cls.message_start(cache_read=cache_read, cache_write=cache_write)]
        index = 0
        if thinking is not None:
            frames += cls.thinking(0, *thinking)
            index = 1
        if text:
            frames += [cls.text_start(index), cls.text_delta(index, text), cls.block_stop(index)]
            index += 1
        for call_id, name, arguments in calls:
            frames.append(cls.tool_use_start(index, call_id, name))
            frames.extend(
                cls.input_json(index, part) for part in split_text(json.dumps(arguments), fragments)
            )
            frames.append(cls.block_stop(index))
            index += 1
        return [*frames, cls.message_delta("tool_use", 7), cls.message_stop()]


class OllamaWire:
    """``/api/chat`` NDJSON lines."""

    @staticmethod
    def line(obj: dict[str, Any]) -> str:
        return json.dumps(obj) + "\n"

    @classmethod
    def content(cls, text: str, model: str = "test-model") -> str:
        return cls.line(
            {
                "model": model,
                "created_at": "2026-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": text},
                "done": False,
            }
        )

    @classmethod
    def thinking(cls, text: str, model: str = "test-model") -> str:
        """A ``message.thinking`` line (a model run with ``think``)."""
        message = {"role": "assistant", "content": "", "thinking": text}
        return cls.line(
            {"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": False}
        )

    @classmethod
    def tool_calls(cls, calls: Sequence[tuple[str, dict[str, Any]]], model: str = "test-model") -> str:
        message = {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": name, "arguments": args}} for name, args in calls],
        }
        return cls.line(
            {"model": model, "created_at": "2026-01-01T00:00:00Z", "message": message, "done": False}
        )

    @classmethod
    def done(
        cls,
        done_reason: str = "stop",
        prompt_eval_count: int = 10,
        eval_count: int = 5,
        model: str = "test-model",
    ) -> str:
        return cls.line(
            {
                "model": model,
                "created_at": "2026-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": done_reason,
                "total_duration": 1000,
                "load_duration": 10,
                "prompt_eval_count": prompt_eval_count,
                "prompt_eval_duration": 100,
                "eval_count": eval_count,
                "eval_duration": 200,
            }
        )

    @classmethod
    def error(cls, message: str) -> str:
        return cls.line({"error": message})

    @classmethod
    def text_stream(cls, *texts: str, done_reason: str = "stop") -> list[str]:
        return [*(cls.content(t) for t in texts), cls.done(done_reason)]
