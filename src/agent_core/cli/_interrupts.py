"""Ctrl-C (SIGINT) for the whole ``soong-agent`` process (issue 32 item 6).

Whenever Ctrl-C arrives — during the imports, while the runtime opens, during a run or while it shuts
down — the process ends with one line and status 130, never a traceback, and never with storage or a run
left half-written. How:

- :func:`install` runs first thing in ``agent_core.cli`` (when the process is the CLI program) and in
  ``main``: until the event loop runs nothing has been opened (imports, argument parsing), so SIGINT
  prints ``soong-agent: interrupted`` and exits 130 at once.
- While the loop runs, :func:`run_main` owns SIGINT through the loop (``add_signal_handler``). A command
  that has something to stop registers what Ctrl-C means for it with :func:`on_interrupt` (cancel the run,
  stop the server, ...); the innermost registration gets each Ctrl-C. Without one (startup, shutdown),
  the first Ctrl-C is only recorded: the opening or closing in progress finishes, the command checks
  :func:`pending` at its next step and ends with 130 without starting anything new. A second Ctrl-C
  without a registration cancels the command (for a startup that hangs); a third exits at once.
- After the command returned, Ctrl-C only records the interrupt (the loop is closing): status 130.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when first used: this module is imported before everything else
    import asyncio
    from collections.abc import Awaitable, Callable
    from types import FrameType

EXIT_INTERRUPTED = 130
INTERRUPTED_LINE = "soong-agent: interrupted\n"


class _State:
    count = 0
    delivered = 0
    """``count`` when a registered handler last received (or registered to receive) the interrupts."""
    handlers: list[Callable[[], None]] = []
    main: asyncio.Task[Any] | None = None
    loop_running = False
    reported = False


_state = _State()


def _raise(signum: int, frame: FrameType | None) -> None:
    """Before the event loop runs nothing is open (imports, parsing the arguments): exit at once."""
    _state.count += 1
    if _state.loop_running:  # a signal that raced the loop's own handler: record it only
        return
    try:
        sys.stderr.write(INTERRUPTED_LINE)
        sys.stderr.flush()
    finally:
        os._exit(EXIT_INTERRUPTED)


def _record(signum: int, frame: FrameType | None) -> None:
    _state.count += 1


def install() -> None:
    """Until :func:`run_main` takes SIGINT over, Ctrl-C prints the line and exits 130 at once (main thread
    only)."""
    try:
        signal.signal(signal.SIGINT, _raise)
    except ValueError:  # not the main thread (an embedding test): leave it alone
        pass


def install_if_launched() -> None:
    """:func:`install` when this process is the CLI program being started (the ``soong-agent`` script, or
    ``python -m agent_core.cli`` while the module is located): importing the package elsewhere (a test,
    an embedding application) leaves the process's signal handling alone."""
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 == "-m" or os.path.basename(argv0) == "soong-agent":
        install()


def count() -> int:
    """How many times Ctrl-C arrived in this process."""
    return _state.count


def pending() -> bool:
    """Whether Ctrl-C arrived (the command should stop at its next step and return 130)."""
    return _state.count > 0


def mark_reported() -> None:
    """The command printed its own line about the interrupt (``main`` adds none)."""
    _state.reported = True


def reported() -> bool:
    return _state.reported


def missed() -> int:
    """Interrupts no registered handler received (they make the exit status 130)."""
    return _state.count - _state.delivered


def _dispatch() -> None:
    _state.count += 1
    if _state.handlers:
        _state.handlers[-1]()
        return
    misses = missed()
    if misses == 2 and _state.main is not None and not _state.main.done():
        _state.main.cancel()  # a startup or shutdown that does not end: stop waiting for it
    elif misses >= 3:
        sys.stderr.write(INTERRUPTED_LINE)
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)


class on_interrupt:
    """``with on_interrupt(handler):`` Ctrl-C calls ``handler`` (on the event loop) while the block runs; a
    Ctrl-C that arrived before, while nothing was registered, is delivered to it at once."""

    def __init__(self, handler: Callable[[], None]) -> None:
        self.handler = handler

    def __enter__(self) -> None:
        import asyncio

        missed = _state.count - _state.delivered
        _state.handlers.append(self.handler)
        _state.delivered = _state.count
        if missed and _state.loop_running:
            asyncio.get_running_loop().call_soon(self.handler)

    def __exit__(self, *exc: object) -> None:
        if self.handler in _state.handlers:
            _state.handlers.remove(self.handler)
        _state.delivered = _state.count


async def run_main(command: Awaitable[int]) -> int:
    """Runs the command's coroutine with SIGINT dispatched as described in the module docstring."""
    import asyncio
    import contextlib

    loop = asyncio.get_running_loop()
    _state.main = asyncio.current_task()
    _state.delivered = _state.count
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, _dispatch)
        _state.loop_running = True
    try:
        return await command
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGINT)
        with contextlib.suppress(ValueError):
            signal.signal(signal.SIGINT, _record)  # the loop is closing: only record from here on
        _state.loop_running = False


async def serve_until_stopped(serving: asyncio.Future[None], stopped_by: list[str]) -> None:
    """Awaits a server's task ``serving`` until it ends; SIGTERM and Ctrl-C cancel it, and the signal's name
    (``"SIGTERM"`` / ``"SIGINT"``) is appended to ``stopped_by``."""
    import asyncio
    import contextlib

    def stop(why: str) -> None:
        stopped_by.append(why)
        serving.cancel()

    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGTERM, stop, "SIGTERM")
    try:
        with on_interrupt(lambda: stop("SIGINT")), contextlib.suppress(asyncio.CancelledError):
            await serving
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
