"""The Chat Completions request body (docs/providers.md#openai): as a mapping, and encoded incrementally.

:func:`build_payload` is the body as a plain mapping (pure). :func:`encode_body` gives exactly
``json.dumps(build_payload(request, name_map), ensure_ascii=False).encode("utf-8")``, but keeps every
message's encoded entry (a :class:`~agent_core._memo.WireMemo` keyed by the message or block object) and,
with the conversation's :class:`~agent_core.providers._prefix.PrefixEntry`, the encoded history up to the
last user message shared with the previous request: a request over a long session encodes only its new
messages and joins bytes, instead of rebuilding and re-encoding the whole history. The encoded entries
are also the only copy of the wire form an adapter keeps (no entry mappings).

``json.dumps`` with its default separators encodes a list as ``"[" + ", ".join(items) + "]"`` and a
mapping as ``"{" + ", ".join(key + ": " + value) + "}"``, so joining encoded entries gives the same bytes.
"""

from __future__ import annotations

import bisect
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent_core._memo import WireMemo
from agent_core.providers._media import data_url, document_filename
from agent_core.providers._model_fields import RequestFields
from agent_core.providers._prefix import PrefixEntry
from agent_core.providers._tool_mapping import (
    ToolNameMap,
    render_blocks,
    render_tool_result,
    system_texts,
)
from agent_core.types.content import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    ReasoningBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.model import ModelMessage, ModelRequest, ToolChoiceNamed
from agent_core.types.tools import ToolDefinition

OPTION_KEYS = frozenset({"top_p", "seed", "parallel_tool_calls", "user", "response_format"})
MEMO_CAPACITY = 2048
"""Entries the encoder's memo keeps (the latest messages and the tool definitions in use)."""
SYSTEM_PIECES_CAPACITY = 64
"""System texts whose encoding the encoder keeps (static blocks, catalogs, per-run state blocks)."""
_MEMO_KEY = "openai"
"""Key of this encoder's state in ``PrefixEntry.extra``."""


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


# -- one message's entry ------------------------------------------------------------------------------
Attachments = dict[str, bytes]


def media_part(block: ImageBlock | DocumentBlock, attachments: Attachments) -> dict[str, Any]:
    """A Chat Completions content part: ``image_url`` with a data URL, or a ``file`` part for a PDF."""
    data = attachments.get(block.artifact_id, b"")
    if isinstance(block, ImageBlock):
        image: dict[str, Any] = {"url": data_url(block.mime_type, data)}
        if block.detail is not None:
            image["detail"] = block.detail
        return {"type": "image_url", "image_url": image}
    return {
        "type": "file",
        "file": {"filename": document_filename(block), "file_data": data_url(block.mime_type, data)},
    }


def content_parts(blocks: list[ContentBlock], attachments: Attachments) -> str | list[dict[str, Any]]:
    """The content of a user entry: its rendered text, or text and media parts when it has media."""
    if not any(isinstance(b, ImageBlock | DocumentBlock) for b in blocks):
        return render_blocks(blocks)
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if isinstance(block, ImageBlock | DocumentBlock):
            parts.append(media_part(block, attachments))
        else:
            text = render_blocks([block])
            if text:
                parts.append({"type": "text", "text": text})
    return parts


def user_entry(message: ModelMessage, attachments: Attachments | None = None) -> dict[str, Any]:
    return {"role": "user", "content": content_parts(list(message.content), attachments or {})}


def tool_entry(block: ToolResultBlock) -> dict[str, Any]:
    content = render_tool_result(block, provider_has_error_flag=False)
    return {"role": "tool", "tool_call_id": block.tool_call_id, "content": content}


