"""Draft → row serialisation with write-time redaction (docs/storage.md#content-blocks,
docs/storage.md#redaction).

Everything here runs in the caller's task *before* a write is queued, so the writer's critical
section only binds ready-made values. ``secrets`` is the tuple from :meth:`Redactor.secrets`, computed
once per write; an empty tuple takes the fast path (no walk, direct pydantic JSON dump).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from pydantic_core import PydanticSerializationError, to_jsonable_python

from agent_core._jsontext import compact_json
from agent_core._redaction import (
    Redactor,
    redact_with,
)
from agent_core._storage._reports import (
    CompactIds,
    compact_payload,
    compact_seqs,
)
from agent_core._storage.decode import trusted
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError, StorageError
from agent_core.types.base import format_ts, utc_now
from agent_core.types.content import ContentBlock, content_list_adapter
from agent_core.types.enums import EventLevel, EventType, MessageRole, NodeType
from agent_core.types.mappers import dump_json
from agent_core.types.runtime import Node, RuntimeEvent


def _invalid(message: str) -> AgentCoreError:
    return InvalidArgumentError(ErrorCode.validation_error, message)


def _unserialisable(what: str, exc: BaseException) -> StorageError:
    return StorageError(ErrorCode.storage_error, f"cannot serialise {what}: {exc}", cause=exc)


def jsonable(value: Any, what: str, secrets: tuple[str, ...]) -> Any:
    """Redacted JSON-compatible form of ``value`` (models, datetimes, enums, paths are converted)."""
    try:
        plain = to_jsonable_python(value)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise _unserialisable(what, exc) from exc
    return redact_with(plain, secrets)


_needles: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
"""``(secrets, their raw and JSON-escaped forms)`` of the last :func:`_mentions` call (the redactor returns
the same tuple until a secret changes)."""


def _mentions(text: str, secrets: tuple[str, ...]) -> bool:
    """Whether JSON ``text`` contains a secret, raw or JSON-escaped."""
    global _needles
    if _needles[0] != secrets:
        forms = dict.fromkeys(f for s in secrets for f in (s, json.dumps(s, ensure_ascii=False)[1:-1]))
        _needles = (secrets, tuple(forms))
    return any(needle in text for needle in _needles[1])


def redacted_payload(value: Any, what: str, secrets: tuple[str, ...]) -> tuple[Any, str]:
    """``(JSON-compatible value, its JSON text)`` with secrets redacted.

    The text is dumped first and scanned for every secret (raw and JSON-escaped); only when one occurs is
    the value walked and dumped again, so the common case costs one dump and a substring scan.
    """
    try:
        plain = to_jsonable_python(value)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise _unserialisable(what, exc) from exc
    text = json_text(plain, what)
    if secrets and _mentions(text, secrets):
        plain = redact_with(plain, secrets)
        text = json_text(plain, what)
    return plain, text


def json_text(value: Any, what: str) -> str:
    try:
        return compact_json(value, strict=True)
    except (TypeError, ValueError) as exc:
        raise _unserialisable(what, exc) from exc


def json_column(value: Any, what: str, redactor: Redactor) -> str | None:
    """A ``*_json`` column value: JSON text is redacted as JSON; other values are dumped redacted;
    ``None`` and empty mappings become ``NULL``."""
    if value is None:
        return None
    if isinstance(value, str):
        return redact_json_text(value, redactor.secrets(), redactor)
    plain = jsonable(value, what, redactor.secrets())
    if isinstance(plain, dict) and not plain:
        return None
    return json_text(plain, what)


def redact_json_text(text: str | None, secrets: tuple[str, ...], redactor: Redactor) -> str | None:
    """Redacts secrets inside JSON text by value (so JSON-escaped secrets are found too).

    Text without a ``\\u`` or ``\\/`` escape spells every string the one way ``json.dumps`` does, so
    when it holds no secret raw or JSON-escaped (:func:`_mentions`) no decoded string does: it is kept
    without decoding it."""
    if text is None or not secrets:
        return text
    if "\\u" not in text and "\\/" not in text and not _mentions(text, secrets):
        return text
    try:
        value = json.loads(text)
    except ValueError:
        return redactor.text(text)
    redacted = redact_with(value, secrets)
    return text if redacted == value else dump_json(redacted)


SHARED_STRING_MAX = 32
"""String values up to this length are shared by :func:`shared_strings` (names, reasons, model ids)."""
SHARED_STRINGS_CAPACITY = 8192
"""Distinct strings :func:`shared_strings` keeps (cleared when full: bounded, unlike ``sys.intern``,
whose strings are immortal on some Python versions)."""
_shared: dict[str, str] = {}


def shared_strings(value: Any) -> Any:
    """JSON-compatible ``value`` with its mapping keys and short string values replaced by one shared
    copy of each.

    A committed node's metadata stays in memory for the rest of the session (the agent's cursor), and
    ``to_jsonable_python`` gives every mapping key a string of its own: ~28 key copies per assistant node
    (usage counters, stop reason, retry log), ~1.7 KiB. Shared, nodes hold one copy of each key and of
    repeated short values such as the model name (issue 16 target 4). Equal value, fresh containers.
    """
    if len(_shared) >= SHARED_STRINGS_CAPACITY:
        _shared.clear()
    return _share(value)


def _share(value: Any) -> Any:
    share = _shared.setdefault
    if type(value) is dict:
        return {
            (share(k, k) if type(k) is str else k): (
                share(v, v) if type(v) is str and len(v) <= SHARED_STRING_MAX else _share(v)
            )
            for k, v in value.items()
        }
    if type(value) is list:
        return [share(v, v) if type(v) is str and len(v) <= SHARED_STRING_MAX else _share(v) for v in value]
    return value


_ROLES: dict[Any, MessageRole] = {m.value: m for m in MessageRole}
_NODE_TYPES: dict[Any, NodeType] = {m.value: m for m in NodeType}
_LEVELS: dict[Any, EventLevel] = {m.value: m for m in EventLevel}
_EVENT_TYPES: dict[Any, EventType] = {m.value: m for m in EventType}
"""Member by value (a member is found too: string enum members hash and compare as their values); the
enum's own call (~1 us each through ``EnumMeta.__call__``) only for a value that is not one."""

