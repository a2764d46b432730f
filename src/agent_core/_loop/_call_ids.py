"""Provider-chosen tool-call ids before they reach a column or an event (issue 14 item 4).

A tool-call id is stored verbatim in the ``tool_call_id`` columns of events and nodes, which payload
redaction does not cover. :class:`CallIdGuard` keeps a provider id only when it matches
:data:`SAFE_ID` (letters, digits and ``_ - . : @ + =``, at most 128 characters) *and* contains no secret
known to the redactor; any other id is replaced by a generated ``call_`` id, consistently for the whole
model call (live ``tool_call_delta`` events and the completed message use the same replacement). The
call's ``metadata.provider_tool_call_id`` keeps the original for diagnosis only when it holds no secret
(escaped when not printable ASCII), else a length note.

Ids are also unique within the conversation (issue 31 item 9): an id already ``taken`` (used by an earlier
call the request carries, or earlier in the run) is replaced too, so a model that reuses ``call_1`` in
every turn gets distinct stored calls, distinct audit entries and unambiguous result pairing.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence
from typing import Any

from agent_core._ids import new_id
from agent_core._redaction import Redactor
from agent_core.types.content import ToolCallBlock
from agent_core.types.model import ModelCompleted, ModelMessage

SAFE_ID = re.compile(r"[A-Za-z0-9_\-.:@+=]{1,128}")
REPLACED_NOTE = "replaced"


class TakenIds:
    """The ids a model call must not reuse: ``run``'s and those of the tool calls in ``messages``, which
    are collected on the first check only (a model call that makes no tool call never walks the whole
    conversation)."""

    __slots__ = ("_found", "_messages", "_run")

    def __init__(self, messages: Sequence[ModelMessage], run: Container[str] = frozenset()) -> None:
        self._messages = messages
        self._run = run
        self._found: set[str] | None = None

    def __contains__(self, call_id: object) -> bool:
        if call_id in self._run:
            return True
        if self._found is None:
            # the type discriminator, not isinstance against the model class (several times slower)
            self._found = {b.tool_call_id for m in self._messages for b in m.content if b.type == "tool_call"}
        return call_id in self._found


class CallIdGuard:
    """Maps provider ids to safe ids for one model call."""

    def __init__(self, redactor: Redactor, taken: Container[str] = frozenset()) -> None:
        self._redactor = redactor
        self._map: dict[str, str] = {}
        self._taken = taken

    def is_safe(self, raw: str) -> bool:
        return SAFE_ID.fullmatch(raw) is not None and self._redactor.text(raw) == raw

    def safe(self, raw: str | None) -> str | None:
        """``raw`` when it is safe, else its (memoised) generated replacement; ``None``/empty unchanged."""
        if not raw:
            return raw
        found = self._map.get(raw)
        if found is None:
            found = raw if self.is_safe(raw) and raw not in self._taken else new_id("call_")
            self._map[raw] = found
        return found

    def _metadata(self, metadata: dict[str, Any], original: str) -> dict[str, Any]:
        """``metadata`` with the original id (``provider_tool_call_id``) kept for diagnosis as long as it
        holds no known secret (then a length note); non-ASCII or control characters kept as escapes."""
        raw = metadata.get("provider_tool_call_id", original)
        if isinstance(raw, str) and self.is_safe(raw):
            return metadata
        if not isinstance(raw, str) or self._redactor.text(raw) != raw:
            size = len(raw) if isinstance(raw, str) else 0
            return {**metadata, "provider_tool_call_id": f"<{REPLACED_NOTE}: {size} chars>"}
        shown = raw if raw.isascii() and raw.isprintable() else raw.encode("unicode_escape").decode("ascii")
        if shown == metadata.get("provider_tool_call_id"):
            return metadata
        return {**metadata, "provider_tool_call_id": shown}

    def _fix(self, call_id: str, metadata: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        new = self.safe(call_id) or call_id
        meta = self._metadata(metadata, call_id)
        if new != call_id and "provider_tool_call_id" not in meta:  # a reused id: keep the original
            meta = {**meta, "provider_tool_call_id": call_id}
        if new == call_id and meta is metadata:
            return None
        return new, meta

    def apply(self, event: ModelCompleted) -> ModelCompleted:
        """``event`` with every unsafe call id (calls and their ``tool_call`` blocks, and the original id
        adapters keep in ``metadata.provider_tool_call_id``) replaced."""
        changed = False
        calls = []
        for call in event.tool_calls:
            fix = self._fix(call.tool_call_id, call.metadata)
            if fix is not None:
                changed = True
                call = call.model_copy(update={"tool_call_id": fix[0], "metadata": fix[1]})
            calls.append(call)
        content = []
        for block in event.content:
            if isinstance(block, ToolCallBlock):
                fix = self._fix(block.tool_call_id, block.metadata)
                if fix is not None:
                    changed = True
                    block = block.model_copy(update={"tool_call_id": fix[0], "metadata": fix[1]})
            content.append(block)
        if not changed:
            return event
        return event.model_copy(update={"tool_calls": calls, "content": content})