def tool_media_entry(blocks: list[ToolResultBlock], attachments: Attachments) -> dict[str, Any] | None:
    """Chat Completions takes only text in a tool message: the images and PDFs tool results returned
    follow in one user message, each introduced by the call it came from."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        media = [b for b in block.content if isinstance(b, ImageBlock | DocumentBlock)]
        if media:
            parts.append({"type": "text", "text": f"[attached by tool call {block.tool_call_id}]"})
            parts += [media_part(b, attachments) for b in media]
    return {"role": "user", "content": parts} if parts else None


def assistant_entry(message: ModelMessage, name_map: ToolNameMap) -> dict[str, Any]:
    text = render_blocks([b for b in message.content if not isinstance(b, ToolCallBlock | ReasoningBlock)])
    entry: dict[str, Any] = {"role": "assistant", "content": text or None}
    reasoning = [b.text for b in message.content if isinstance(b, ReasoningBlock) and b.provider == "openai"]
    if any(
        reasoning
    ):  # a server that streamed ``reasoning_content`` (DeepSeek, vLLM, llama.cpp) reads it back
        entry["reasoning_content"] = "\n\n".join(t for t in reasoning if t)
    blocks = [b for b in message.content if isinstance(b, ToolCallBlock)]
    if blocks:
        entry["tool_calls"] = [
            {
                "id": b.tool_call_id,
                "type": "function",
                "function": {
                    "name": name_map.mangle(b.name),
                    "arguments": json.dumps(b.arguments, ensure_ascii=False),
                },
            }
            for b in blocks
        ]
    return entry


def merge_assistant(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """One entry for consecutive assistant messages, texts concatenated: llama.cpp rejects a request
    ending with two assistant messages."""
    text = (first.get("content") or "") + (second.get("content") or "")
    merged: dict[str, Any] = {"role": "assistant", "content": text or None}
    reasoning = "\n\n".join(r for r in (first.get("reasoning_content"), second.get("reasoning_content")) if r)
    if reasoning:
        merged["reasoning_content"] = reasoning
    calls = [*first.get("tool_calls", []), *second.get("tool_calls", [])]
    if calls:
        merged["tool_calls"] = calls
    return merged


def _call_ids(message: ModelMessage) -> list[str]:
    return [b.tool_call_id for b in message.content if isinstance(b, ToolCallBlock)]


# -- the history --------------------------------------------------------------------------------------
Emit = Callable[[str, Any], Any]
"""``emit(role, key)`` → one entry: ``key`` is the user or assistant message, or the tool result block."""
Chain = Callable[[list[ModelMessage]], Any]
"""The one entry of consecutive assistant messages."""


def wire_messages(
    source: Sequence[ModelMessage],
    emit: Emit,
    chain: Chain,
    checkpoints: list[tuple[int, int]] | None = None,
    offset: int = 0,
    base: int = 0,
) -> list[Any]:
    """Non-system messages in wire form (entries as ``emit`` makes them). Consecutive tool messages form
    one group whose results follow the preceding assistant's tool-call order (unmatched results keep
    their order at the end), one ``tool`` entry per result; consecutive assistant messages become one
    entry (``chain``). ``checkpoints`` gets ``(message index, entries before it)`` of each user message
    (``offset``/``base``: where ``source`` starts in the whole history and in its entries)."""
    out: list[Any] = []
    call_order: dict[str, int] = {}
    tools: list[ToolResultBlock] = []
    assistants: list[ModelMessage] = []
    """The assistant chain the last entry encodes (empty when the last entry is not an assistant's)."""

    def flush_tools() -> None:
        blocks = tools
        if len(tools) > 1:
            ranked = sorted(
                enumerate(tools),
                key=lambda pair: (call_order.get(pair[1].tool_call_id, len(call_order)), pair[0]),
            )
            blocks = [block for _, block in ranked]
        out.extend([emit("tool", block) for block in blocks])
        if any(isinstance(b, ImageBlock | DocumentBlock) for block in blocks for b in block.content):
            media = emit("tool_media", list(blocks))
            if media is not None:
                out.append(media)
        tools.clear()

    for position, message in enumerate(source, offset):
        role = message.role
        if role == "system":
            continue
        if role == "tool":
            tools.extend(b for b in message.content if isinstance(b, ToolResultBlock))
            continue
        if tools:
            flush_tools()
            assistants = []
        if role == "user":
            if checkpoints is not None and (not checkpoints or checkpoints[-1][0] < position):
                checkpoints.append((position, base + len(out)))
            out.append(emit("user", message))
            assistants = []
        elif assistants:  # a max_tokens continuation chain
            assistants.append(message)
            out[-1] = chain(assistants)
            ids = [cid for member in assistants for cid in _call_ids(member)]
            call_order = {cid: i for i, cid in enumerate(ids)}
        else:
            assistants = [message]
            out.append(emit("assistant", message))
            call_order = {cid: i for i, cid in enumerate(_call_ids(message))}
    if tools:
        flush_tools()
    return out


def _plain_emit(name_map: ToolNameMap, attachments: Attachments) -> Emit:
    def emit(role: str, key: Any) -> dict[str, Any] | None:
        if role == "tool":
            return tool_entry(key)
        if role == "tool_media":
            return tool_media_entry(key, attachments)
        if role == "user":
            return user_entry(key, attachments)
        return assistant_entry(key, name_map)

    return emit


def _plain_chain(name_map: ToolNameMap) -> Chain:
    def chain(messages: list[ModelMessage]) -> dict[str, Any]:
        entry = assistant_entry(messages[0], name_map)
        for message in messages[1:]:
            entry = merge_assistant(entry, assistant_entry(message, name_map))
        return entry

    return chain


def default_fields(request: ModelRequest) -> RequestFields:
    """The fields of a request with no reasoning configured (``temperature``, ``max_tokens``)."""
    return RequestFields(request.temperature, "max_tokens", request.max_output_tokens)


def _head(request: ModelRequest, fields: RequestFields | None = None) -> list[tuple[str, Any]]:
    """The body's fields in order; ``messages`` and ``tools`` hold the request's own lists. ``fields``
    (``providers/_model_fields.py``) names the output-limit field and what reasoning sends."""
    chosen = fields or default_fields(request)
    head: list[tuple[str, Any]] = [
        ("model", request.model),
        ("messages", request.messages),
        ("stream", True),
        ("stream_options", {"include_usage": True}),
    ]
    if chosen.temperature is not None:
        head.append(("temperature", chosen.temperature))
    if chosen.max_output_tokens is not None:
        head.append((chosen.token_field, chosen.max_output_tokens))
    if chosen.reasoning_effort is not None:
        head.append(("reasoning_effort", chosen.reasoning_effort))
    if request.stop_sequences:
        head.append(("stop", list(request.stop_sequences)))
    return head


Fields = Sequence[tuple[str, Any]]
"""Extra body fields an adapter adds after the others (the prompt-cache fields)."""


def _tail(request: ModelRequest, name_map: ToolNameMap, extra: Fields = ()) -> list[tuple[str, Any]]:
    """The fields after ``stop``: ``tools`` (the request's list), ``tool_choice``, provider options, then
    ``extra``."""
    fields: list[tuple[str, Any]] = []
    if request.tools:
        fields.append(("tools", request.tools))
        choice = request.tool_choice
        if isinstance(choice, ToolChoiceNamed):
            fields.append(
                ("tool_choice", {"type": "function", "function": {"name": name_map.mangle(choice.name)}})
            )
        else:
            fields.append(("tool_choice", choice))
    for key, value in request.provider_options.get("openai", {}).items():
        if key in OPTION_KEYS:
            fields.append((key, value))
    fields.extend(extra)
    return fields


def tool_entry_of(tool: ToolDefinition, name_map: ToolNameMap) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name_map.mangle(tool.name),
            "description": tool.description,
            "parameters": tool.input_schema,
        },
    }