E = TypeVar("E", bound=Enum)


def _member(members: dict[Any, E], enum: type[E], value: Any) -> E:
    """``enum(value)`` (same result, same ``ValueError``), looked up in ``members`` first."""
    try:
        return members[value]
    except (KeyError, TypeError):
        return enum(value)


_LIVE_NODE_FIELDS = set(Node.model_fields)
"""Every field is set on a committed node; pydantic only ever adds names to a fields set."""


@dataclass(slots=True)
class PreparedNode:
    draft: NodeDraft
    role: MessageRole
    node_type: NodeType
    content: list[ContentBlock]
    content_json: str
    metadata: dict[str, Any]
    metadata_json: str | None
    created_at: datetime
    created_at_text: str

    def row(self, node_seq: int, parent_id: str | None) -> tuple[Any, ...]:
        d = self.draft
        return (
            d.node_id, node_seq, parent_id, d.agent_id, d.run_id, self.role.value, self.node_type.value,
            self.content_json, self.metadata_json, d.token_count, self.created_at_text,
        )  # fmt: skip

    def node(self, session_id: str, node_seq: int, parent_id: str | None) -> Node:
        """The committed node (held by the agent's cursor for the rest of the session: one shared
        fields set instead of one per node, see :func:`~agent_core._storage.decode.trusted`)."""
        d = self.draft
        values = {
            "node_id": d.node_id,
            "node_seq": node_seq,
            "session_id": session_id,
            "parent_id": parent_id,
            "agent_id": d.agent_id,
            "run_id": d.run_id,
            "role": self.role,
            "node_type": self.node_type,
            "content": self.content,
            "metadata": self.metadata,
            "token_count": d.token_count,
            "created_at": self.created_at,
        }
        return trusted(Node, values, _LIVE_NODE_FIELDS)


def prepare_node(draft: NodeDraft, secrets: tuple[str, ...]) -> PreparedNode:
    try:
        role = _member(_ROLES, MessageRole, draft.role)
        node_type = _member(_NODE_TYPES, NodeType, draft.node_type)
    except ValueError as exc:
        raise _invalid(f"invalid node role/type: {exc}") from exc
    if draft.token_count is not None and not isinstance(draft.token_count, int):
        raise _invalid("token_count must be an int or None")
    blocks = list(draft.content)
    try:
        content_json = content_list_adapter.dump_json(blocks).decode("utf-8")
        if secrets and _mentions(content_json, secrets):
            redacted = redact_with(content_list_adapter.dump_python(blocks, mode="json"), secrets)
            blocks = content_list_adapter.validate_python(redacted)
            content_json = json_text(redacted, "node content")
    except (PydanticSerializationError, ValueError) as exc:
        raise _unserialisable("node content", exc) from exc
    metadata: Any = {}
    metadata_json: str | None = None
    if draft.metadata:
        metadata, metadata_json = redacted_payload(draft.metadata, "node metadata", secrets)
    if not isinstance(metadata, dict):
        raise _invalid("node metadata must be a mapping")
    if metadata:
        metadata = shared_strings(metadata)
    created = draft.created_at or utc_now()
    return PreparedNode(
        draft=draft,
        role=role,
        node_type=node_type,
        content=blocks,
        content_json=content_json,
        metadata=metadata,
        metadata_json=metadata_json,
        created_at=created,
        created_at_text=format_ts(created),
    )


