"""Strict single-file unified diffs for ``code.edit_file`` (contract.md §4.5, tools.md §13.5).

:func:`parse_unified_diff` accepts at most one ``--- <p>`` / ``+++ <p>`` header pair (optional ``a/``/
``b/`` prefixes, optional tab + timestamp, git C-quoting) followed by ``@@`` hunks, or hunks alone. It
refuses (``validation_error``) several file sections, rename/copy/similarity headers, deletions
(``+++ /dev/null``), mode changes, binary patches, malformed hunks and diffs without hunks. Other lines
outside hunks (``diff --git``, ``index``, commit text) are ignored, like ``patch(1)`` does.

:func:`apply_patch` applies hunks in order to ``\\n``-split lines: context and removed lines must match
exactly; a hunk may sit at a line offset from its header position (searched nearest-first, never
overlapping an earlier hunk) but no fuzz is applied; ``\\ No newline at end of file`` is honoured on both
sides. Any mismatch raises ``patch_apply_failed``; nothing is partially applied.

The ``whatthepatch`` parser is deliberately not used for this: it splits on every Unicode line break,
merges a second ``--- a/x``/``+++ b/x`` section into the first file's last hunk, cuts paths at ``:`` and
drops the final-newline markers, all of which would make the strictness rules above unenforceable.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.errors import AgentCoreError, ErrorCode

DEV_NULL = "/dev/null"
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_UNSUPPORTED = (
    ("rename from ", "rename"),
    ("rename to ", "rename"),
    ("copy from ", "copy"),
    ("copy to ", "copy"),
    ("similarity index ", "rename/copy"),
    ("dissimilarity index ", "rename/copy"),
    ("deleted file mode ", "file deletion"),
    ("old mode ", "mode change"),
    ("new mode ", "mode change"),
    ("Binary files ", "binary"),
    ("GIT binary patch", "binary"),
)


def _invalid(message: str, **details: object) -> AgentCoreError:
    return AgentCoreError(ErrorCode.validation_error, message, details=dict(details))


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    old_lines: list[str] = field(default_factory=list)
    new_lines: list[str] = field(default_factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False


@dataclass
class FilePatch:
    old_path: str | None = None
    new_path: str | None = None
    hunks: list[Hunk] = field(default_factory=list)

    @property
    def creates(self) -> bool:
        return self.old_path == DEV_NULL


def _unquote(text: str) -> str:
    """Git C-style quoted path (``"a/sp\\tace"``)."""
    body = text[1:-1]
    out = bytearray()
    i = 0
    simple = {
        "n": b"\n",
        "t": b"\t",
        '"': b'"',
        "\\": b"\\",
        "a": b"\a",
        "b": b"\b",
        "f": b"\f",
        "r": b"\r",
        "v": b"\v",
    }
    while i < len(body):
        c = body[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        nxt = body[i + 1 : i + 2]
        if nxt in simple:
            out += simple[nxt]
            i += 2
        elif re.fullmatch(r"[0-7]{3}", body[i + 1 : i + 4]):
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
        else:
            raise _invalid(f"bad escape in quoted diff path {text!r}")
    return out.decode("utf-8", errors="surrogateescape")


def header_path(raw: str) -> str:
    text = raw.rstrip("\r")
    if text.startswith('"') and text.rfind('"') > 0:
        return _unquote(text[: text.rfind('"') + 1])
    path = text.split("\t", 1)[0].rstrip()
    if not path:
        raise _invalid("empty path in diff header")
    return path


def _parse_hunk(lines: list[str], i: int, match: re.Match[str]) -> tuple[Hunk, int]:
    old_len = int(match.group(2)) if match.group(2) is not None else 1
    new_len = int(match.group(4)) if match.group(4) is not None else 1
    hunk = Hunk(int(match.group(1)), old_len, int(match.group(3)), new_len)
    old_marked = new_marked = -1
    last_kind = ""
    while (
        len(hunk.old_lines) < old_len
        or len(hunk.new_lines) < new_len
        or (i < len(lines) and lines[i].startswith("\\"))
    ):
        if i >= len(lines):
            raise _invalid("malformed hunk: the diff ends before the hunk's line counts are reached")
        line = lines[i]
        i += 1
        if line.startswith("\\"):
            if last_kind in (" ", "-"):
                old_marked = len(hunk.old_lines) - 1
            if last_kind in (" ", "+"):
                new_marked = len(hunk.new_lines) - 1
            if not last_kind:
                raise _invalid("malformed hunk: '\\' marker without a preceding line")
            continue
        kind, body = (line[:1], line[1:]) if line else (" ", "")
        if kind not in (" ", "-", "+"):
            raise _invalid(f"malformed hunk line {line[:80]!r}")
        if kind in (" ", "-") and len(hunk.old_lines) >= old_len:
            raise _invalid("malformed hunk: more old-side lines than the header declares")
        if kind in (" ", "+") and len(hunk.new_lines) >= new_len:
            raise _invalid("malformed hunk: more new-side lines than the header declares")
        if kind in (" ", "-"):
            hunk.old_lines.append(body)
        if kind in (" ", "+"):
            hunk.new_lines.append(body)
        last_kind = kind
    if old_marked >= 0:
        if old_marked != len(hunk.old_lines) - 1:
            raise _invalid("malformed hunk: 'No newline' marker is not on the last old line")
        hunk.old_no_eol = True
    if new_marked >= 0:
        if new_marked != len(hunk.new_lines) - 1:
            raise _invalid("malformed hunk: 'No newline' marker is not on the last new line")
        hunk.new_no_eol = True
    return hunk, i


def parse_unified_diff(text: str) -> FilePatch:
    """Parses one file's unified diff (see module docstring); raises ``validation_error``."""
    if "\x00" in text:
        raise _invalid("unified_diff must not contain NUL bytes")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    patch = FilePatch()
    headers = sections = 0
    i = 0
    while i < len(lines):
        line = lines[i]
        for prefix, what in _UNSUPPORTED:
            if line.startswith(prefix):
                raise _invalid(f"unified_diff: {what} patches are not supported", line=line[:120])
        if line.startswith("diff "):
            sections += 1
            if sections > 1:
                raise _invalid("unified_diff must change a single file; use one code.edit_file call per file")
            i += 1
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            headers += 1
            if headers > 1 or (patch.hunks and sections == 0):
                raise _invalid("unified_diff must change a single file; use one code.edit_file call per file")
            patch.old_path = header_path(line[4:])
            patch.new_path = header_path(lines[i + 1][4:])
            if patch.new_path == DEV_NULL:
                raise _invalid("unified_diff: file deletion is not supported")
            i += 2
            continue
        match = _HUNK.match(line)
        if match:
            hunk, i = _parse_hunk(lines, i + 1, match)
            patch.hunks.append(hunk)
            continue
        if line.startswith("@@"):
            raise _invalid(f"malformed hunk header {line[:80]!r}")
        i += 1
    if not patch.hunks:
        raise _invalid("unified_diff contains no hunks")
    return patch


