"""The compaction payload returned by the compact fork: extraction, validation, normalisation
(docs/compaction.md#the-compact-fork, docs/compaction.md#the-payload).

Extraction: the whole text as JSON, else the first fenced ```` ```json ```` block, else the outermost
``{…}`` span. Validation failures raise :class:`SchemaError` (``schema_error``): non-JSON text, a value that
does not match :class:`CompactionPayload` (``extra="forbid"``, strict types), an empty summary, or a
``first_kept_node_id`` different from the cut core supplied. Missing docs/compaction.md#the-compact-fork
headings never reject a payload: they are appended with the body ``(none)`` and listed in
``normalized_sections``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_core.errors import ErrorCode, SchemaError

REQUIRED_SECTIONS: tuple[tuple[str, int], ...] = (
    ("Goal", 2),
    ("Constraints & Preferences", 2),
    ("Progress", 2),
    ("Done", 3),
    ("In Progress", 3),
    ("Blocked", 3),
    ("Key Decisions", 2),
    ("Next Steps", 2),
    ("Critical Context", 2),
    ("Files & Artifacts", 2),
    ("Tool & Runtime Notes", 2),
)
SPLIT_SECTION = ("Split Turn Prefix", 2)
EMPTY_BODY = "(none)"

_FENCED_JSON = re.compile(r"```json[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)
_HEADING = re.compile(r"^\s{0,3}#{2,3}\s+(.+?)\s*#*\s*$")


class CompactionPayload(BaseModel):
    """The JSON object the compact fork answers with (docs/compaction.md#the-payload)."""

    model_config = ConfigDict(extra="forbid", strict=True, defer_build=True)

    summary: str
    first_kept_node_id: str
    tokens_before: int = Field(ge=0)
    details: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidatedSummary:
    summary: str
    """The normalised summary (missing headings appended)."""
    model_details: dict[str, Any]
    reported_tokens_before: int
    normalized_sections: list[str]


def _invalid(message: str, **details: Any) -> SchemaError:
    return SchemaError(ErrorCode.schema_error, message, details=details)


def extract_json_object(text: str) -> dict[str, Any]:
    """The payload object of the fork's final message (see module docstring for the order)."""
    candidates = [text.strip()]
    fenced = _FENCED_JSON.search(text)
    if fenced:
        candidates.append(fenced.group(1).strip())
    first, last = text.find("{"), text.rfind("}")
    if first != -1 and last > first:
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        if not candidate:
            continue
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
        raise _invalid(f"the compaction payload must be a JSON object, got {type(value).__name__}")
    raise _invalid("the compact fork's final message contains no JSON object")


def normalize_sections(summary: str, *, split_turn: bool) -> tuple[str, list[str]]:
    """Appends every required heading missing from ``summary`` (body ``(none)``); returns the names added."""
    present = set()
    for line in summary.splitlines():
        match = _HEADING.match(line)
        if match:
            present.add(match.group(1).strip().casefold())
    required = list(REQUIRED_SECTIONS) + ([SPLIT_SECTION] if split_turn else [])
    added: list[str] = []
    parts = [summary.rstrip()]
    for name, level in required:
        if name.casefold() in present:
            continue
        added.append(name)
        parts.append(f"{'#' * level} {name}\n{EMPTY_BODY}")
    return "\n\n".join(parts) if added else summary, added


def validate_payload(
    text: str, *, expected_first_kept: str, tokens_before: int, split_turn: bool
) -> ValidatedSummary:
    """Parses and checks the fork's answer against the cut core supplied; raises :class:`SchemaError`."""
    raw = extract_json_object(text)
    try:
        payload = CompactionPayload.model_validate(raw)
    except ValidationError as exc:
        errors = [
            {"path": ".".join(str(p) for p in e["loc"]) or "$", "message": e["msg"]} for e in exc.errors()
        ]
        raise _invalid("the compaction payload does not match the schema", errors=errors) from exc
    if not payload.summary.strip():
        raise _invalid("the compaction summary is empty")
    if payload.first_kept_node_id != expected_first_kept:
        raise _invalid(
            "the compaction payload names a different first_kept_node_id than the cut core supplied",
            expected=expected_first_kept,
            reported=payload.first_kept_node_id,
        )
    summary, added = normalize_sections(payload.summary.strip(), split_turn=split_turn)
    return ValidatedSummary(
        summary=summary,
        model_details=dict(payload.details),
        reported_tokens_before=payload.tokens_before,
        normalized_sections=added,
    )
