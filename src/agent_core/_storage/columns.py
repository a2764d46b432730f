"""Column values of the global tables: write-time redaction of records, the ``UPDATE`` statements of
``runs``/``agents`` (enum columns checked, ``*_json`` columns serialised and redacted, ``updated_at`` set),
the ``sessions.metadata_json`` merge and simple ``WHERE`` filters.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from agent_core._redaction import Redactor
from agent_core._storage.rows import json_column, json_text, redact_json_text
from agent_core._storage.writer import Txn
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError
from agent_core.types.base import format_ts
from agent_core.types.enums import AgentStatus, AgentType, EndReason, RunStatus
from agent_core.types.storage import StorageRecord

R = TypeVar("R", bound=StorageRecord)

_ENUM_COLUMNS: dict[str, dict[str, type[Enum]]] = {
    "runs": {"status": RunStatus, "end_reason": EndReason},
    "agents": {"status": AgentStatus, "agent_type": AgentType},
}


def invalid(message: str) -> AgentCoreError:
    """A ``validation_error`` for a bad storage argument."""
    return InvalidArgumentError(ErrorCode.validation_error, message)


def redact_record(record: R, redactor: Redactor) -> R:
    """``record`` with secret values replaced in its ``*_json`` columns and ``summary``."""
    secrets = redactor.secrets()
    if not secrets:
        return record
    update: dict[str, Any] = {}
    for name in type(record).model_fields:
        value = getattr(record, name)
        if name.endswith("_json") and value is not None:
            update[name] = redact_json_text(value, secrets, redactor)
        elif name == "summary" and isinstance(value, str):
            update[name] = redactor.text(value)
    return record.model_copy(update=update)


def column_value(table: str, column: str, value: Any, redactor: Redactor) -> Any:
    """The stored form of ``value`` for ``table.column``; a bad value → ``validation_error``."""
    enum_type = _ENUM_COLUMNS[table].get(column)
    if enum_type is not None and value is not None:
        try:
            return enum_type(value).value
        except ValueError as exc:
            raise invalid(f"invalid {table}.{column} value {value!r}") from exc
    if column.endswith("_json"):
        return json_column(value, f"{table}.{column}", redactor)
    if isinstance(value, datetime):
        return format_ts(value)
    if value is not None and not isinstance(value, str | int):
        raise invalid(f"invalid {table}.{column} value of type {type(value).__name__}")
    return value


def update_statement(
    table: str,
    key: str,
    key_value: str,
    fields: dict[str, Any],
    allowed: frozenset[str],
    redactor: Redactor,
) -> tuple[str, list[Any]]:
    """``UPDATE <table> SET ... WHERE <key> = ?`` and its parameters (``updated_at`` set unless given)."""
    unknown = set(fields) - allowed
    if unknown:
        raise invalid(f"cannot update {table} column(s) {sorted(unknown)}")
    columns = sorted(fields)
    params = [column_value(table, c, fields[c], redactor) for c in columns]
    if "updated_at" not in fields:
        params.append(format_ts())
    params.append(key_value)
    shape = (table, key, *columns)
    statement = _STATEMENTS.get(shape)
    if statement is None:
        names = columns if "updated_at" in fields else [*columns, "updated_at"]
        assignments = ", ".join(f"{c} = ?" for c in names)
        statement = f"UPDATE {table} SET {assignments} WHERE {key} = ?"
        if len(_STATEMENTS) >= _STATEMENTS_CAPACITY:
            _STATEMENTS.clear()
        _STATEMENTS[shape] = statement
    return statement, params


_STATEMENTS: dict[tuple[str, ...], str] = {}
"""``(table, key, *sorted columns)`` → its ``UPDATE`` statement (a run updates the same few column sets)."""
_STATEMENTS_CAPACITY = 256


def merge_session_metadata(txn: Txn, session_id: str, updates: dict[str, Any], now: str) -> None:
    """Merges top-level keys into ``sessions.metadata_json`` inside ``txn`` (a ``None`` value removes one)."""
    raw = txn.scalar("SELECT metadata_json FROM sessions WHERE session_id = ?", (session_id,))
    try:
        current = json.loads(raw) if raw else {}
    except ValueError:
        current = {}
    merged = current if isinstance(current, dict) else {}
    for key, value in updates.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    txn.execute(
        "UPDATE sessions SET metadata_json = ?, updated_at = ? WHERE session_id = ?",
        (json_text(merged, "sessions.metadata_json") if merged else None, now, session_id),
    )


def where_equal(**values: str | None) -> tuple[str, list[Any]]:
    """`` WHERE a = ? AND b = ?`` for the non-``None`` keyword values."""
    used = [(k, v) for k, v in values.items() if v is not None]
    if not used:
        return "", []
    return " WHERE " + " AND ".join(f"{k} = ?" for k, _ in used), [v for _, v in used]
