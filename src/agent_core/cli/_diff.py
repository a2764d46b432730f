"""The change preview of a write/edit permission prompt (docs/cli.md#permission-prompts), for ``run`` and
``chat``.

``PermissionRequest.metadata['diff']`` (set by the permission gate from the tool's pre-flight) is shown
as a unified diff: a new file as its first :data:`NEW_FILE_LINES` lines, any other diff cut after
:data:`MAX_DIFF_LINES` lines, each time with a count of what was left out. Every line is escaped
(``escape_terminal``) before it is printed; colour (ANSI, no library) only when asked for.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, TextIO

from agent_core.cli._terminal import escape_terminal

if TYPE_CHECKING:
    from agent_core.types.permissions import PermissionRequest

MAX_DIFF_LINES = 40
NEW_FILE_LINES = 20
INDENT = "    "
_RESET = "\x1b[0m"
_STYLES = {"+": "\x1b[32m", "-": "\x1b[31m", "@": "\x1b[36m", "h": "\x1b[1m", "n": "\x1b[2m"}


def wants_color(stream: TextIO | None) -> bool:
    """Colour on a terminal unless ``NO_COLOR`` is set (https://no-color.org)."""
    if stream is None or os.environ.get("NO_COLOR"):
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def _paint(text: str, kind: str, color: bool) -> str:
    return f"{_STYLES[kind]}{text}{_RESET}" if color else text


def _safe(line: str) -> str:
    return escape_terminal(line.expandtabs(4))


def render_diff(request: PermissionRequest, *, color: bool = False) -> list[str]:
    """The preview lines (without trailing newlines); ``[]`` when the request carries no diff."""
    diff = request.metadata.get("diff")
    if not isinstance(diff, str) or not diff:
        return []
    omitted = request.metadata.get("diff_omitted_lines")
    left_out = omitted if isinstance(omitted, int) and omitted > 0 else 0
    lines = diff.splitlines()
    if request.metadata.get("diff_created"):
        body = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++")]
        total = len(body) + left_out
        out = [f"  new file ({total} line{'' if total == 1 else 's'}):"]
        out += [INDENT + _paint(_safe(line), "+", color) for line in body[:NEW_FILE_LINES]]
        rest = total - min(len(body), NEW_FILE_LINES)
        if rest > 0:
            out.append(
                INDENT + _paint(f"... {rest} more line{'' if rest == 1 else 's'} not shown", "n", color)
            )
        return out
    out = ["  diff:"]
    for line in lines[:MAX_DIFF_LINES]:
        kind = "h" if line.startswith(("---", "+++")) else line[:1] if line[:1] in "+-@" else ""
        text = _safe(line)
        out.append(INDENT + (_paint(text, kind, color) if kind else text))
    rest = max(0, len(lines) - MAX_DIFF_LINES) + left_out
    if rest > 0:
        out.append(
            INDENT + _paint(f"... {rest} more diff line{'' if rest == 1 else 's'} not shown", "n", color)
        )
    return out