def check_paths(patch: FilePatch, target: Path, resolve: Callable[[str], Path]) -> None:
    """Every header path (``a/``/``b/`` optional) must resolve to ``target``; else ``patch_path_mismatch``."""
    for raw in (patch.old_path, patch.new_path):
        if raw is None or raw == DEV_NULL:
            continue
        candidates = [raw]
        if raw.startswith(("a/", "b/")):
            candidates.append(raw[2:])
        matched = False
        for candidate in candidates:
            try:
                matched = resolve(candidate) == target
            except AgentCoreError:
                matched = False
            if matched:
                break
        if not matched:
            raise AgentCoreError(
                ErrorCode.patch_path_mismatch,
                f"diff header names {raw!r}, which is not {target}",
                details={"header_path": raw, "path": str(target)},
            )


def _failed(index: int, why: str) -> AgentCoreError:
    return AgentCoreError(
        ErrorCode.patch_apply_failed, f"hunk {index + 1} does not apply: {why}", details={"hunk": index + 1}
    )


def _split(content: str) -> tuple[list[str], bool]:
    if content == "":
        return [], True
    if content.endswith("\n"):
        return content[:-1].split("\n"), True
    return content.split("\n"), False


def _fits(lines: list[str], at: int, hunk: Hunk, final_nl: bool) -> bool:
    end = at + hunk.old_len
    if lines[at:end] != hunk.old_lines:
        return False
    if hunk.old_len == 0:
        return True
    at_eof = end == len(lines)
    if hunk.old_no_eol:
        return at_eof and not final_nl
    return not (at_eof and not final_nl)


def apply_patch(content: str, patch: FilePatch) -> str:
    """Applies every hunk of ``patch`` to ``content``; raises ``patch_apply_failed`` on any mismatch."""
    lines, final_nl = _split(content)
    result: list[str] = []
    pos = 0
    drift = 0
    for index, hunk in enumerate(patch.hunks):
        expected = (hunk.old_start - 1 if hunk.old_len > 0 else hunk.old_start) + drift
        if hunk.old_len == 0:
            if not pos <= expected <= len(lines):
                raise _failed(index, f"insertion point {expected} is outside the file")
            found = expected
        else:
            found = -1
            last_start = len(lines) - hunk.old_len
            for distance in range(0, max(len(lines), 1) + 1):
                for at in (expected + distance, expected - distance) if distance else (expected,):
                    if pos <= at <= last_start and _fits(lines, at, hunk, final_nl):
                        found = at
                        break
                if found >= 0:
                    break
            if found < 0:
                raise _failed(index, "context or removed lines do not match the file")
        result.extend(lines[pos:found])
        result.extend(hunk.new_lines)
        pos = found + hunk.old_len
        drift = found - (expected - drift)
        if pos == len(lines):
            if hunk.new_len > 0:
                final_nl = not hunk.new_no_eol
            elif hunk.old_len > 0:
                final_nl = True
        elif hunk.new_no_eol:
            raise _failed(index, "'No newline at end of file' marker on a line that is not the last")
    result.extend(lines[pos:])
    if not result:
        return ""
    return "\n".join(result) + ("\n" if final_nl else "")
