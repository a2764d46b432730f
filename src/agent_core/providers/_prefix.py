"""Per-conversation memo of the previous request, so a long history is not re-checked on every request.

The composer hands an adapter the *same* message objects request after request (nodes are immutable and
rendered once), with new messages appended. :class:`PrefixMemo` finds the longest identical prefix with the
previous request of the same conversation (session + agent) and lets the adapter reuse what it derived
from that prefix: the structural check, the tool names for the name map and (per adapter) wire entries.
Only identity is compared, so a changed or replaced message always breaks the prefix there.
"""

from __future__ import annotations

import operator
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import compress, count
from typing import Any

from agent_core.providers._tool_mapping import render_blocks
from agent_core.types.model import ModelMessage, ModelRequest, message_tool_names

MAX_CONVERSATIONS = 256


@dataclass(eq=False, slots=True)
class PrefixEntry:
    """What was derived from one conversation's previous request."""

    messages: list[ModelMessage] = field(default_factory=list)
    names: list[str] = field(default_factory=list)
    """Tool-call names in message order (duplicates kept)."""
    name_offsets: list[int] = field(default_factory=list)
    """``name_offsets[i]`` = ``len(names)`` before message ``i`` (one extra entry at the end)."""
    system_positions: list[int] = field(default_factory=list)
    """Indexes of the ``system`` messages (rare: the composer renders none)."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Adapter-specific state (e.g. wire checkpoints), valid for ``messages``."""

    def system_texts(self, request: ModelRequest) -> list[str]:
        """:func:`~agent_core.providers._tool_mapping.system_texts` of the request this entry was
        scanned for, without walking its messages."""
        texts = [block.content for block in request.system if block.content]
        for index in self.system_positions:
            text = render_blocks(request.messages[index].content)
            if text:
                texts.append(text)
        return texts


def shared_prefix(previous: list[ModelMessage], messages: list[ModelMessage]) -> int:
    """How many leading messages are the very same objects in both lists (one pass in C)."""
    limit = min(len(previous), len(messages))
    return next(compress(count(), map(operator.is_not, previous, messages)), limit)


def conversation_key(request: ModelRequest) -> tuple[str, str, str] | None:
    meta = request.metadata
    session, agent = meta.get("session_id"), meta.get("agent_id")
    if not isinstance(session, str) or not isinstance(agent, str):
        return None
    return session, agent, str(meta.get("purpose") or "")


class PrefixMemo:
    """LRU of conversations → :class:`PrefixEntry`."""

    def __init__(self, capacity: int = MAX_CONVERSATIONS) -> None:
        self._entries: OrderedDict[tuple[str, str, str], PrefixEntry] = OrderedDict()
        self._capacity = capacity

    def scan(self, request: ModelRequest) -> tuple[PrefixEntry, int]:
        """Checks the request's messages and collects their tool names, reusing the common prefix.

        Returns the conversation's entry (updated for this request) and the length of the prefix shared
        with the previous request. Raises ``SchemaError`` like :func:`validate_request_messages`.
        """
        key = conversation_key(request)
        old = self._entries.get(key) if key is not None else None
        messages = request.messages
        shared = shared_prefix(old.messages, messages) if old is not None else 0
        entry = PrefixEntry()
        if old is not None and shared:
            entry.names = old.names[: old.name_offsets[shared]]
            entry.name_offsets = old.name_offsets[:shared]
            entry.system_positions = [i for i in old.system_positions if i < shared]
            entry.extra = old.extra
        for index, message in enumerate(messages[shared:], shared):
            entry.name_offsets.append(len(entry.names))
            entry.names.extend(message_tool_names(message))
            if message.role == "system":
                entry.system_positions.append(index)
        entry.name_offsets.append(len(entry.names))
        entry.messages = list(messages)
        if key is not None:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)
        return entry, shared
