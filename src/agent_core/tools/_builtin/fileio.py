"""File access for the code tools: binary detection, bounded line reading and atomic writes.

* A file is *binary* when a NUL byte occurs in its first :data:`BINARY_SNIFF_BYTES` bytes or its content
  is not valid UTF-8 (docs/tools.md#coderead_file); detection streams the file (constant memory).
* Lines are split on ``\\n`` only; a trailing newline does not create an extra line.
* :func:`read_line_window` keeps at most :data:`LINE_CAP_BYTES` (+ a few) bytes of each returned line, so
  memory is bounded even for a single gigantic line.
* :func:`atomic_write` writes a temp file in the target's directory, fsyncs and renames it over the target
  (an overwritten file keeps its mode bits; a hard link to the old inode is broken, never written through;
  the directory is reached without following a symlink).

All functions are synchronous; async callers run them with :func:`asyncio.to_thread`.
"""

from __future__ import annotations

import codecs
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from agent_core.tools._command import utf8_prefix
from agent_core.tools._safe_fs import open_dir, write_at

BINARY_SNIFF_BYTES = 8192
LINE_CAP_BYTES = 4096
_CHUNK = 1 << 16


def is_binary_bytes(data: bytes) -> bool:
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def probe_binary(path: Path) -> bool:
    """Streams ``path`` once; ``True`` for binary content (see module docstring)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    seen = 0
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            if seen < BINARY_SNIFF_BYTES and b"\x00" in chunk[: BINARY_SNIFF_BYTES - seen]:
                return True
            seen += len(chunk)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                return True
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return True
    return False


def cap_line(raw: bytes, cap: int = LINE_CAP_BYTES) -> tuple[str, bool]:
    """Decoded line cut on a UTF-8 boundary at ≤ ``cap`` bytes; returns ``(text, was_cut)``."""
    if len(raw) <= cap:
        return raw.decode("utf-8", errors="replace"), False
    return utf8_prefix(raw, cap).decode("utf-8", errors="replace"), True


@dataclass(slots=True)
class LineWindow:
    """The lines ``[start, start + count)`` of a text file plus whole-file facts."""

    lines: list[str] = field(default_factory=list)
    cut_lines: list[int] = field(default_factory=list)
    total_lines: int = 0
    binary: bool = False
    size_bytes: int = 0


def read_line_window(
    source: Path | BinaryIO, start: int, count: int, cap: int = LINE_CAP_BYTES
) -> LineWindow:
    """Reads the window in one streaming pass that also validates the whole file as UTF-8.

    ``source`` is a path or an already opened binary file (read from its current position, not closed)."""
    window = LineWindow()
    decoder = codecs.getincrementaldecoder("utf-8")()
    end = start + count  # exclusive
    line_no = 1
    current = bytearray()
    current_len = 0
    seen = 0

    def finish(number: int) -> None:
        if start <= number < end:
            text, cut = cap_line(bytes(current), cap)
            if current_len > len(current):
                cut = True
            window.lines.append(text)
            if cut:
                window.cut_lines.append(number)

    with contextlib.ExitStack() as stack:
        fh = stack.enter_context(source.open("rb")) if isinstance(source, Path) else source
        while chunk := fh.read(_CHUNK):
            if seen < BINARY_SNIFF_BYTES and b"\x00" in chunk[: BINARY_SNIFF_BYTES - seen]:
                return LineWindow(binary=True, size_bytes=os.fstat(fh.fileno()).st_size)
            seen += len(chunk)
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError:
                return LineWindow(binary=True, size_bytes=os.fstat(fh.fileno()).st_size)
            pieces = chunk.split(b"\n")
            for index, piece in enumerate(pieces):
                if start <= line_no < end:
                    room = cap + 4 - len(current)
                    if room > 0:
                        current += piece[:room]
                current_len += len(piece)
                if index < len(pieces) - 1:
                    finish(line_no)
                    line_no += 1
                    current.clear()
                    current_len = 0
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return LineWindow(binary=True, size_bytes=seen)
    if current_len > 0:
        finish(line_no)
        window.total_lines = line_no
    else:
        window.total_lines = line_no - 1
    window.size_bytes = seen
    return window


def looks_like_text(fh: BinaryIO) -> bool:
    """Whether the first :data:`BINARY_SNIFF_BYTES` bytes of ``fh`` (from its position) have no NUL and
    are valid UTF-8 so far; the position is restored. A text file passes; the rest is a full-read check."""
    position = fh.tell()
    head = fh.read(BINARY_SNIFF_BYTES)
    fh.seek(position)
    if b"\x00" in head:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    return True


def text_line_window(text: str, start: int, count: int, cap: int = LINE_CAP_BYTES) -> LineWindow:
    """:func:`read_line_window` over text already in memory (lines split on ``\\n`` alike)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # a trailing newline does not create an extra line
    window = LineWindow(total_lines=len(lines), size_bytes=len(text.encode("utf-8", "surrogatepass")))
    for number in range(start, min(start + count, len(lines) + 1)):
        line, cut = cap_line(lines[number - 1].encode("utf-8", "surrogatepass"), cap)
        window.lines.append(line)
        if cut:
            window.cut_lines.append(number)
    return window


def read_text(path: Path) -> tuple[str | None, bytes]:
    """Whole file as ``(text, raw)``; ``text`` is ``None`` for binary content."""
    raw = path.read_bytes()
    if is_binary_bytes(raw):
        return None, raw
    return raw.decode("utf-8"), raw


def iter_raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(1-based number, line without its \\n)`` for every line of ``path``."""
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            yield number, raw[:-1] if raw.endswith(b"\n") else raw


def atomic_write(target: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Replaces/creates ``target`` (a resolved path whose parent exists) atomically.

    The parent is reached without following any symlink and the temp file is renamed over the final
    name relative to that descriptor (a symlink there is replaced, never written through); see
    :mod:`agent_core.tools._safe_fs`. ``exclusive`` publishes the temp file with ``link()`` so that a
    file created concurrently is never clobbered (:class:`FileExistsError`)."""
    parent_fd = open_dir(target.parent)
    try:
        write_at(parent_fd, target, data, exclusive=exclusive, expect=None)
    finally:
        os.close(parent_fd)
