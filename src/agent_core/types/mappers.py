"""Storage ↔ runtime conversion (docs/architecture.md#type-layers).

Mappers only rename fields, parse/dump JSON, convert enums/timestamps and fill defaults; they hold no
business rules. Any failure means "the data cannot be converted" and raises
:class:`~agent_core.errors.SchemaError` (code ``schema_error``).

JSON conventions (shared with the storage manager): compact separators, UTF-8 text
(``ensure_ascii=False``); an empty or absent ``metadata``/``payload`` mapping is stored as ``NULL`` and
read back as ``{}``; ``content_json`` is always a JSON array.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

from agent_core._jsontext import compact_json
from agent_core.errors import ErrorCode, SchemaError
from agent_core.types.base import parse_ts
from agent_core.types.content import ErrorPayload
from agent_core.types.runtime import ArtifactRef, RunInfo
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
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
        return compact_json(value, strict=True)
    except (TypeError, ValueError) as exc:
        raise _schema_error("value to JSON", exc) from exc


def load_json(text: str, what: str) -> Any:
    try:
        return from_json(text)
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


# ---- runs -------------------------------------------------------------------------------------------


def permission_mode_of(metadata_json: str | None) -> str | None:
    """``runs.metadata_json.permission_mode`` (read without parsing the whole object when absent)."""
    if not metadata_json or '"permission_mode"' not in metadata_json:
        return None
    value = load_json_object(metadata_json, "runs.metadata_json").get("permission_mode")
    return value if isinstance(value, str) else None


def run_info_from_record(
    run: RunRecord, agent: AgentRecord | None = None, agent_meta: dict[str, Any] | None = None
) -> RunInfo:
    """``RunInfo`` from a run row plus (optionally) its agent row.

    ``agent_type`` comes from the agent row, ``purpose`` from ``agents.metadata_json.purpose`` and
    ``parent_run_id`` from ``agents.created_by_run_id``. ``agent_meta``: the agent's parsed
    ``metadata_json`` when the caller has it (replay builds thousands of runs of one agent).
    """
    if agent_meta is None:
        agent_meta = load_json_object(agent.metadata_json, "agents.metadata_json") if agent else {}
    usage = load_json(run.usage_json, "runs.usage_json") if run.usage_json is not None else None
    if usage is not None and not isinstance(usage, dict):
        raise SchemaError(ErrorCode.schema_error, "cannot convert runs.usage_json: expected a JSON object")
    try:
        error = ErrorPayload.model_validate_json(run.error_json) if run.error_json is not None else None
        purpose = agent_meta.get("purpose")
        mode = permission_mode_of(run.metadata_json)
        return RunInfo(
            run_id=run.run_id,
            session_id=run.session_id,
            agent_id=run.agent_id,
            agent_type=agent.agent_type if agent else None,
            purpose=purpose if isinstance(purpose, str) else None,
            parent_run_id=agent.created_by_run_id if agent else None,
            status=run.status,
            end_reason=run.end_reason,
            turn_count=run.turn_count,
            usage=usage,
            error=error,
            permission_mode=mode,
            created_at=_ts(run.created_at, "runs.created_at"),
            updated_at=_ts(run.updated_at, "runs.updated_at"),
        )
    except ValidationError as exc:
        raise _schema_error("run record", exc) from exc


__all__ = [
    "artifact_from_record",
    "dump_json",
    "load_json",
    "load_json_object",
    "record_from_row",
    "run_info_from_record",
]
