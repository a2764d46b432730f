"""Line input for ``soong-agent chat``: prompt_toolkit on a terminal, plain lines otherwise.

Why prompt_toolkit (not readline): it is asyncio-native (``prompt_async`` runs on the chat's event loop
while runs, permission callbacks and child streams share that loop), gives line editing and a persistent
history file without touching the process-wide readline state, and works under a pseudo-terminal
(pexpect). It is imported only when stdin and the prompt stream are terminals.

Contracts of :class:`LineInput`:

- ``read(prompt)`` returns the line (without its newline), ``None`` at end of input (Ctrl-D on an empty
  line, EOF), and raises :class:`Interrupted` for Ctrl-C.
- ``history=True`` lines go to ``${SOONG_AGENT_HOME}/chat_history`` (mode 0600); answers to permission
  prompts never do.
- Plain mode writes the prompt to ``prompt_out`` and reads stdin lines; Ctrl-C arrives as SIGINT and is
  delivered through :meth:`PlainInput.interrupt`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from agent_core._concurrency import race
from agent_core.cli._terminal import Output, StdinLines

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

HISTORY_FILE = "chat_history"


class Interrupted(Exception):
    """Ctrl-C at a prompt (an ``Exception``, unlike ``KeyboardInterrupt``, so tasks can carry it)."""


class LineInput(Protocol):
    interactive: bool
    on_first_prompt: Callable[[], None] | None
    """Called (once, soon after) when the first prompt has been drawn."""

    async def read(self, prompt: str, *, history: bool = True) -> str | None: ...

    def interrupt(self) -> None: ...

    def abort(self) -> None:
        """Ends the prompt being shown (``read`` returns ``None``), e.g. when the runtime failed to open."""
        ...

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        """While a reply streams: typed keys are not echoed (see :func:`no_echo`)."""
        ...


def chat_home() -> Path:
    """``$SOONG_AGENT_HOME`` or ``~/.soong-agent`` (config.loader.resolve_home, without importing the
    config models before the first prompt)."""
    return Path(os.environ.get("SOONG_AGENT_HOME") or Path.home() / ".soong-agent").expanduser()


def _first_prompt_hook(owner: Any) -> Callable[[], None] | None:
    callback, owner.on_first_prompt = owner.on_first_prompt, None
    if callback is None:
        return None
    loop = asyncio.get_running_loop()

    def soon() -> None:
        loop.call_soon(callback)

    return soon


class TerminalInput:
    """prompt_toolkit sessions (one with the history file, one without) on the terminal."""

    interactive = True

    def __init__(self, home: Path, stdin: TextIO, prompt_out: TextIO) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, InMemoryHistory
        from prompt_toolkit.input import create_input
        from prompt_toolkit.output import create_output

        path = home / HISTORY_FILE
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.close(fd)
        self._stdin = stdin
        io: dict[str, Any] = {"input": create_input(stdin), "output": create_output(prompt_out)}
        self._lines: PromptSession[str] = PromptSession(history=FileHistory(str(path)), **io)
        self._answers: PromptSession[str] = PromptSession(history=InMemoryHistory(), **io)
        self._aborted = False
        self._interrupted = False
        self.on_first_prompt: Callable[[], None] | None = None

    async def read(self, prompt: str, *, history: bool = True) -> str | None:
        session = self._lines if history else self._answers
        if self._aborted:
            return None
        if self._interrupted:
            self._interrupted = False
            raise Interrupted
        try:
            return await session.prompt_async(prompt, handle_sigint=False, pre_run=_first_prompt_hook(self))
        except EOFError:
            return None
        except KeyboardInterrupt:  # never let it escape a task: asyncio re-raises it out of the loop
            raise Interrupted from None

    def interrupt(self) -> None:
        """SIGINT. At a prompt Ctrl-C is a key press (raw mode), not a signal; a SIGINT comes from a Ctrl-C
        typed while no prompt holds the terminal (a second Ctrl-C right after the first, while the note is
        printed) or from ``kill -INT``: the prompt being shown ends, else the next ``read``, with
        :class:`Interrupted`, as the key would have."""
        for session in (self._lines, self._answers):
            if session.app.is_running:
                # prompt_toolkit raises a bare Exception when the prompt has already got its result
                with contextlib.suppress(Exception):
                    session.app.exit(exception=KeyboardInterrupt())
                    return
        self._interrupted = True

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        return no_echo(self._stdin)

    def abort(self) -> None:
        self._aborted = True
        for session in (self._lines, self._answers):
            if session.app.is_running:
                session.app.exit(exception=EOFError())


class PlainInput:
    """Stdin lines (a pipe or a file) with the prompt written to ``prompt_out``."""

    interactive = False

    def __init__(self, stdin: TextIO | None, prompt_out: Output) -> None:
        self._lines = StdinLines(stdin)
        self._out = prompt_out
        self._interrupted: asyncio.Event | None = None
        self._aborted = False
        self.on_first_prompt: Callable[[], None] | None = None

    async def read(self, prompt: str, *, history: bool = True) -> str | None:
        if self._aborted:
            return None
        self._out.write(prompt)
        shown = _first_prompt_hook(self)
        if shown is not None:
            shown()
        if self._interrupted is None:
            self._interrupted = asyncio.Event()
        self._interrupted.clear()
        reading = await race(self._lines.readline(24 * 3600.0), self._interrupted)
        if reading.cancelled():  # interrupted: the read was cancelled
            self._out.write("\n")
            if self._aborted:
                return None
            raise Interrupted
        answered, line = reading.result()
        if line is None:
            self._out.write("\n")
            return None
        return line if answered else ""

    def interrupt(self) -> None:
        if self._interrupted is not None:
            self._interrupted.set()

    def abort(self) -> None:
        self._aborted = True
        self.interrupt()

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()


@contextlib.contextmanager
def no_echo(stream: TextIO) -> Iterator[None]:
    """Turns the terminal's echo off (``ECHO`` and ``ECHOCTL``) for the block, then restores it.

    Used while a reply streams: keys typed meanwhile wait unseen in the terminal's input queue and the next
    prompt shows and runs them (a line typed during a reply is queued, never dropped), and neither they nor
    an echoed ``^C`` can push the redrawn reply area down a line, which left a second copy of the partial
    reply on screen after a cancel. Not a terminal → no change."""
    try:
        import termios

        fd = stream.fileno()
        saved = termios.tcgetattr(fd)
    except (ImportError, AttributeError, ValueError, OSError):
        yield
        return
    quiet = list(saved)
    quiet[3] &= ~(termios.ECHO | termios.ECHOCTL)
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
    except (termios.error, OSError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def open_input(home: Path, stdin: TextIO | None, prompt_out: Output) -> LineInput:
    """:class:`TerminalInput` when stdin and the prompt stream are terminals, else :class:`PlainInput`."""
    try:
        tty = stdin is not None and stdin.isatty() and prompt_out.stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if tty and stdin is not None:
        return TerminalInput(home, stdin, prompt_out.stream)
    return PlainInput(stdin, prompt_out)
