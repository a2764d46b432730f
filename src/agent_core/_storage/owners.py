"""Which process holds a claim (``tool_call_claims.owner``) and whether it is still alive.

A claim is taken over only when its owner is dead, never because it is late: a worker frozen or starved
past its heartbeat timeout (SIGSTOP, a loaded machine) still holds its claims and resumes their work.

* SQLite (one machine: the database is a local file): the owner is ``pid:<host>:<pid>:<start>`` — the
  process id and its start time (``/proc/<pid>/stat``, so a reused pid is not mistaken for the owner); it
  is alive while that process exists and is not a zombie. An owner on another host counts as alive.
  A run's owner (``run_owners``) names the open store as well, ``<process owner>/<store>``: alive while its
  process is, and, in this process, while that store is open (two runtimes of one process on one home do
  not take each other's runs for orphans).
* PostgreSQL: the owner is ``pg:<owner key>``, the advisory lock each open store holds on its writer
  connection (:mod:`agent_core._storage.postgres.store`); it is alive while that lock is held.
"""

from __future__ import annotations

import functools
import os
import socket
from collections.abc import Iterable

PID_PREFIX = "pid:"
PG_PREFIX = "pg:"


@functools.cache
def process_owner() -> str:
    """This process's owner id on the SQLite backend."""
    pid = os.getpid()
    return f"{PID_PREFIX}{socket.gethostname()}:{pid}:{_start_time(pid) or ''}"


_OPEN_STORES: set[str] = set()
"""The store owners of this process that are open."""


def open_store_owner() -> str:
    """A new owner id for a store this process opens (alive until :func:`close_store_owner`)."""
    owner = f"{process_owner()}/{os.urandom(6).hex()}"
    _OPEN_STORES.add(owner)
    return owner


def close_store_owner(owner: str) -> None:
    _OPEN_STORES.discard(owner)


def store_alive(owner: str) -> bool:
    """Whether the store of a ``<process owner>/<store>`` owner is still open (a plain process owner:
    whether its process runs)."""
    process, slash, _ = owner.rpartition("/")
    if not slash:
        return local_alive(owner)
    if process == process_owner():
        return owner in _OPEN_STORES
    return local_alive(process)


def pg_owner(owner_key: int) -> str:
    return f"{PG_PREFIX}{owner_key}"


def pg_owner_keys(owners: Iterable[str]) -> dict[str, int]:
    """The advisory-lock keys of the PostgreSQL owners among ``owners`` (by owner id)."""
    keys: dict[str, int] = {}
    for owner in owners:
        if owner.startswith(PG_PREFIX) and owner[len(PG_PREFIX) :].isdigit():
            keys[owner] = int(owner[len(PG_PREFIX) :])
    return keys


def local_alive(owner: str) -> bool:
    """Whether the process of a ``pid:`` owner still runs (``True`` for an owner this cannot check: on
    another host, or not a ``pid:`` owner)."""
    if not owner.startswith(PID_PREFIX):
        return True
    host, _, rest = owner[len(PID_PREFIX) :].partition(":")
    pid_text, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return True
    pid = int(pid_text)
    stat = _stat(pid)
    if stat is None:  # no /proc: the process exists or not
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if not stat:
        return False  # gone
    state, started = stat[0], stat[19] if len(stat) > 19 else ""
    return state not in ("Z", "X") and (not start or started == start)


def _start_time(pid: int) -> str | None:
    stat = _stat(pid)
    return stat[19] if stat and len(stat) > 19 else None


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[]``: no such process; ``None``: no
    ``/proc`` on this system)."""
    if not os.path.isdir("/proc/self"):
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return []
    except OSError:
        return []
    return text[text.rfind(")") + 2 :].split()
