"""Stored rows → runtime types for the read paths (replay, inspect, node paths; docs/storage.md#tables).

Rows of ``nodes_<sid>``/``events_<sid>`` are written only by the single writer from drafts that were
validated and serialised at write time (:mod:`agent_core._storage.rows`), so a read does not validate
every value again: it checks what the table schema does not guarantee (the enum-like columns, the
JSON columns' top-level shape, the timestamp, the integer columns) and builds the models directly
(:func:`trusted`). A row that fails a check, or a content block whose keys are not exactly its model's
fields, goes through full pydantic validation, so bad data still ends in ``schema_error``.

Read-time key redaction (``redact_keys``): rows are prefiltered a chunk at a time by their JSON text
(:func:`~agent_core._redaction.texts_may_hold_keys`: no sensitive word, no escape → nothing to mask);
the decoded values of the other rows are walked exactly (:func:`~agent_core._redaction.has_sensitive_keys`)
and only what that walk finds is masked.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator, core_schema, from_json

from agent_core._redaction import has_sensitive_keys, redact_sensitive_keys, texts_may_hold_keys
from agent_core._storage._reports import MARKER, expand_report
from agent_core.errors import ErrorCode, SchemaError
from agent_core.types.base import parse_ts
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    content_list_adapter,
)
from agent_core.types.enums import EndReason, EventLevel, EventType, MessageRole, NodeType, RunStatus
from agent_core.types.mappers import permission_mode_of, record_from_row, run_info_from_record
from agent_core.types.runtime import Node, RunInfo, RuntimeEvent
from agent_core.types.storage import AgentRecord, RunRecord
from agent_core.types.storage import _is_stored_form as is_stored_ts

M = TypeVar("M", bound=BaseModel)

_EVENT_TYPES = {e.value: e for e in EventType}
_LEVELS = frozenset(e.value for e in EventLevel)
_ROLES: dict[str, MessageRole] = {e.value: e for e in MessageRole}
_NODE_TYPES: dict[str, NodeType] = {e.value: e for e in NodeType}
_BLOCKS: dict[str, type[BaseModel]] = {
    "text": TextBlock,
    "json": JsonBlock,
    "tool_call": ToolCallBlock,
    "tool_result": ToolResultBlock,
    "artifact_ref": ArtifactRefBlock,
}
_BLOCK_FIELDS = {kind: frozenset(cls.model_fields) for kind, cls in _BLOCKS.items()}


def trusted(cls: type[M], values: dict[str, Any], fields_set: set[str]) -> M:
    """An instance of ``cls`` holding ``values`` (every field, already of its field type) without
    validation: :meth:`BaseModel.model_construct` with ``fields_set`` (every field name), which may be
    shared by many long-lived instances (pydantic only ever adds names to it, and every name is in it
    already): one set instead of one per instance. Many instances at once: :func:`trusted_builder`."""
    return cls.model_construct(_fields_set=fields_set, **values)


_BUILDERS: dict[type[BaseModel], Callable[[dict[str, Any]], Any]] = {}


def trusted_builder(cls: type[M]) -> Callable[[dict[str, Any]], M]:
    """A fast builder of ``cls`` instances from dicts of every field's value, already of its field type,
    without validation: pydantic-core's model constructor (public ``pydantic_core`` API) on a schema whose
    fields accept any value — what :func:`trusted` does, in one native call (~5x faster than
    ``model_construct``, which loops over the fields in Python). Only for models without validators that
    must run, private attributes or extras; ``tests/unit/test_storage_decode.py`` checks the result equals
    a validated instance."""
    builder = _BUILDERS.get(cls)
    if builder is None:
        fields = {name: core_schema.model_field(core_schema.any_schema()) for name in cls.model_fields}
        schema = core_schema.model_schema(cls, core_schema.model_fields_schema(fields))
        builder = _BUILDERS[cls] = SchemaValidator(schema).validate_python
    return builder


_SEQ = itemgetter(1)


def in_seq_order(rows: list[Any]) -> list[Any]:
    """``nodes_<sid>``/``events_<sid>`` rows sorted by their seq (the second column), in place.

    The reads select without ``ORDER BY``: SQLite returns the rows in rowid (insertion) order or in the
    order of the index it filters by, both the writer's seq order within an agent or run, so this sort
    is a few linear merges; an ``ORDER BY`` instead walks the seq index and looks every row up, or sorts
    the rows with their JSON text in a temporary B-tree after an agent filter (~40 % of reading a
    session's nodes). A seq that is not an int cannot be compared:
    the rows stay as read and the decoder rejects the row (``schema_error``)."""
    with contextlib.suppress(TypeError):
        rows.sort(key=_SEQ)
    return rows


def read_error(what: str, exc: BaseException) -> SchemaError:
    return SchemaError(ErrorCode.schema_error, f"cannot convert {what}: {exc}", cause=exc)


def _ts(text: str) -> datetime:
    """:func:`parse_ts` with a fast path for the stored ``...Z`` form."""
    try:
        value = datetime.fromisoformat(text)
    except (ValueError, TypeError):
        return parse_ts(text)
    return value if value.tzinfo is UTC else parse_ts(text)


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _copy_plan(value: Any) -> int:
    """How a decoded JSON value can be copied into an equal, independent one: ``1`` an object of scalars
    (``dict.copy``), ``2`` an object of scalars and objects of scalars (those copied too), ``0`` other
    (decoded again). Strings, numbers, booleans and ``None`` are immutable, so sharing them is safe."""
    if type(value) is not dict:
        return 0
    plan = 1
    scalars = _SCALAR_TYPES
    for item in value.values():
        if type(item) in scalars:
            continue
        if type(item) is dict and scalars.issuperset(map(type, item.values())):
            plan = 2
            continue
        return 0
    return plan


def _copied(value: dict[str, Any], plan: int) -> dict[str, Any]:
    if plan == 1:
        return value.copy()
    return {k: v.copy() if type(v) is dict else v for k, v in value.items()}


class _Decoded:
    """Per batch: JSON texts decoded once when they occur again (payloads of one kind often repeat
    verbatim); a repeat gets a copy of the first decoding (:func:`_copy_plan`), never a shared object,
    since callers may change the values they get."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Any, int]] = {}

    def __call__(self, text: str) -> Any:
        seen = self._seen.get(text)
        if seen is not None:
            value, plan = seen
            return _copied(value, plan) if plan else from_json(text)
        value = from_json(text)
        plan = _copy_plan(value)
        self._seen[text] = (value, plan)
        return _copied(value, plan) if plan else value


def _masked(value: Any) -> Any:
    return redact_sensitive_keys(value) if has_sensitive_keys(value) else value


# ---- nodes ----------------------------------------------------------------------------------------


_BLOCK_BUILDERS: dict[str, Callable[[dict[str, Any]], BaseModel]] = {
    kind: trusted_builder(cls) for kind, cls in _BLOCKS.items()
}


def _block(data: Any) -> ContentBlock:
    """A stored content block (``content_list_adapter.dump_json`` form: every field present)."""
    kind = data.get("type") if type(data) is dict else None
    fields = _BLOCK_FIELDS.get(kind) if type(kind) is str else None
    if fields is None or data.keys() != fields:
        return content_list_adapter.validate_python([data])[0]
    if kind == "tool_result":
        if data["error"] is not None or type(data["content"]) is not list:
            return content_list_adapter.validate_python([data])[0]
        data["content"] = [_block(item) for item in data["content"]]
    block: ContentBlock = _BLOCK_BUILDERS[data["type"]](data)  # type: ignore[assignment]
    return block


def nodes_from_rows(
    rows: Sequence[Sequence[Any]], session_id: str, *, redact_keys: bool = False
) -> list[Node]:
    """Many ``nodes_<sid>`` rows (``NodeRecord.columns()`` order) at once; bad data → ``schema_error``.
    ``redact_keys`` applies read-time redaction (values under sensitive-looking keys masked, as
    :func:`redact_sensitive_keys`)."""
    out: list[Node] = []
    roles, node_types, block, ts, build = _ROLES, _NODE_TYPES, _block, _ts, trusted_builder(Node)
    decoded, isoformat, utc = _Decoded(), datetime.fromisoformat, UTC
    try:
        if redact_keys:  # content and metadata apart: the metadata texts of a session mostly repeat
            content = texts_may_hold_keys([r[7] for r in rows])
            walk = [c or m for c, m in zip(content, texts_may_hold_keys([r[8] for r in rows]), strict=True)]
        else:
            walk = [False] * len(rows)
        for row, walk_row in zip(rows, walk, strict=True):
            (
                node_id,
                node_seq,
                parent_id,
                agent_id,
                run_id,
                role,
                node_type,
                text,
                meta_text,
                tokens,
                created,
            ) = row
            meta = decoded(meta_text) if meta_text is not None else {}  # metadata texts repeat
            blocks = from_json(text)
            if type(meta) is not dict or type(blocks) is not list:
                raise ValueError("a node's content_json must be a JSON list and metadata_json a JSON object")
            if walk_row and (has_sensitive_keys(meta) or has_sensitive_keys(blocks)):
                meta, blocks = _masked(meta), _masked(blocks)
            if (
                role not in roles
                or node_type not in node_types
                or type(node_seq) is not int
                or (tokens is not None and type(tokens) is not int)
                or type(node_id) is not str
                or type(agent_id) is not str
            ):
                raise ValueError(f"invalid node row {node_id!r}")
            try:  # _ts(created), inlined
                when = isoformat(created)
            except (ValueError, TypeError):
                when = ts(created)
            else:
                if when.tzinfo is not utc:
                    when = ts(created)
            values = {
                "node_id": node_id,
                "node_seq": node_seq,
                "session_id": session_id,
                "parent_id": parent_id,
                "agent_id": agent_id,
                "run_id": run_id,
                "role": roles[role],
                "node_type": node_types[node_type],
                "content": [block(b) for b in blocks],
                "metadata": meta,
                "token_count": tokens,
                "created_at": when,
            }
            out.append(build(values))
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise read_error("node record", exc) from exc
    return out


# ---- events ---------------------------------------------------------------------------------------


def events_from_rows(
    rows: Sequence[Sequence[Any]],
    session_id: str,
    *,
    ids_by_seq: Sequence[str | None] | None = None,
    redact_keys: bool = False,
) -> list[RuntimeEvent]:
    """Many ``events_<sid>`` rows at once (``EventRecord.columns()`` order); bad data → ``schema_error``.

    Compact context reports are expanded with ``ids_by_seq`` (``storage/_reports.py``; required when a
    row holds one). ``redact_keys``: read-time key redaction as in :func:`nodes_from_rows`.
    """
    complete = ids_by_seq is not None and None not in ids_by_seq[1:]
    out: list[RuntimeEvent] = []
    types, levels, ts, build = _EVENT_TYPES, _LEVELS, _ts, trusted_builder(RuntimeEvent)
    decoded, isoformat, utc = _Decoded(), datetime.fromisoformat, UTC
    walk = texts_may_hold_keys([r[9] for r in rows]) if redact_keys else [False] * len(rows)
    try:
        for row, walk_row in zip(rows, walk, strict=True):
            (
                event_id,
                seq,
                run_seq,
                agent_id,
                run_id,
                level,
                event_type,
                node_id,
                call_id,
                text,
                created,
            ) = row
            if text is None:
                payload = {}
            elif event_type == "context_built" and MARKER in text:  # expanded in place: own copy
                payload = from_json(text)
                if type(payload) is not dict:
                    raise ValueError(f"the payload of event {event_id!r} is not a JSON object")
                if ids_by_seq is None:
                    raise ValueError("a compact context report needs the session's node seqs")
                expand_report(payload, ids_by_seq, complete=complete)
            else:
                payload = decoded(text)
                if type(payload) is not dict:
                    raise ValueError(f"the payload of event {event_id!r} is not a JSON object")
            if walk_row and has_sensitive_keys(payload):
                payload = redact_sensitive_keys(payload)
            if (
                level not in levels
                or type(seq) is not int
                or (run_seq is not None and type(run_seq) is not int)
                or type(event_id) is not str
            ):
                raise ValueError(f"invalid event row {event_id!r}")
            try:  # _ts(created), inlined
                when = isoformat(created)
            except (ValueError, TypeError):
                when = ts(created)
            else:
                if when.tzinfo is not utc:
                    when = ts(created)
            values = {
                "event_id": event_id,
                "seq": seq,
                "run_seq": run_seq,
                "session_id": session_id,
                "agent_id": agent_id,
                "run_id": run_id,
                "level": level,
                "event_type": types[event_type],
                "node_id": node_id,
                "tool_call_id": call_id,
                "data": payload,
                "created_at": when,
            }
            out.append(build(values))
    except (ValueError, TypeError, KeyError) as exc:
        raise read_error("event record", exc) from exc
    return out


# ---- runs -----------------------------------------------------------------------------------------

_RUN_COLUMNS = RunRecord.columns()
_RUN_STATUSES = {e.value: e for e in RunStatus}
_END_REASONS: dict[str | None, EndReason | None] = {e.value: e for e in EndReason} | {None: None}
_OPTIONAL_STR = frozenset({str, type(None)})


def runs_from_rows(rows: Sequence[Sequence[Any]]) -> list[RunRecord]:
    """Many ``runs`` rows (``RunRecord.columns()`` order) at once. A row whose values are already what
    validation keeps (known enum values, strings, an int turn count, stored-form timestamps) is built
    directly; any other row is validated (``record_from_row``: bad data → ``schema_error``)."""
    out: list[RunRecord] = []
    statuses, reasons, optional, stored = _RUN_STATUSES, _END_REASONS, _OPTIONAL_STR, is_stored_ts
    width, build = len(_RUN_COLUMNS), trusted_builder(RunRecord)
    for row in rows:
        if len(row) != width:
            out.append(record_from_row(RunRecord, _RUN_COLUMNS, row))
            continue
        # RunRecord.columns() order (tests/unit/test_storage_decode_runs.py checks it)
        (
            run_id,
            session_id,
            agent_id,
            status,
            start,
            end,
            reason,
            turns,
            usage,
            error,
            meta,
            created,
            updated,
        ) = row
        status = statuses.get(status) if type(status) is str else None
        reason = reasons.get(reason, False) if type(reason) in optional else False
        if (
            status is None
            or reason is False
            or (turns is not None and type(turns) is not int)
            or type(run_id) is not str
            or type(session_id) is not str
            or type(agent_id) is not str
            or type(start) not in optional
            or type(end) not in optional
            or type(usage) not in optional
            or type(error) not in optional
            or type(meta) not in optional
            or type(created) is not str
            or type(updated) is not str
            or not stored(created)
            or not stored(updated)
        ):
            out.append(record_from_row(RunRecord, _RUN_COLUMNS, row))
            continue
        values = {
            "run_id": run_id,
            "session_id": session_id,
            "agent_id": agent_id,
            "status": status,
            "start_node_id": start,
            "end_node_id": end,
            "end_reason": reason,
            "turn_count": turns,
            "usage_json": usage,
            "error_json": error,
            "metadata_json": meta,
            "created_at": created,
            "updated_at": updated,
        }
        out.append(build(values))
    return out


def run_infos(
    runs: Sequence[RunRecord], agent: AgentRecord | None, agent_meta: dict[str, Any]
) -> list[RunInfo]:
    """``run_info_from_record(run, agent, agent_meta)`` for many runs of one agent (replay); a run with an
    error payload or a usage text that is not a JSON object goes through it, others are built directly
    from their validated record."""
    purpose = agent_meta.get("purpose")
    common = {
        "agent_type": agent.agent_type if agent else None,
        "purpose": purpose if isinstance(purpose, str) else None,
        "parent_run_id": agent.created_by_run_id if agent else None,
    }
    build = trusted_builder(RunInfo)
    agent_type, parent_run_id = common["agent_type"], common["parent_run_id"]
    purpose = common["purpose"]
    out: list[RunInfo] = []
    for run in runs:
        record = run.__dict__  # the record's fields (one lookup each instead of an attribute access)
        usage_json = record["usage_json"]
        usage = None
        if usage_json is not None:
            try:
                usage = from_json(usage_json)
            except ValueError:
                usage = None
        if record["error_json"] is not None or (usage_json is not None and type(usage) is not dict):
            out.append(run_info_from_record(run, agent, agent_meta))
            continue
        try:
            created, updated = _ts(record["created_at"]), _ts(record["updated_at"])
        except ValueError as exc:
            raise read_error("run record", exc) from exc
        values = {
            "run_id": record["run_id"],
            "session_id": record["session_id"],
            "agent_id": record["agent_id"],
            "agent_type": agent_type,
            "purpose": purpose,
            "parent_run_id": parent_run_id,
            "status": record["status"],
            "end_reason": record["end_reason"],
            "turn_count": record["turn_count"],
            "usage": usage,
            "error": None,
            "permission_mode": permission_mode_of(record["metadata_json"]),
            "created_at": created,
            "updated_at": updated,
        }
        out.append(build(values))
    return out
