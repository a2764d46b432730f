"""Reading the optional user-level JSON files (``hooks.json``, ``mcp.json``, ``tools/*.json``).

Every problem is a ``ConfigError`` (``config_error``) whose message names the file and says what is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_core.errors import ConfigError, ErrorCode


class Missing:
    """Marker type of :data:`MISSING`."""


MISSING = Missing()
"""Returned by :func:`read_json_file` for a file that does not exist (when ``required`` is false)."""


def json_file_error(path: Path, what: str, message: str, **details: Any) -> ConfigError:
    """``ConfigError`` "invalid <what> <path>: <message>" with ``details.path``."""
    return ConfigError(
        ErrorCode.config_error, f"invalid {what} {path}: {message}", details={"path": str(path), **details}
    )


def read_json_file(path: Path, what: str, *, required: bool = False) -> Any:
    """Parsed JSON of ``path``; :data:`MISSING` for an absent file unless ``required``.

    ``what`` names the file kind in messages (e.g. ``"hooks file"``, ``"MCP config"``).
    """
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        if not required:
            return MISSING
        raise json_file_error(path, what, "cannot read: no such file") from exc
    except OSError as exc:
        reason = "is a directory" if isinstance(exc, IsADirectoryError) else (exc.strerror or str(exc))
        raise ConfigError(
            ErrorCode.config_error,
            f"cannot read {what} {path}: {reason}",
            details={"path": str(path)},
            cause=exc,
        ) from exc
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise json_file_error(path, what, f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise json_file_error(
            path, what, f"invalid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
