"""Strict single-file unified diffs for ``code.edit_file`` (docs/tools.md#codeedit_file).

:func:`parse_unified_diff` accepts at most one ``--- <p>`` / ``+++ <p>`` header pair (optional ``a/``/
``b/`` prefixes, optional tab + timestamp, git C-quoting) followed by ``@@`` hunks, or hunks alone. It
refuses (``validation_error``) several file sections, rename/copy/similarity headers, deletions
(``+++ /dev/null``), mode changes, binary patches, malformed hunks and diffs without hunks. Other lines
outside hunks (``diff --git``, ``index``, commit text) are ignored, like ``patch(1)`` does.

:func:`apply_patch` applies hunks in order to ``\\n``-split lines: context and removed lines must match
exactly; a hunk may sit at a line offset from its header position (searched nearest-first, never
overlapping an earlier hunk) but no fuzz is applied; ``\\ No newline at end of file`` is honoured on both
sides. Any mismatch raises ``patch_apply_failed``; nothing is partially applied.

Parsing uses the maintained ``unidiff`` library (which keeps several file sections apart, reports renames,
binary and deleted files, keeps ``:`` in paths and the final-newline markers); this module only enforces the
single-file/no-rename rules and applies the parsed hunks strictly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core.errors import AgentCoreError, ErrorCode, FileOperationError, InvalidArgumentError

DEV_NULL = "/dev/null"
_HEADERLESS = "__headerless__"
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
    return InvalidArgumentError(ErrorCode.validation_error, message, details=dict(details))


@dataclass(slots=True)
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    old_lines: list[str] = field(default_factory=list)
    new_lines: list[str] = field(default_factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False


@dataclass(slots=True)
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


def _hunk_from(parsed: Any) -> Hunk:
    hunk = Hunk(parsed.source_start, parsed.source_length, parsed.target_start, parsed.target_length)
    last_kind = ""
    for line in parsed:
        kind = line.line_type
        if kind == "\\":
            if not last_kind:
                raise _invalid("malformed hunk: '\\' marker without a preceding line")
            if last_kind in (" ", "-"):
                hunk.old_no_eol = True
            if last_kind in (" ", "+"):
                hunk.new_no_eol = True
            continue
        body = line.value[:-1] if line.value.endswith("\n") else line.value
        if kind in (" ", "-"):
            if hunk.old_no_eol:
                raise _invalid("malformed hunk: 'No newline' marker is not on the last old line")
            hunk.old_lines.append(body)
        if kind in (" ", "+"):
            if hunk.new_no_eol:
                raise _invalid("malformed hunk: 'No newline' marker is not on the last new line")
            hunk.new_lines.append(body)
        last_kind = kind
    if len(hunk.old_lines) != hunk.old_len or len(hunk.new_lines) != hunk.new_len:
        raise _invalid("malformed hunk: line counts do not match the hunk header")
    return hunk


def parse_unified_diff(text: str) -> FilePatch:
    """Parses one file's unified diff with ``unidiff`` (see module docstring); raises ``validation_error``."""
    from unidiff.errors import UnidiffParseError
    from unidiff.patch import PatchSet

    if "\x00" in text:
        raise _invalid("unified_diff must not contain NUL bytes")
    for line in text.split("\n"):
        for prefix, what in _UNSUPPORTED:
            if line.startswith(prefix):
                raise _invalid(f"unified_diff: {what} patches are not supported", line=line[:120])
    if sum(1 for line in text.split("\n") if line.startswith("diff ")) > 1:
        raise _invalid("unified_diff must change a single file; use one code.edit_file call per file")
    has_header = any(line.startswith("--- ") for line in text.split("\n"))
    source = text if has_header else "--- " + _HEADERLESS + "\n+++ " + _HEADERLESS + "\n" + text
    if not source.endswith("\n"):
        source += "\n"
    try:
        files = PatchSet(source)
    except UnidiffParseError as exc:
        raise _invalid(f"malformed unified diff: {exc}") from exc
    if len(files) > 1:
        raise _invalid("unified_diff must change a single file; use one code.edit_file call per file")
    if not files or not len(files[0]):
        raise _invalid("unified_diff contains no hunks")
    parsed = files[0]
    if parsed.is_binary_file:
        raise _invalid("unified_diff: binary patches are not supported")
    if header_path(parsed.target_file) == DEV_NULL:
        raise _invalid("unified_diff: file deletion is not supported")
    if parsed.is_rename:
        raise _invalid("unified_diff: rename patches are not supported")
    patch = FilePatch()
    if has_header:
        patch.old_path = header_path(parsed.source_file)
        patch.new_path = header_path(parsed.target_file)
    patch.hunks = [_hunk_from(h) for h in parsed]
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
            raise FileOperationError(
                ErrorCode.patch_path_mismatch,
                f"diff header names {raw!r}, which is not {target}",
                details={"header_path": raw, "path": str(target)},
            )


def _failed(index: int, why: str) -> AgentCoreError:
    return FileOperationError(
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
