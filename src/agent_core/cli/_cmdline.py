"""Secrets on the command line (issue 31 item 11): scrub a value from this process's visible argv.

``/proc/<pid>/cmdline`` (what ``ps`` shows every local user) is read live from the process memory between
``arg_start`` and ``arg_end``, two addresses Linux publishes in ``/proc/self/stat`` (proc(5), fields 48 and
49). :func:`scrub_from_cmdline` overwrites every occurrence of the secret there with ``*`` of the same
length; Python's own ``sys.argv`` is a decoded copy and stays unchanged. Only the standard library
(``ctypes``) is used, no dependency. The value was visible from ``exec`` until the scrub (the start of the
process), and in the shell's history: the CLI says so when ``--token`` is used.
"""

from __future__ import annotations

import os
import sys

_ARG_START_FIELD = 48
_ARG_END_FIELD = 49


def _argv_area() -> tuple[int, int] | None:
    try:
        with open("/proc/self/stat", "rb") as stat:
            text = stat.read()
        fields = text[text.rindex(b")") + 2 :].split()  # fields after "(comm)" start at field 3
        start = int(fields[_ARG_START_FIELD - 3])
        end = int(fields[_ARG_END_FIELD - 3])
    except (OSError, ValueError, IndexError):
        return None
    return (start, end) if 0 < start < end else None


def _cmdline() -> bytes:
    try:
        with open("/proc/self/cmdline", "rb") as cmdline:
            return cmdline.read()
    except OSError:
        return b""


def scrub_from_cmdline(secret: str) -> bool:
    """Overwrites ``secret`` in this process's argv memory; ``True`` when ``/proc/self/cmdline`` no longer
    holds it (also when it never did), ``False`` when it could not be scrubbed (not Linux, no ``/proc``)."""
    needle = os.fsencode(secret)
    if not needle or not sys.platform.startswith("linux"):
        return False
    if needle not in _cmdline():
        return bool(_cmdline())
    area = _argv_area()
    if area is None:
        return False
    import ctypes

    start, end = area
    memory = ctypes.string_at(start, end - start)
    at = memory.find(needle)
    while at != -1:
        ctypes.memset(start + at, ord("*"), len(needle))
        at = memory.find(needle, at + len(needle))
    return needle not in _cmdline()
