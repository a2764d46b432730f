"""Terminal I/O shared by the CLI commands: a closed-pipe-tolerant writer, a stdin line reader and the
escaping of untrusted text before it reaches a terminal."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from typing import Any, TextIO

_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\x1b": "\\x1b"}


def escape_terminal(text: str, *, keep_newlines: bool = False) -> str:
    """``text`` with every non-printable character shown as an escape (``\\n``, ``\\x1b``, ``\\u202e``).

    Use it for every model-, tool- or file-derived string printed to a terminal: carriage returns,
    ESC/CSI sequences, other C0/C1 controls, bidi overrides and other format characters can then
    neither move the cursor nor redraw what the user sees. Printable Unicode passes unchanged; with
    ``keep_newlines`` a ``\\n`` stays a real line break and a tab stays a tab (multi-line text such as
    an answer).
    """
    if text.isprintable():
        return text
    parts: list[str] = []
    for char in text:
        if char.isprintable() or (keep_newlines and char in "\n\t"):
            parts.append(char)
        elif char in _NAMED_ESCAPES:
            parts.append(_NAMED_ESCAPES[char])
        else:
            code = ord(char)
            parts.append(
                f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
            )
    return "".join(parts)


def error_text(exc: Any) -> str:
    """What the CLI prints for an ``AgentCoreError``: ``soong-agent: error: <message>`` on one line, then
    the minimal config a missing-config error carries (``details["minimal_config"]``), indented."""
    text = f"soong-agent: error: {escape_terminal(str(exc.message))}\n"
    details = getattr(exc, "details", None) or {}
    minimal = details.get("minimal_config") if isinstance(details, dict) else None
    if isinstance(minimal, str) and minimal:
        body = escape_terminal(minimal, keep_newlines=True).rstrip("\n")
        text += "minimal config.toml:\n" + "".join(f"    {line}\n" for line in body.split("\n"))
    return text


class Output:
    """Writes to a stream, ignoring a closed pipe (``soong-agent run ... | head``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.broken = False

    def write(self, text: str) -> None:
        if self.broken or not text:
            return
        try:
            self.stream.write(text)
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            self.broken = True
            # the stream's buffered remainder would fail again at interpreter exit: point the file
            # descriptor at /dev/null (the recipe in the Python signal docs)
            with contextlib.suppress(AttributeError, OSError, ValueError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, self.stream.fileno())
                os.close(devnull)


class StdinLines:
    """Line reader over stdin's file descriptor for permission answers, with a per-answer timeout.

    One daemon thread reads raw bytes (``os.read``: no Python stream lock is held while it blocks) and
    hands complete lines to the event loop; end of input (EOF, closed or unreadable stdin) is final.
    Lines piped in ahead are answers to later prompts; on a terminal, lines typed before a prompt
    appeared are discarded.
    """

    def __init__(self, stream: TextIO | None) -> None:
        self._fd: int | None = None
        self._tty = False
        if stream is not None:
            with contextlib.suppress(AttributeError, OSError, ValueError):
                self._fd = stream.fileno()
                self._tty = stream.isatty()
        self._queue: asyncio.Queue[str | None] | None = None
        self._eof = False

    @property
    def interactive(self) -> bool:
        return self._tty

    def _reader(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        def deliver(line: str | None) -> bool:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, line)
            except RuntimeError:  # the event loop is closed: the CLI is exiting
                return False
            return True

        buffer = b""
        while True:
            try:
                chunk = os.read(self._fd, 4096) if self._fd is not None else b""
            except InterruptedError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                if buffer:
                    deliver(buffer.decode("utf-8", "replace"))
                deliver(None)
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not deliver(line.decode("utf-8", "replace")):
                    return

    async def readline(self, timeout: float) -> tuple[bool, str | None]:
        """``(answered, line)``: ``line`` is ``None`` at end of input; ``answered`` is false on timeout."""
        if self._eof:
            return True, None
        if self._queue is None:
            self._queue = asyncio.Queue()
            thread = threading.Thread(
                target=self._reader,
                args=(asyncio.get_running_loop(), self._queue),
                name="soong-agent-stdin",
                daemon=True,
            )
            thread.start()
        elif self._tty:  # typed ahead on a terminal, before this prompt was shown
            while not self._queue.empty():
                if self._queue.get_nowait() is None:
                    self._eof = True
                    return True, None
        try:
            line = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return False, None
        if line is None:
            self._eof = True
        return True, line
