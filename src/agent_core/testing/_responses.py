"""The scripted OpenAI Responses API server and its frames (public via ``agent_core.testing``).

:class:`ScriptedResponsesServer` serves ``POST /v1/responses`` (``base_url`` ends with ``/v1``) with the
Responses API's named SSE events, scripted like the other servers, and enforces the API's rules
(``agent_core.testing._rules``): the encrypted reasoning it issued is the only one it accepts back, and it
returns a reasoning item's ``encrypted_content`` only to a request that asked for it with
``include: ["reasoning.encrypted_content"]`` (the real API leaves it out otherwise).
:class:`ResponsesWire` builds the frames::

    server.enqueue(stream(ResponsesWire.tool_stream([("call_1", name, {"path": "."})], reasoning="plan")))
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from typing import Any

from agent_core.testing import _rules
from agent_core.testing._rules import ModelRules
from agent_core.testing._servers import ScriptedRequest, ScriptedServer, _sse_json
from agent_core.testing._wire import split_text

ENCRYPTED = "reasoning.encrypted_content"


class ResponsesWire:
    """Responses API SSE frames (``event: <type>`` + ``data: {...}``, with a ``sequence_number``)."""

    _sequence = itertools.count()

    @classmethod
    def frame(cls, type_: str, obj: dict[str, Any]) -> str:
        body = {"type": type_, "sequence_number": next(cls._sequence), **obj}
        return f"event: {type_}\ndata: {json.dumps(body)}\n\n"

    @staticmethod
    def response(status: str = "in_progress", **fields: Any) -> dict[str, Any]:
        return {
            "id": "resp_scripted",
            "object": "response",
            "model": "test-model",
            "status": status,
            **fields,
        }

    @classmethod
    def created(cls) -> str:
        return cls.frame("response.created", {"response": cls.response()})

    @classmethod
    def message_added(cls, index: int) -> str:
        item = {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "status": "in_progress",
            "content": [],
        }
        return cls.frame("response.output_item.added", {"output_index": index, "item": item})

    @classmethod
    def text_delta(cls, index: int, text: str) -> str:
        return cls.frame(
            "response.output_text.delta",
            {"item_id": f"msg_{index}", "output_index": index, "content_index": 0, "delta": text},
        )

    @classmethod
    def message_done(cls, index: int, text: str) -> str:
        item = {
            "id": f"msg_{index}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
        return cls.frame("response.output_item.done", {"output_index": index, "item": item})

    @classmethod
    def call_added(cls, index: int, call_id: str, name: str) -> str:
        item = {
            "id": f"fc_{index}",
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": "",
        }
        return cls.frame("response.output_item.added", {"output_index": index, "item": item})

    @classmethod
    def arguments_delta(cls, index: int, fragment: str) -> str:
        return cls.frame(
            "response.function_call_arguments.delta",
            {"item_id": f"fc_{index}", "output_index": index, "delta": fragment},
        )

    @classmethod
    def call_done(cls, index: int, call_id: str, name: str, arguments: str) -> str:
        item = {
            "id": f"fc_{index}",
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
            "status": "completed",
        }
        return cls.frame("response.output_item.done", {"output_index": index, "item": item})

    @classmethod
    def reasoning_added(cls, index: int) -> str:
        item = {"id": f"rs_{index}", "type": "reasoning", "summary": []}
        return cls.frame("response.output_item.added", {"output_index": index, "item": item})

    @classmethod
    def summary_delta(cls, index: int, text: str, summary_index: int = 0) -> str:
        return cls.frame(
            "response.reasoning_summary_text.delta",
            {"item_id": f"rs_{index}", "output_index": index, "summary_index": summary_index, "delta": text},
        )

    @classmethod
    def reasoning_done(cls, index: int, summary: str, encrypted: str | None) -> str:
        item: dict[str, Any] = {
            "id": f"rs_{index}",
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": summary}] if summary else [],
        }
        if encrypted is not None:
            item["encrypted_content"] = encrypted
        return cls.frame("response.output_item.done", {"output_index": index, "item": item})

    @staticmethod
    def usage(
        input_tokens: int = 10, output_tokens: int = 5, *, cached: int = 0, reasoning: int = 0
    ) -> dict[str, Any]:
        return {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": reasoning},
            "total_tokens": input_tokens + output_tokens,
        }

    @classmethod
    def completed(
        cls, usage: dict[str, Any] | None = None, *, status: str = "completed", reason: str | None = None
    ) -> str:
        response = cls.response(status, usage=usage or cls.usage())
        if reason is not None:
            response["incomplete_details"] = {"reason": reason}
        kind = "response.completed" if status == "completed" else f"response.{status}"
        return cls.frame(kind, {"response": response})

    @classmethod
    def failed(cls, code: str, message: str) -> str:
        return cls.frame(
            "response.failed", {"response": cls.response("failed", error={"code": code, "message": message})}
        )

    @classmethod
    def reasoning(cls, index: int, summary: str, encrypted: str | None) -> list[str]:
        frames = [cls.reasoning_added(index)]
        frames += [cls.summary_delta(index, part) for part in split_text(summary, 2)] if summary else []
        return [*frames, cls.reasoning_done(index, summary, encrypted)]

    @classmethod
    def text_stream(
        cls,
        *texts: str,
        reasoning: str | None = None,
        encrypted: str = "enc-text",
        usage: dict[str, Any] | None = None,
    ) -> list[str]:
        frames = [cls.created()]
        index = 0
        if reasoning is not None:
            frames += cls.reasoning(0, reasoning, encrypted)
            index = 1
        frames.append(cls.message_added(index))
        frames += [cls.text_delta(index, t) for t in texts]
        frames.append(cls.message_done(index, "".join(texts)))
        return [*frames, cls.completed(usage)]

    @classmethod
    def tool_stream(
        cls,
        calls: Sequence[tuple[str, str, dict[str, Any]]],
        *,
        reasoning: str | None = None,
        encrypted: str = "enc-tools",
        fragments: int = 3,
        usage: dict[str, Any] | None = None,
    ) -> list[str]:
        """Function calls ``(call id, provider name, arguments)``, after a reasoning item when given."""
        frames = [cls.created()]
        index = 0
        if reasoning is not None:
            frames += cls.reasoning(0, reasoning, encrypted)
            index = 1
        for call_id, name, arguments in calls:
            text = json.dumps(arguments)
            frames.append(cls.call_added(index, call_id, name))
            frames += [cls.arguments_delta(index, part) for part in split_text(text, fragments)]
            frames.append(cls.call_done(index, call_id, name, text))
            index += 1
        return [*frames, cls.completed(usage)]


class ScriptedResponsesServer(ScriptedServer):
    """OpenAI Responses API: ``POST /v1/responses`` (``base_url`` ends with ``/v1``)."""

    name = "openai_responses"
    base_path = "/v1"

    def __init__(self, *, strict: bool = True, models: dict[str, ModelRules] | None = None) -> None:
        super().__init__(strict=strict, models=models)
        self.issued: set[str] = set()
        """Encrypted reasoning this server returned (the only one it accepts back)."""

    def _check_rules(self, request: ScriptedRequest) -> _rules.Rejection | None:
        if not request.path.endswith("/responses"):
            return None
        return _rules.check_responses(request.json, self.rules_for(request.json.get("model")), self.issued)

    def _observe(self, frames: Sequence[str | bytes], request: ScriptedRequest) -> Sequence[str | bytes]:
        body = request.json if isinstance(request.json, dict) else {}
        wanted = ENCRYPTED in (body.get("include") or [])
        out: list[str | bytes] = []
        for frame in frames:
            parsed = _sse_json(frame)
            item = parsed[1].get("item") if parsed is not None and isinstance(parsed[1], dict) else None
            if not isinstance(item, dict) or "encrypted_content" not in item:
                out.append(frame)
                continue
            if wanted:
                self.issued.add(str(item["encrypted_content"]))
                out.append(frame)
                continue
            head, event = parsed  # type: ignore[misc]
            stripped = {k: v for k, v in item.items() if k != "encrypted_content"}
            out.append(f"{head}data: {json.dumps({**event, 'item': stripped})}\n\n")
        return out


__all__ = ["ResponsesWire", "ScriptedResponsesServer"]
