"""Storage layer: one record type per SQLite table (docs/storage.md#tables, docs/architecture.md#type-layers).

Field names equal the column names exactly; JSON columns keep their ``*_json`` names and hold the raw
JSON text (``str | None``). Timestamps are the SQLite strings (``YYYY-MM-DDTHH:MM:SS.ffffffZ``); any
ISO 8601 UTC input (``Z`` or ``+00:00``) is normalised to that format. Enum columns hold the shared
``StrEnum`` members, which SQLite stores as their value strings. Records are never handed to provider
adapters; conversion to runtime types lives in :mod:`agent_core.types.mappers`.
"""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

from datetime import datetime

from pydantic import field_validator

from agent_core.types.base import StrictModel, format_ts, parse_ts
from agent_core.types.enums import (
    AgentStatus,
    AgentType,
    EndReason,
    EventLevel,
    EventType,
    MessageRole,
    NodeType,
    RunStatus,
    SessionStatus,
)


def _is_stored_form(value: str) -> bool:
    """Whether ``value`` is a valid timestamp in :func:`format_ts`'s ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` form."""
    if len(value) != 27 or value[-1] != "Z" or value[10] != "T" or value[19] != "." or value[4] != "-":
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return value[13] == ":" and value[16] == ":" and value[7] == "-"


class StorageRecord(StrictModel):
    """Common behaviour: timestamp normalisation and the ordered column list."""

    @field_validator("created_at", "updated_at", mode="before", check_fields=False)
    @classmethod
    def _normalise_ts(cls, value: object) -> object:
        if isinstance(value, str):
            if _is_stored_form(value):
                return value  # already what format_ts writes (replay reads thousands of rows)
            try:
                return format_ts(parse_ts(value))
            except ValueError as exc:
                raise ValueError(f"invalid UTC ISO 8601 timestamp {value!r}") from exc
        return value

    @classmethod
    def columns(cls) -> tuple[str, ...]:
        """Column names in table order (= field order)."""
        return tuple(cls.model_fields)

    def row(self) -> tuple[object, ...]:
        """Values in column order, ready to bind to an ``INSERT``."""
        return tuple(getattr(self, name) for name in type(self).model_fields)


class SessionRecord(StorageRecord):
    session_id: str
    cwd: str
    root_agent_id: str
    active_node_id: str | None = None
    parent_session_id: str | None = None
    status: SessionStatus = SessionStatus.active
    metadata_json: str | None = None
    created_at: str
    updated_at: str


class AgentRecord(StorageRecord):
    agent_id: str
    session_id: str
    parent_agent_id: str | None = None
    agent_type: AgentType
    created_by_run_id: str | None = None
    fork_from_node_id: str | None = None
    status: AgentStatus = AgentStatus.idle
    result_json: str | None = None
    metadata_json: str | None = None
    created_at: str
    updated_at: str


class RunRecord(StorageRecord):
    run_id: str
    session_id: str
    agent_id: str
    status: RunStatus
    start_node_id: str | None = None
    end_node_id: str | None = None
    end_reason: EndReason | None = None
    turn_count: int | None = None
    usage_json: str | None = None
    error_json: str | None = None
    metadata_json: str | None = None
    created_at: str
    updated_at: str


class NodeRecord(StorageRecord):
    """A row of ``nodes_<session_id>``."""

    node_id: str
    node_seq: int
    parent_id: str | None = None
    agent_id: str
    run_id: str | None = None
    role: MessageRole
    node_type: NodeType
    content_json: str
    metadata_json: str | None = None
    token_count: int | None = None
    created_at: str


class EventRecord(StorageRecord):
    """A row of ``events_<session_id>``."""

    event_id: str
    seq: int
    run_seq: int | None = None
    agent_id: str | None = None
    run_id: str | None = None
    level: EventLevel
    event_type: EventType
    node_id: str | None = None
    tool_call_id: str | None = None
    payload_json: str | None = None
    created_at: str


class ArtifactRecord(StorageRecord):
    artifact_id: str
    session_id: str
    agent_id: str | None = None
    run_id: str | None = None
    node_id: str | None = None
    tool_call_id: str | None = None
    path: str
    filename: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    summary: str | None = None
    metadata_json: str | None = None
    created_at: str


__all__ = [
    "AgentRecord",
    "ArtifactRecord",
    "EventRecord",
    "NodeRecord",
    "RunRecord",
    "SessionRecord",
    "StorageRecord",
]
