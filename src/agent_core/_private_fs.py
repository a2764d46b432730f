"""Files and directories the runtime creates under its home are private (issue 31 item 14).

Conversation data (``sessions.sqlite`` and its ``-wal``/``-shm``, artifacts, memory files, live-follow
port files) must not be readable by other local users. Every directory the runtime creates gets mode
0700 and every file 0600 (the process umask can only narrow these); directories that already exist,
such as a home or project the user made, keep their permissions. SQLite creates the ``-wal`` and
``-shm`` files with the mode of the database file, so creating that one 0600 covers all three.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def make_private_dirs(path: Path) -> None:
    """Creates ``path`` and its missing parents, each with mode 0700; existing ones are left alone."""
    missing: list[Path] = []
    current = Path(path)
    while not os.path.lexists(current):
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue


def create_private_file(path: Path) -> None:
    """Creates an empty ``path`` with mode 0600 when it does not exist yet (never follows a symlink);
    an existing file is left as it is."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def open_private_new(path: Path) -> int:
    """A new file ``path`` (it must not exist) opened for writing, mode 0600; returns the descriptor."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
