"""Storage ↔ runtime conversion (runtime.md §2, storage.md §1.1).

Mappers only rename fields, parse/dump JSON, convert enums/timestamps and fill defaults; they hold no
business rules. Any failure means "the data cannot be converted" and raises
:class:`~agent_core.errors.SchemaError` (code ``schema_error``).

JSON conventions (shared with the storage manager): compact separators, UTF-8 text
(``ensure_ascii=False``); an empty or absent ``metadata``/``payload`` mapping is stored as ``NULL`` and
read back as ``{}``; ``content_json`` is always a JSON array.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from agent_core.errors import ErrorCode, SchemaError
from agent_core.types.base import format_ts, parse_ts
from agent_core.types.content import ContentBlock, ErrorPayload, content_list_adapter
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.runtime import ArtifactRef, Node, RunInfo, RuntimeEvent
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
)

R = TypeVar("R", bound=BaseModel)


def _schema_error(what: str, exc: BaseException) -> SchemaError:
    return SchemaError(ErrorCode.schema_error, f"cannot convert {what}: {exc}", cause=exc)


def dump_json(value: Any) -> str:
    """Compact UTF-8 JSON text; pydantic models are dumped in JSON mode."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _schema_error("value to JSON", exc) from exc


def dump_json_column(value: Any) -> str | None:
    """JSON column text for ``value``; ``None`` and empty mappings become ``NULL``."""
    if value is None or (isinstance(value, dict) and not value):
        return None
    return dump_json(value)


def load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise _schema_error(what, exc) from exc


def load_json_object(text: str | None, what: str) -> dict[str, Any]:
    """Parses a nullable JSON-object column; ``NULL`` → ``{}``."""
    if text is None:
        return {}
    value = load_json(text, what)
    if not isinstance(value, dict):
        raise SchemaError(ErrorCode.schema_error, f"cannot convert {what}: expected a JSON object")
    return value


def load_content(text: str, what: str = "content_json") -> list[ContentBlock]:
    """Parses a ``content_json`` array into content blocks."""
    try:
        return content_list_adapter.validate_json(text)
    except ValidationError as exc:
        raise _schema_error(what, exc) from exc


def dump_content(blocks: Sequence[ContentBlock]) -> str:
    return dump_json(content_list_adapter.dump_python(list(blocks), mode="json"))


def record_from_row(cls: type[R], columns: Sequence[str], row: Sequence[Any]) -> R:
    """Builds a storage record from a SQLite row (values in ``columns`` order)."""
    try:
        return cls.model_validate(dict(zip(columns, row, strict=True)))
    except (ValidationError, ValueError) as exc:
        raise _schema_error(f"{cls.__name__} row", exc) from exc


def _ts(value: str, what: str) -> Any:
    try:
        return parse_ts(value)
    except ValueError as exc:
        raise _schema_error(what, exc) from exc


# ---- nodes ------------------------------------------------------------------------------------------


def node_from_record(record: NodeRecord, session_id: str) -> Node:
    try:
        return Node(
            node_id=record.node_id,
            node_seq=record.node_seq,
            session_id=session_id,
            parent_id=record.parent_id,
            agent_id=record.agent_id,
            run_id=record.run_id,
            role=MessageRole(record.role),
            node_type=NodeType(record.node_type),
            content=load_content(record.content_json),
            metadata=load_json_object(record.metadata_json, "nodes.metadata_json"),
            token_count=record.token_count,
            created_at=_ts(record.created_at, "nodes.created_at"),
        )
    except ValidationError as exc:
        raise _schema_error("node record", exc) from exc


def node_to_record(node: Node) -> NodeRecord:
    try:
        return NodeRecord(
            node_id=node.node_id,
            node_seq=node.node_seq,
            parent_id=node.parent_id,
            agent_id=node.agent_id,
            run_id=node.run_id,
            role=MessageRole(node.role),
            node_type=NodeType(node.node_type),
            content_json=dump_content(node.content),
            metadata_json=dump_json_column(node.metadata),
            token_count=node.token_count,
            created_at=format_ts(node.created_at),
        )
    except (ValidationError, ValueError) as exc:
        raise _schema_error("node", exc) from exc


# ---- events -----------------------------------------------------------------------------------------