@dataclass(slots=True)
class CompactReport:
    """A context report to be stored with seq ranges; finished by the writer (``first_new_seq``).

    The stored text is scanned for secrets once, when it is made: a report mentioning one (in a field
    kept as is, or in digits spelling it) is stored fully redacted instead, and its live event then
    carries that redacted payload (``redacted``)."""

    payload: dict[str, Any]
    seqs: dict[str, CompactIds]
    secrets: tuple[str, ...]
    redacted: dict[str, Any] | None = None

    def text(self, first_new_seq: int) -> str:
        ranges = {f: s.ranges(first_new_seq) for f, s in self.seqs.items()}
        text = json_text(compact_payload(self.payload, ranges), "event payload")
        if self.secrets and _mentions(text, self.secrets):
            plain, text = redacted_payload(self.payload, "event payload", self.secrets)
            self.redacted = plain
        return text


@dataclass(slots=True)
class PreparedEvent:
    draft: EventDraft
    level: EventLevel
    event_type: EventType
    payload: dict[str, Any]
    payload_json: str | None
    created_at: datetime
    created_at_text: str
    compact: CompactReport | None = None

    def row(self, seq: int, run_seq: int | None, first_new_seq: int = 0) -> tuple[Any, ...]:
        """``first_new_seq``: the seq of this write's first node (resolves a compact report)."""
        d = self.draft
        text = self.compact.text(first_new_seq) if self.compact is not None else self.payload_json
        return (
            d.event_id, seq, run_seq, d.agent_id, d.run_id, self.level.value, self.event_type.value,
            d.node_id, d.tool_call_id, text, self.created_at_text,
        )  # fmt: skip

    def event(self, session_id: str, seq: int, run_seq: int | None) -> RuntimeEvent:
        """The committed event (after :meth:`row`, which settles a compact report's redaction)."""
        d = self.draft
        compact = self.compact
        payload = compact.redacted if compact is not None and compact.redacted is not None else self.payload
        return RuntimeEvent.model_construct(
            event_id=d.event_id,
            seq=seq,
            run_seq=run_seq,
            session_id=session_id,
            agent_id=d.agent_id,
            run_id=d.run_id,
            level=self.level.value,
            event_type=self.event_type,
            node_id=d.node_id,
            tool_call_id=d.tool_call_id,
            data=payload,
            created_at=self.created_at,
        )


def _compacted(
    draft: EventDraft, node_seqs: Mapping[str, int], new_nodes: Mapping[str, int], secrets: tuple[str, ...]
) -> CompactReport | None:
    """A context report whose node-id lists can be stored as seq ranges (``storage/_reports.py``);
    ``None`` when none can (then the full path runs). Its other fields are scanned for secrets with the
    stored text (:meth:`CompactReport.text`)."""
    seqs = compact_seqs(draft.payload, node_seqs, new_nodes, secrets)
    if seqs is None:
        return None
    try:
        live = to_jsonable_python(draft.payload)
    except (PydanticSerializationError, TypeError, ValueError):
        return None
    return CompactReport(payload=live, seqs=seqs, secrets=secrets)


def prepare_event(
    draft: EventDraft,
    secrets: tuple[str, ...],
    node_seqs: Mapping[str, int] | None = None,
    new_nodes: Mapping[str, int] | None = None,
) -> PreparedEvent:
    """``node_seqs`` (committed node id → ``node_seq`` of the session) and ``new_nodes`` (ids of the
    nodes of the same write → ``-(k + 1)``) let a ``context_built`` report be stored compactly; the live
    event keeps the full payload."""
    try:
        level = _member(_LEVELS, EventLevel, draft.level)
        event_type = _member(_EVENT_TYPES, EventType, draft.event_type)
    except ValueError as exc:
        raise _invalid(f"invalid event level/type: {exc}") from exc
    payload: Any = {}
    payload_json: str | None = None
    compact = None
    if draft.payload and node_seqs is not None and event_type is EventType.context_built:
        compact = _compacted(draft, node_seqs, new_nodes or {}, secrets)
    if compact is not None:
        payload = compact.payload
    elif draft.payload:
        payload, payload_json = redacted_payload(draft.payload, "event payload", secrets)
    if not isinstance(payload, dict):
        raise _invalid("an event payload must be a mapping")
    created = draft.created_at or utc_now()
    return PreparedEvent(
        draft=draft,
        level=level,
        event_type=event_type,
        payload=payload,
        payload_json=payload_json,
        created_at=created,
        created_at_text=format_ts(created),
        compact=compact,
    )
