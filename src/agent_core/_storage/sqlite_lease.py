"""The session lease on an SQLite home: one running root run per session across the processes (and
runtimes) that open one database file, waiting runs in arrival order (issue 40).

A lease is an exclusive ``flock`` on ``<database>.locks/<session>.lock``, held for as long as the root run
runs. The kernel releases it when the holder's process dies (SIGKILL included) and keeps it while the
process is frozen, so the lease is never taken from a run that may still write. The file holds the
holder's pid (for "the session is busy" messages), written in place at a fixed width.

``flock`` grants a freed lock to whichever waiter asks next, so the waiting order is kept beside it: a run
that cannot take the lease at once queues a *ticket* in ``<session>.queue/`` — a file named by the
system-wide monotonic clock, exclusively ``flock``-ed by its waiter while it waits (created under a dot
name, locked, then renamed, so a visible ticket is always locked unless its waiter died) — and takes the
lease only when no older live ticket is left. A run that finds live tickets queues too, so a process
starting run after run on a session cannot overtake another process's waiting run. Tickets of dead
waiters (their lock is free) are removed by whoever sees them. Waiting polls every :data:`POLL_S`.

Nothing here blocks: the file operations are local and take microseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from agent_core._private_fs import make_private_dirs

POLL_S = 0.02
"""How often a waiting run looks whether its turn has come."""
MAX_NAME = 100
PID_WIDTH = 12


def lock_key(session_id: str) -> str:
    """The session's file-name stem: its (validated, ``[A-Za-z0-9_]``) id, or a hash of a long one."""
    if len(session_id) <= MAX_NAME:
        return session_id
    import hashlib  # only for ids too long for a file name

    return "h" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def _try_lock(fd: int, mode: int) -> bool:
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class FileSessionLease:
    """``async with`` holds the session's lease (waiting for its turn first); :meth:`try_enter` takes it
    only if no other run holds it or waits for it."""

    def __init__(self, locks_dir: Path, session_id: str) -> None:
        self._dir = locks_dir
        key = lock_key(session_id)
        self._lock_path = locks_dir / f"{key}.lock"
        self._queue_dir = locks_dir / f"{key}.queue"
        self._fd: int | None = None
        self.queue_position = 0
        """After a :meth:`try_enter` that returned ``False``: the runs ahead of this one (the holder and
        the waiters)."""

    @property
    def held(self) -> bool:
        return self._fd is not None

    # ---- taking the lock ----------------------------------------------------------------------

    def try_enter(self) -> bool:
        """Takes the lease if nobody holds it and nobody waits for it; ``False`` otherwise."""
        if self._fd is not None:
            return True
        waiting = self._live_tickets()
        if not waiting and self._lock_now():
            return True
        self.queue_position = len(waiting) + 1
        return False

    def _lock_now(self) -> bool:
        flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(self._lock_path, flags, 0o600)
        except FileNotFoundError:  # the first lease of this database
            make_private_dirs(self._dir)
            fd = os.open(self._lock_path, flags, 0o600)
        if not _try_lock(fd, fcntl.LOCK_EX):
            os.close(fd)
            return False
        # overwritten in place at a fixed width: truncating first would make ext4 flush the file on close
        with contextlib.suppress(OSError):  # the pid is only for messages
            os.pwrite(fd, f"{os.getpid():>{PID_WIDTH}}\n".encode(), 0)
        self._fd = fd
        return True

    def _live_tickets(self, before: str | None = None) -> list[str]:
        """The tickets of live waiters (older than ``before``, if given), oldest first; removes those of
        dead waiters."""
        try:
            names = sorted(n for n in os.listdir(self._queue_dir) if not n.startswith("."))
        except FileNotFoundError:
            return []
        live: list[str] = []
        for name in names:
            if before is not None and name >= before:
                break
            path = self._queue_dir / name
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            try:
                if _try_lock(fd, fcntl.LOCK_SH):  # nobody holds it: its waiter is gone
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                else:
                    live.append(name)
            finally:
                os.close(fd)
        return live

    def _queue_ticket(self) -> tuple[str, int]:
        """A new ticket, locked by this waiter: its name and descriptor."""
        make_private_dirs(self._queue_dir)
        name = f"{time.monotonic_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}"
        hidden = self._queue_dir / f".{name}"
        fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(hidden, self._queue_dir / name)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                hidden.unlink()
            raise
        return name, fd

    async def __aenter__(self) -> FileSessionLease:
        if self._fd is not None:
            return self
        name, ticket = self._queue_ticket()
        try:
            while not (not self._live_tickets(before=name) and self._lock_now()):
                await asyncio.sleep(POLL_S)
        finally:  # granted, cancelled or failed: the ticket goes
            with contextlib.suppress(FileNotFoundError):
                (self._queue_dir / name).unlink()
            os.close(ticket)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    def release(self) -> None:
        """Gives the lease up (closing the file releases the lock). Idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def lease_holder(locks_dir: Path, session_id: str) -> str | None:
    """Who holds ``session_id``'s lease or waits for it, for a message (``"pid N"``), or ``None`` when the
    lease is free and nobody waits. Takes nothing (a free lease is taken and given back at once)."""
    probe = FileSessionLease(locks_dir, session_id)
    waiting = probe._live_tickets()
    if not probe._lock_path.exists():
        held = False
    elif probe._lock_now():
        probe.release()
        held = False
    else:
        held = True
    if not held and not waiting:
        return None
    pid = ""
    if held:
        with contextlib.suppress(OSError):
            pid = probe._lock_path.read_text(encoding="utf-8").strip()
    elif waiting:
        pid = waiting[0].split("-")[1]
    return f"pid {pid}" if pid.isdigit() else "another process"
