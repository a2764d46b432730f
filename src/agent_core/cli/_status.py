"""The model status line of ``run`` and ``chat`` (issue 32): visibly alive while the model reads the prompt.

Both commands feed every event of their run to :meth:`ModelStatus.handle` before printing it. The status
comes from the live ``model_progress`` events (``waiting`` → ``streaming`` → ``done``) that the web UI reads
too. Contracts:

- From the request until the first token there is ONE status line on stderr: the model, the prompt size
  in tokens and the seconds waited. On a terminal it is a spinner redrawn in place (``\\r`` + erase line)
  and erased when the first token arrives or anything else is printed; otherwise it is a single plain
  line written once when the request goes out.
- After each answer one line gives the output rate: ``[model] 142 tokens at 78.1 tokens/s (first token
  after 12.3 s, 3,212 prompt tokens)``.
- Model names are escaped like every other provider-derived text.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_core.cli._terminal import Output, escape_terminal

if TYPE_CHECKING:
    from agent_core.types.events import ModelProgress
    from agent_core.types.runtime import RuntimeEvent

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FRAME_S = 0.1
_DIM, _RESET, _ERASE = "\x1b[2m", "\x1b[0m", "\r\x1b[2K"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _tokens(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else "?"


class ModelStatus:
    """The status line of one command (``run`` or ``chat``) on ``err``."""

    def __init__(self, err: Output, *, terminal: bool | None = None) -> None:
        self.err = err
        self.terminal = _isatty(err.stream) if terminal is None else terminal
        self._spinner: asyncio.TimerHandle | None = None
        """The next frame of the spinner (a timer on the loop: no task)."""
        self._shown = False
        self._since = 0.0
        self._label = ""
        self.before_line: Callable[[], None] | None = None
        """Called before the rate line is written (the command ends its open text line)."""
        self.line_open: Callable[[], bool] | None = None
        """Whether the command's reply text has an open line on the terminal (a ``max_tokens``
        continuation goes on with it): no spinner is drawn over it then."""

    # ---- events -----------------------------------------------------------------------------------
    def handle(self, event: RuntimeEvent, *, root: bool = True) -> bool:
        """Updates the status for ``event``; True when the event was a ``model_progress`` (nothing else to
        print for it). Any other event erases a spinner first, so output never lands on its line."""
        from agent_core.types.events import MessageDelta, ModelProgress  # loaded with the runtime

        p = event.payload
        if not isinstance(p, ModelProgress):
            if not isinstance(p, MessageDelta) or p.text:
                self.clear()
            return False
        if p.phase == "waiting":
            self._waiting(p)
        elif p.phase == "streaming":
            self.clear()
        elif p.phase == "done":
            self.clear()
            if root and p.stop_reason != "max_tokens":  # a continuation follows: no line yet
                self._done(p)
        return True

    def _waiting(self, p: ModelProgress) -> None:
        self.clear()
        model = escape_terminal(str(p.model or "the model"))
        self._label = f"{model} · {_tokens(p.prompt_tokens)} prompt tokens"
        self._since = time.monotonic()
        if self.line_open is not None and self.line_open():
            return  # a continuation of open reply text: the status waits for the end of the answer
        if not self.terminal:
            self.err.write(f"[model] waiting for {model} ({_tokens(p.prompt_tokens)} prompt tokens)\n")
            return
        self._draw(0)
        with contextlib.suppress(RuntimeError):
            self._spinner = asyncio.get_running_loop().call_later(FRAME_S, self._spin, 1)

    def _spin(self, frame: int) -> None:
        self._draw(frame)
        self._spinner = asyncio.get_running_loop().call_later(FRAME_S, self._spin, frame + 1)

    def _draw(self, frame: int) -> None:
        waited = time.monotonic() - self._since
        glyph = SPINNER[frame % len(SPINNER)]
        self.err.write(f"{_ERASE}{_DIM}{glyph} {self._label} · waiting {waited:.1f} s{_RESET}")
        self._shown = True

    def _done(self, p: ModelProgress) -> None:
        rate = p.tokens_per_second
        waited = p.waited_ms
        parts = [f"{_tokens(p.output_tokens)} tokens"]
        if isinstance(rate, int | float):
            parts.append(f"at {rate:.1f} tokens/s")
        detail = []
        if isinstance(waited, int):
            detail.append(f"first token after {waited / 1000:.1f} s")
        if isinstance(p.prompt_tokens, int) and p.prompt_tokens:
            detail.append(f"{_tokens(p.prompt_tokens)} prompt tokens")
        line = "[model] " + " ".join(parts) + (f" ({', '.join(detail)})" if detail else "")
        if self.before_line is not None:
            self.before_line()
        self.err.write(f"{_DIM}{line}{_RESET}\n" if self.terminal else line + "\n")

    def clear(self) -> None:
        """Stops and erases the spinner (a no-op when none is shown)."""
        if self._spinner is not None:
            self._spinner.cancel()
            self._spinner = None
        if self._shown:
            self._shown = False
            self.err.write(_ERASE)
