"""Where a session's Task WALs live: ``<wal root>/<session_id>/<name>.wal.jsonl``
(docs/task-board.md#wal-names).

Kept apart from the WAL reader and writer so the runtime can tell whether a session has Tasks at all
without importing the Task DAG (cold start).
"""

from __future__ import annotations

from pathlib import Path

WAL_SUFFIX = ".wal.jsonl"

__all__ = ["WAL_SUFFIX", "list_wal_files"]


def list_wal_files(session_dir: Path) -> list[Path]:
    """The session's WAL files in filename order (missing directory → ``[]``)."""
    if not session_dir.is_dir():
        return []
    return sorted(p for p in session_dir.iterdir() if p.name.endswith(WAL_SUFFIX) and p.is_file())
