"""Pydantic base classes and UTC timestamp helpers shared by every type layer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Boundary model: unknown fields are rejected (docs/architecture.md#type-layers).

    Validators are built on first use (``defer_build``), so importing the SDK does not pay for the many
    models a given run never touches (cold start).
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)


class FrozenModel(BaseModel):
    """Immutable, hashable boundary model."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


def empty_list() -> list[Any]:
    """``Field(default_factory=empty_list)``: a new empty list.

    Pydantic reads a default factory's signature when it creates the model class and again when it builds
    the validator; for the builtin ``list`` that means parsing its text signature (~50 us each time, cold
    start), for a Python function it is a cheap lookup.
    """
    return []


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_ts(value: datetime | None = None) -> str:
    """SQLite timestamp format: ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (docs/storage.md#tables)."""
    value = value or utc_now()
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    if value.year >= 1000:  # isoformat pads the year to 4 digits, strftime's %Y does not
        return value.isoformat(timespec="microseconds")[:-6] + "Z"
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def format_ts_ms(value: datetime | None = None) -> str:
    """Task WAL timestamp format: ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (docs/task-board.md#wal-records)."""
    value = (value or utc_now()).astimezone(UTC)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def parse_ts(value: str) -> datetime:
    """Parses an ISO 8601 UTC string ending in ``Z`` or ``+00:00`` into an aware datetime."""
    text = value.strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
