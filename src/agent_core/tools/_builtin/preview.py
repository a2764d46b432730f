"""Change previews for permission prompts (docs/cli.md#permission-prompts): the unified diff a write/edit
would apply.

A preview is computed lazily (only when a permission request is actually built) from the resolved
target and the call's arguments, with the same semantics as the tool (``code.write_file`` replaces the
content; ``code.edit_file`` applies its edits or hunks to the current text). It never writes anything.
``None`` means "no preview": the call would fail anyway (the tool reports why), the target is binary or
larger than :data:`PREVIEW_MAX_BYTES`. At most :data:`DIFF_MAX_LINES` diff lines are kept; the count of
the lines left out is returned with them.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agent_core.errors import AgentCoreError

PREVIEW_MAX_BYTES = 1_000_000
DIFF_MAX_LINES = 2000


@dataclass(frozen=True, slots=True)
class ChangePreview:
    diff: str
    """Unified diff (``--- /dev/null`` for a new file); each line ends with ``\\n``."""
    created: bool
    omitted_lines: int = 0


def _current(target: Path) -> str | bool | None:
    """Current text; ``None`` when missing; ``False`` when not previewable (dir, binary, too large)."""
    try:
        st = os.stat(target)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size > PREVIEW_MAX_BYTES:
        return False
    try:
        raw = target.read_bytes()
    except OSError:
        return False
    if b"\0" in raw[:8192]:
        return False
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return False


def unified(target: Path, old: str | None, new: str) -> ChangePreview:
    """The capped unified diff from ``old`` (``None``: a new file) to ``new``."""
    lines = list(
        difflib.unified_diff(
            (old or "").splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile="/dev/null" if old is None else str(target),
            tofile=str(target),
        )
    )
    lines = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines]
    text = "".join(lines).splitlines(keepends=True)
    omitted = max(0, len(text) - DIFF_MAX_LINES)
    return ChangePreview("".join(text[:DIFF_MAX_LINES]), created=old is None, omitted_lines=omitted)


def write_preview(target: Path, content: str) -> ChangePreview | None:
    current = _current(target)
    if current is False:
        return None
    return unified(target, current if isinstance(current, str) else None, content)


def edit_preview(target: Path, apply: Callable[[str], str], create: bool) -> ChangePreview | None:
    """``apply`` maps the current text to the edited one (raising ``AgentCoreError`` when it would fail)."""
    current = _current(target)
    if current is False or (current is None and not create):
        return None
    old = current if isinstance(current, str) else ""
    try:
        new = apply(old)
    except AgentCoreError:
        return None
    return unified(target, current if isinstance(current, str) else None, new)