def build_payload(
    request: ModelRequest, name_map: ToolNameMap, extra: Fields = (), fields: RequestFields | None = None
) -> dict[str, Any]:
    """The ``POST /chat/completions`` body for ``request`` (pure); ``extra`` fields come last."""
    payload: dict[str, Any] = {}
    for key, value in [*_head(request, fields), *_tail(request, name_map, extra)]:
        if key == "messages":
            messages: list[dict[str, Any]] = []
            system = system_texts(request)
            if system:
                messages.append({"role": "system", "content": "\n\n".join(system)})
            emit = _plain_emit(name_map, request.attachments)
            messages += wire_messages(request.messages, emit, _plain_chain(name_map))
            value = messages
        elif key == "tools":
            value = [tool_entry_of(tool, name_map) for tool in request.tools]
        payload[key] = value
    return payload


# -- the encoded body ---------------------------------------------------------------------------------
class BodyEncoder:
    """Encodes request bodies, keeping each message's and tool's encoded entry (``memo``).

    A memo entry of an assistant message or a tool records the provider names it was encoded with and is
    used only while the request's name map still gives them.
    """

    __slots__ = ("_system_pieces", "memo")

    def __init__(self, memo: WireMemo | None = None) -> None:
        # the conversations' encoded histories keep their entries: the memo only needs the recent ones
        self.memo = memo if memo is not None else WireMemo(capacity=MEMO_CAPACITY)
        self._system_pieces: dict[str, bytes] = {}
        """System texts → their JSON-escaped UTF-8 bodies (cleared when it reaches its capacity)."""

    def encode(
        self,
        request: ModelRequest,
        name_map: ToolNameMap,
        prefix: tuple[PrefixEntry, int] | None = None,
        extra: Fields = (),
        fields: RequestFields | None = None,
    ) -> bytes:
        """``json.dumps(build_payload(request, name_map, extra, fields), ensure_ascii=False)`` as UTF-8
        bytes.

        ``prefix`` = (the conversation's entry, messages shared with its previous request): the encoded
        history up to the last user message within the shared part is reused.
        """
        out: list[bytes] = [b"{"]
        for index, (key, value) in enumerate([*_head(request, fields), *_tail(request, name_map, extra)]):
            out += (b", " if index else b"", _dumps(key), b": ")
            if key == "messages":
                _list_into(out, self._messages(request, name_map, prefix))
            elif key == "tools":
                _list_into(out, [self._tool(tool, name_map) for tool in request.tools])
            else:
                out.append(_dumps(value))
        out.append(b"}")
        return b"".join(out)  # the one copy of the history: no intermediate joins

    def _tool(self, tool: ToolDefinition, name_map: ToolNameMap) -> bytes:
        name = name_map.mangle(tool.name)
        cached: tuple[str, bytes] | None = self.memo.get(tool)
        if cached is not None and cached[0] == name:
            return cached[1]
        encoded = _dumps(tool_entry_of(tool, name_map))
        self.memo.put(tool, (name, encoded))
        return encoded

    def _messages(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None
    ) -> list[bytes]:
        system = prefix[0].system_texts(request) if prefix is not None else system_texts(request)
        head = [self._system_entry(system)] if system else []
        source = request.messages
        emit = self._emitter(name_map, request.attachments)
        chain = _encoded_chain(name_map)
        if prefix is None:
            return head + wire_messages(source, emit, chain)
        entry, shared = prefix
        names = tuple(name_map.items())
        state = entry.extra.get(_MEMO_KEY)
        start, base = 0, 0
        out: list[bytes] = []
        checkpoints: list[tuple[int, int]] = []
        if state is not None and state[0] == names:
            known: list[tuple[int, int]] = state[1]
            # the checkpoints at user messages up to the first unshared message stay valid
            checkpoints = known[: bisect.bisect_right(known, (shared, sys.maxsize))]
            if checkpoints:
                start, base = checkpoints[-1]
                out = state[2][:base]
        out += wire_messages(source[start:], emit, chain, checkpoints, start, base)
        entry.extra[_MEMO_KEY] = (names, checkpoints, out)
        return head + out

    def _system_entry(self, texts: list[str]) -> bytes:
        """``_dumps({"role": "system", "content": "\\n\\n".join(texts)})`` from each text's JSON string
        body, kept between requests (JSON escapes character by character, so escaped pieces concatenate
        to the escaped whole; the system prompt is re-sent, mostly unchanged, with every request)."""
        pieces = self._system_pieces
        parts: list[bytes] = []
        for text in texts:
            body = pieces.get(text)
            if body is None:
                if len(pieces) >= SYSTEM_PIECES_CAPACITY:
                    pieces.clear()
                body = pieces[text] = _dumps(text)[1:-1]
            parts.append(body)
        return b'{"role": "system", "content": "' + b"\\n\\n".join(parts) + b'"}'

    def _emitter(self, name_map: ToolNameMap, attachments: Attachments) -> Emit:
        memo = self.memo

        def emit(role: str, key: Any) -> bytes | None:
            if role == "tool_media":
                entry = tool_media_entry(key, attachments)
                return None if entry is None else _dumps(entry)
            cached = memo.get(key)
            if role == "assistant":
                if cached is not None and all(name_map.mangle(c) == p for c, p in cached[1]):
                    encoded: bytes = cached[0]
                    return encoded
                encoded = _dumps(assistant_entry(key, name_map))
                calls = [b for b in key.content if isinstance(b, ToolCallBlock)]
                memo.put(key, (encoded, tuple((b.name, name_map.mangle(b.name)) for b in calls)))
                return encoded
            if cached is None:
                cached = _dumps(tool_entry(key) if role == "tool" else user_entry(key, attachments))
                memo.put(key, cached)
            encoded_entry: bytes = cached
            return encoded_entry

        return emit


def _list_into(out: list[bytes], entries: list[bytes]) -> None:
    """Appends the pieces of the JSON array of ``entries`` (``[a, b]``) to ``out`` without joining them."""
    pieces = [b", "] * (2 * len(entries) - 1) if entries else []
    pieces[::2] = entries
    out.append(b"[")
    out += pieces
    out.append(b"]")


def _encoded_chain(name_map: ToolNameMap) -> Chain:
    plain = _plain_chain(name_map)

    def chain(messages: list[ModelMessage]) -> bytes:
        return _dumps(plain(messages))

    return chain