def event_from_record(record: EventRecord, session_id: str) -> RuntimeEvent:
    try:
        return RuntimeEvent(
            event_id=record.event_id,
            seq=record.seq,
            run_seq=record.run_seq,
            session_id=session_id,
            agent_id=record.agent_id,
            run_id=record.run_id,
            level=record.level.value,
            event_type=record.event_type,
            node_id=record.node_id,
            tool_call_id=record.tool_call_id,
            payload=load_json_object(record.payload_json, "events.payload_json"),
            created_at=_ts(record.created_at, "events.created_at"),
        )
    except ValidationError as exc:
        raise _schema_error("event record", exc) from exc


def event_to_record(event: RuntimeEvent) -> EventRecord:
    if event.seq is None:
        raise SchemaError(ErrorCode.schema_error, "cannot convert event: a persisted event needs a seq")
    try:
        return EventRecord(
            event_id=event.event_id,
            seq=event.seq,
            run_seq=event.run_seq,
            agent_id=event.agent_id,
            run_id=event.run_id,
            level=event.level,
            event_type=event.event_type,
            node_id=event.node_id,
            tool_call_id=event.tool_call_id,
            payload_json=dump_json_column(event.payload),
            created_at=format_ts(event.created_at),
        )
    except ValidationError as exc:
        raise _schema_error("event", exc) from exc


# ---- artifacts --------------------------------------------------------------------------------------


def artifact_from_record(record: ArtifactRecord) -> ArtifactRef:
    try:
        return ArtifactRef(
            artifact_id=record.artifact_id,
            session_id=record.session_id,
            agent_id=record.agent_id,
            run_id=record.run_id,
            node_id=record.node_id,
            tool_call_id=record.tool_call_id,
            path=record.path,
            filename=record.filename,
            mime_type=record.mime_type,
            size_bytes=record.size_bytes,
            summary=record.summary,
            metadata=load_json_object(record.metadata_json, "artifacts.metadata_json"),
            created_at=_ts(record.created_at, "artifacts.created_at"),
        )
    except ValidationError as exc:
        raise _schema_error("artifact record", exc) from exc


def artifact_to_record(ref: ArtifactRef) -> ArtifactRecord:
    try:
        return ArtifactRecord(
            artifact_id=ref.artifact_id,
            session_id=ref.session_id,
            agent_id=ref.agent_id,
            run_id=ref.run_id,
            node_id=ref.node_id,
            tool_call_id=ref.tool_call_id,
            path=ref.path,
            filename=ref.filename,
            mime_type=ref.mime_type,
            size_bytes=ref.size_bytes,
            summary=ref.summary,
            metadata_json=dump_json_column(ref.metadata),
            created_at=format_ts(ref.created_at),
        )
    except ValidationError as exc:
        raise _schema_error("artifact", exc) from exc


# ---- runs -------------------------------------------------------------------------------------------


def run_info_from_record(run: RunRecord, agent: AgentRecord | None = None) -> RunInfo:
    """``RunInfo`` from a run row plus (optionally) its agent row.

    ``agent_type`` comes from the agent row, ``purpose`` from ``agents.metadata_json.purpose`` and
    ``parent_run_id`` from ``agents.created_by_run_id``.
    """
    agent_meta = load_json_object(agent.metadata_json, "agents.metadata_json") if agent else {}
    usage = load_json(run.usage_json, "runs.usage_json") if run.usage_json is not None else None
    if usage is not None and not isinstance(usage, dict):
        raise SchemaError(ErrorCode.schema_error, "cannot convert runs.usage_json: expected a JSON object")
    try:
        error = ErrorPayload.model_validate_json(run.error_json) if run.error_json is not None else None
        purpose = agent_meta.get("purpose")
        return RunInfo(
            run_id=run.run_id,
            session_id=run.session_id,
            agent_id=run.agent_id,
            agent_type=agent.agent_type.value if agent else None,
            purpose=purpose if isinstance(purpose, str) else None,
            parent_run_id=agent.created_by_run_id if agent else None,
            status=run.status,
            end_reason=run.end_reason,
            turn_count=run.turn_count,
            usage=usage,
            error=error,
            created_at=_ts(run.created_at, "runs.created_at"),
            updated_at=_ts(run.updated_at, "runs.updated_at"),
        )
    except ValidationError as exc:
        raise _schema_error("run record", exc) from exc


__all__ = [
    "artifact_from_record",
    "artifact_to_record",
    "dump_content",
    "dump_json",
    "dump_json_column",
    "event_from_record",
    "event_to_record",
    "load_content",
    "load_json",
    "load_json_object",
    "node_from_record",
    "node_to_record",
    "record_from_row",
    "run_info_from_record",
]
