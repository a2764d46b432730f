"""Tool-name mangling (docs/providers.md#tool-names) and content rendering to text
(docs/providers.md#content-sent-as-text).

Mangling contract: canonical dotted names (``code.read_file``) become provider-safe names matching
``^[a-zA-Z0-9_-]{1,64}$``. The map is built per request from ``request.tools`` plus every ``tool_call``
block in ``request.messages``; reverse mapping uses only that map, and an unknown returned name is
passed through unchanged (core then answers ``tool_not_available``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

from agent_core._jsontext import compact_json
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    JsonBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.model import ModelMessage, ModelRequest, message_tool_names

PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_DISALLOWED = re.compile(r"[^a-zA-Z0-9_-]")
_PREFIX_MAX = 55
_HASH_LEN = 8


def base_form(canonical: str) -> str:
    """Step 1 of the algorithm: every ``.`` becomes ``__``."""
    return canonical.replace(".", "__")


def hashed_form(canonical: str, hex_len: int = _HASH_LEN) -> str:
    """Step 2: ``<sanitised prefix, max 55 chars>_<first hex of sha1(canonical)>``."""
    prefix = _DISALLOWED.sub("_", base_form(canonical))[:_PREFIX_MAX]
    digest = hashlib.sha1(canonical.encode("utf-8")).hexdigest()[:hex_len]
    return f"{prefix}_{digest}"


def _build_maps(names: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """``(canonical -> provider, provider -> canonical)`` of de-duplicated ``names`` in first-seen order."""
    bases: dict[str, list[str]] = {}
    for name in names:
        bases.setdefault(base_form(name), []).append(name)
    to_provider: dict[str, str] = {}
    for name in names:
        base = base_form(name)
        if PROVIDER_NAME.match(base) and len(bases[base]) == 1:
            to_provider[name] = base
    taken = set(to_provider.values())
    for name in names:
        if name in to_provider:
            continue
        hex_len = _HASH_LEN
        candidate = hashed_form(name, hex_len)
        # A hashed form may (pathologically) equal another name's form; lengthen the digest.
        while candidate in taken:
            hex_len += 2
            candidate = hashed_form(name, hex_len)[-64:]
        to_provider[name] = candidate
        taken.add(candidate)
    return to_provider, {v: k for k, v in to_provider.items()}


_BUILT: dict[tuple[str, ...], tuple[dict[str, str], dict[str, str]]] = {}
"""Maps already built, by their name tuple (a pure function of it; every request of a run, and every run
of a session, sends the same tools). The maps are never changed after they are built."""
_BUILT_CAPACITY = 256


class ToolNameMap:
    """Bidirectional, per-request canonical <-> provider tool-name map."""

    __slots__ = ("_to_canonical", "_to_provider")

    def __init__(self, canonical_names: Iterable[str] = ()) -> None:
        names = tuple(dict.fromkeys(canonical_names))
        maps = _BUILT.get(names)
        if maps is None:
            if len(_BUILT) >= _BUILT_CAPACITY:
                _BUILT.clear()
            maps = _BUILT[names] = _build_maps(names)
        self._to_provider, self._to_canonical = maps

    @classmethod
    def for_request(cls, request: ModelRequest) -> ToolNameMap:
        """Map over the request's tools plus every tool name used in its message history."""
        names = [tool.name for tool in request.tools]
        for message in request.messages:
            names.extend(message_tool_names(message))
        return cls(names)

    def mangle(self, canonical: str) -> str:
        """Provider name for ``canonical``; names outside the map get the same algorithm, unmapped."""
        found = self._to_provider.get(canonical)
        if found is not None:
            return found
        base = base_form(canonical)
        return base if PROVIDER_NAME.match(base) else hashed_form(canonical)

    def unmangle(self, provider_name: str) -> str:
        """Canonical name for a returned provider name; unknown names pass through unchanged."""
        return self._to_canonical.get(provider_name, provider_name)

    def items(self) -> list[tuple[str, str]]:
        """``(canonical, provider)`` pairs in first-seen order."""
        return list(self._to_provider.items())

    def __contains__(self, canonical: object) -> bool:
        return canonical in self._to_provider

    def __len__(self) -> int:
        return len(self._to_provider)


