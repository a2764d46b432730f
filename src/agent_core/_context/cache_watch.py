"""Prompt-cache break detection (issue 33): a request whose prefix diverges from the agent's previous one.

A provider's cache holds the previous request of the agent up to its last breakpoint, which is its end
(the rolling breakpoint on its last message). The next request reuses it only if it repeats that request
verbatim: the same tool definitions, the same system blocks, then the same messages. :class:`CacheWatch`
keeps the parts of an agent's last request (on its cursor, across its runs) and :meth:`CacheWatch.check`
names the first part of a new request that differs from them. The loop reports it as a ``debug``-level
``prompt_cache_break`` event. Under the stable-prefix rule (``prefix.py``) a break happens only where the
context is rebuilt (compaction, trimming), when the tools or a static block change, or for the limits'
final answer call (sent without tools); anything else is a defect worth the event.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress, count
from typing import Any

from agent_core.types.model import ModelMessage, ModelRequest, SystemBlock
from agent_core.types.tools import ToolDefinition


@dataclass(frozen=True, kw_only=True, slots=True)
class CacheBreak:
    """Where a request stopped repeating the previous one."""

    part: str
    """``tools``, ``system`` or ``messages``: the part of the prompt where the prefix diverges."""
    first_changed: str
    """The first tool (``tool:<name>``), system block (``system:<block_id>``) or message
    (``message:<index>:<role>[:<source>]``) that differs; ``…:removed`` when the previous request had
    more of them."""
    reused_messages: int
    """Leading messages both requests share (0 when the break is in the tools or the system)."""
    previous_messages: int
    cause: str | None = None
    """Why the composer rebuilt the context for this request (``compaction``, ``rebuild``, ``rewind``),
    when it did."""

    def payload(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "first_changed": self.first_changed,
            "reused_messages": self.reused_messages,
            "previous_messages": self.previous_messages,
            "cause": self.cause,
        }


def _first_difference(previous: Sequence[Any], current: Sequence[Any]) -> int | None:
    """Index of the first item of ``previous`` that ``current`` does not repeat (identity in one C pass,
    then equality for the items that are not the same objects); ``None`` when ``previous`` is a prefix
    of ``current``."""
    limit = min(len(previous), len(current))
    if limit == len(previous) and current[:limit] == previous:  # the usual case, compared in C
        return None
    start = next(compress(count(), map(operator.is_not, previous, current)), limit)
    for index in range(start, limit):
        if previous[index] is not current[index] and previous[index] != current[index]:
            return index
    return limit if limit < len(previous) else None


def _whole(previous: Sequence[Any], current: Sequence[Any]) -> int | None:
    """Like :func:`_first_difference`, for a part that must repeat whole (tools, system blocks)."""
    index = _first_difference(previous, current)
    if index is None and len(current) != len(previous):
        return len(previous)
    return index


def _named(kind: str, names: Sequence[str], index: int) -> str:
    return f"{kind}:{names[index]}" if index < len(names) else f"{kind}:removed"


class CacheWatch:
    """The parts of an agent's last request (see the module docstring)."""

    __slots__ = ("messages", "system", "system_blocks", "tools")

    def __init__(self) -> None:
        self.tools: list[ToolDefinition] | None = None
        """The tool definitions of the last request (``None``: no request yet)."""
        self.system: list[tuple[str, str]] = []
        self.system_blocks: list[SystemBlock] = []
        """The system blocks of the last request (a fork starts its own requests with them)."""
        self.messages: list[ModelMessage] = []

    def check(self, request: ModelRequest, cause: str | None = None) -> CacheBreak | None:
        """Compares ``request`` with the agent's previous request, then remembers it; ``cause``: why the
        composer rebuilt the context for it, if it did."""
        previous_tools, previous_system, previous = self.tools, self.system, self.messages
        system = [(b.block_id, b.content) for b in request.system]
        self.tools, self.system, self.messages = list(request.tools), system, list(request.messages)
        self.system_blocks = list(request.system)
        if previous_tools is None:
            return None
        index = _whole(previous_tools, request.tools)
        if index is not None:
            first = _named("tool", [t.name for t in request.tools], index)
            return CacheBreak(
                part="tools",
                first_changed=first,
                reused_messages=0,
                previous_messages=len(previous),
                cause=cause,
            )
        index = _whole(previous_system, system)
        if index is not None:
            first = _named("system", [b[0] for b in system], index)
            return CacheBreak(
                part="system",
                first_changed=first,
                reused_messages=0,
                previous_messages=len(previous),
                cause=cause,
            )
        index = _first_difference(previous, request.messages)
        if index is None:
            return None
        return CacheBreak(
            part="messages",
            first_changed=_message_name(request.messages, index),
            reused_messages=index,
            previous_messages=len(previous),
            cause=cause,
        )


def _message_name(messages: Sequence[ModelMessage], index: int) -> str:
    if index >= len(messages):
        return f"message:{index}:removed"
    message = messages[index]
    source = message.metadata.get("source") or message.metadata.get("source_node_type")
    return f"message:{index}:{message.role}" + (f":{source}" if source else "")
