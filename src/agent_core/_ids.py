"""Identifier helpers (docs/architecture.md#identifiers-and-time), a bottom-layer module: generated ids are
``<prefix><YYYYMMDD>_<HHMMSS>_<12 hex>``."""

from __future__ import annotations

import os
import re
import time
from datetime import UTC, datetime

from agent_core.errors import ErrorCode, InvalidArgumentError, InvalidArgumentTypeError

MAX_ID_LENGTH = 128
SAFE_ID = re.compile(r"^[A-Za-z0-9_]+$")
"""Characters allowed in core-generated ids (session ids are embedded in table names)."""
SAFE_STEP = re.compile(r"^[a-z0-9_-]+$")
"""Characters allowed in Task and step ids."""

PREFIXES = {
    "session": "sess_",
    "agent": "agent_",
    "run": "run_",
    "node": "node_",
    "event": "evt_",
    "artifact": "artifact_",
    "permission": "perm_",
    "call": "call_",
    "plan": "plan_",
    "task": "task_",
}


_stamp: tuple[int, str] = (-1, "")
"""``(unix second, its YYYYMMDD_HHMMSS)``: ids of the same second share one formatted stamp."""


def new_id(prefix: str) -> str:
    """Returns a fresh id such as ``run_20260612_153022_a1b2c3d4e5f6`` (UTC time, 48 random bits)."""
    global _stamp
    second = int(time.time())
    if second != _stamp[0]:
        _stamp = (second, datetime.fromtimestamp(second, UTC).strftime("%Y%m%d_%H%M%S"))
    return f"{prefix}{_stamp[1]}_{os.urandom(6).hex()}"


def validate_id(value: object, prefix: str = "") -> str:
    """Returns ``value`` if it is a safe id with ``prefix``; raises ``validation_error`` otherwise."""
    if not isinstance(value, str):
        raise InvalidArgumentTypeError(
            ErrorCode.validation_error, f"invalid id {value!r}: must be a str, not {type(value).__name__}"
        )
    if not value:
        raise InvalidArgumentError(ErrorCode.validation_error, "invalid id '': must be a non-empty string")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"invalid id: longer than {MAX_ID_LENGTH} characters"
        )
    if prefix and not value.startswith(prefix):
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"invalid id {value!r}: expected prefix {prefix!r}"
        )
    if not SAFE_ID.match(value):
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"invalid id {value!r}: only [A-Za-z0-9_] characters are allowed"
        )
    return value


def validate_session_id(value: object) -> str:
    """Session ids only need the safe character set (they are embedded in table names)."""
    return validate_id(value, "")


def is_printable_id(value: object) -> bool:
    """True for provider ids we keep verbatim: non-empty, at most 128 printable characters."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_ID_LENGTH
        and value.isprintable()
        and not any(c.isspace() for c in value)
    )
