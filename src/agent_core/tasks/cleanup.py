"""Terminal Task WAL cleanup behind ``runtime.cleanup_project_tasks`` (task-board.md §2.1, storage.md §11.4).

Only terminal WALs are candidates (terminal = the last complete line is ``task_completed`` / ``task_failed`` /
``task_cancelled``); ``completed`` ones by default, ``failed`` / ``cancelled`` only with their flags. Active
WALs are never listed. Dry-run by default; deletion failures are reported, never raised.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tasks import wal as wal_mod
from agent_core.types.enums import TaskStatus
from agent_core.types.runtime import CleanupFailure, CleanupItem, CleanupResult


def cleanup_task_wals(
    wal_root: Path,
    *,
    dry_run: bool = True,
    include_failed: bool = False,
    include_cancelled: bool = False,
    older_than: datetime | None = None,
    active_paths: Collection[Path] = (),
) -> CleanupResult:
    """Lists (and unless ``dry_run`` deletes) terminal WALs under ``<wal_root>/<session_id>/``."""
    wanted = {TaskStatus.completed}
    if include_failed:
        wanted.add(TaskStatus.failed)
    if include_cancelled:
        wanted.add(TaskStatus.cancelled)
    active = {p.resolve() for p in active_paths}
    result = CleanupResult(dry_run=dry_run)
    sessions = sorted(p for p in wal_root.iterdir() if p.is_dir()) if wal_root.is_dir() else []
    for session_dir in sessions:
        for path in wal_mod.list_wal_files(session_dir):
            if path.resolve() in active:
                continue
            try:
                tail = wal_mod.read_tail(path)
                stat = path.stat()
            except OSError:
                continue
            status = tail.terminal_status
            if status is None or status not in wanted:
                continue
            if older_than is not None and datetime.fromtimestamp(stat.st_mtime, UTC) >= older_than:
                continue
            item = CleanupItem(
                kind="task_wal",
                id=tail.task_id,
                path=str(path),
                size_bytes=stat.st_size,
                reason=f"terminal_{status.value}",
            )
            result.candidates.append(item)
            if dry_run:
                continue
            try:
                path.unlink()
            except OSError as exc:
                error = AgentCoreError(ErrorCode.storage_error, f"cannot delete {path.name}: {exc}")
                result.failures.append(CleanupFailure(item=item, error=error.to_payload()))
                result.partial_failure = True
                continue
            result.deleted.append(item)
            result.freed_bytes += item.size_bytes
    return result