def render_block(block: ContentBlock) -> str:
    """Text rendering of one content block (docs/providers.md#content-sent-as-text)."""
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, JsonBlock):
        if block.artifact_id:
            return f"{block.summary or ''}\n[artifact {block.artifact_id}]"
        if block.data is not None:
            return compact_json(_without_null_fields(block.data))
        return block.summary if block.summary is not None else "null"
    if isinstance(block, ArtifactRefBlock):
        text = f"[artifact {block.artifact_id}: {block.summary or ''}"
        if block.mime_type:
            text += f" ({block.mime_type})"
        return text + "]"
    if isinstance(block, ToolResultBlock):
        return render_blocks(block.content)
    if isinstance(block, ImageBlock):
        return f"[image {block.artifact_id} ({block.mime_type})]"
    if isinstance(block, DocumentBlock):
        return f"[document {block.artifact_id} ({block.mime_type})]"
    if isinstance(block, ReasoningBlock):
        return ""  # reasoning never becomes text of a message
    return compact_json({"tool_call": block.name, "arguments": block.arguments})


def _without_null_fields(data: object) -> object:
    """An object's top-level ``null`` fields left out (absent means null; a tool result such as
    ``code.read_file``'s names every optional field, and each one costs tokens at every later request).
    Nested values and other types are sent as they are."""
    if isinstance(data, dict):
        return {key: value for key, value in data.items() if value is not None}
    return data


def render_blocks(blocks: Sequence[ContentBlock]) -> str:
    """Renders several blocks, joined by newlines (empty renderings are skipped)."""
    return "\n".join(text for text in (render_block(b) for b in blocks) if text)


def render_tool_result(block: ToolResultBlock, *, provider_has_error_flag: bool) -> str:
    """Rendering of a tool result; without a provider error flag errors get ``[error <code>] ``."""
    text = render_blocks(block.content)
    if block.is_error:
        if not text and block.error is not None:
            text = block.error.message
        if not provider_has_error_flag:
            code = block.error.code.value if block.error is not None else "tool_error"
            text = f"[error {code}] {text}"
    return text


def system_texts(request: ModelRequest) -> list[str]:
    """System block contents in order, then the text of any ``system`` messages
    (docs/providers.md#the-protocol Decision)."""
    texts = [block.content for block in request.system if block.content]
    for message in request.messages:
        if message.role == "system":
            text = render_blocks(message.content)
            if text:
                texts.append(text)
    return texts


def conversation(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """Non-system messages with consecutive ``tool`` messages merged into one, and consecutive
    ``assistant`` messages (a ``max_tokens`` continuation chain) merged into one whose adjoining text
    blocks are concatenated, so no request ends with two assistant messages (llama.cpp rejects that).

    Tool results in a merged message follow the order of the preceding assistant's tool calls
    (pairing by ``tool_call_id``); results without a matching call keep their relative order at the end.
    """
    out: list[ModelMessage] = []
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool" and out and out[-1].role == "tool":
            out[-1] = out[-1].model_copy(update={"content": [*out[-1].content, *message.content]})
        elif message.role == "assistant" and out and out[-1].role == "assistant":
            head, tail = list(out[-1].content), list(message.content)
            last, first = (head[-1], tail[0]) if head and tail else (None, None)
            if isinstance(last, TextBlock) and isinstance(first, TextBlock):
                head[-1] = TextBlock(text=last.text + first.text)
                tail = tail[1:]
            out[-1] = out[-1].model_copy(update={"content": [*head, *tail]})
        else:
            out.append(message)
    result: list[ModelMessage] = []
    call_order: dict[str, int] = {}
    for message in out:
        if message.role == "assistant":
            ids = [b.tool_call_id for b in message.content if isinstance(b, ToolCallBlock)]
            call_order = {cid: i for i, cid in enumerate(ids)}
        if message.role == "tool":
            ordered = sorted(
                enumerate(message.content),
                key=lambda pair: (
                    call_order.get(getattr(pair[1], "tool_call_id", ""), len(call_order)),
                    pair[0],
                ),
            )
            message = message.model_copy(update={"content": [block for _, block in ordered]})
        result.append(message)
    return result


def tool_call_names(messages: Sequence[ModelMessage]) -> dict[str, str]:
    """``tool_call_id -> canonical name`` over every assistant ``tool_call`` block."""
    names: dict[str, str] = {}
    for message in messages:
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                names[block.tool_call_id] = block.name
    return names
