"""Cleanup of terminal Task WALs (docs/storage.md#deleting-and-cleaning-up).

Only each WAL's last complete line is read (the terminal record); SQLite is never touched. Dry runs never
delete anything. Failures are returned as structured ``failures`` with ``partial_failure=True`` and are
never raised. Every file removal goes through :func:`unlink_path` (the seam tests replace to inject
``OSError``).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core._tasks.wal_files import WAL_SUFFIX
from agent_core.errors import ErrorCode
from agent_core.types._results import CleanupFailure, CleanupItem, CleanupResult
from agent_core.types.base import parse_ts
from agent_core.types.content import ErrorPayload

if TYPE_CHECKING:  # not imported at run time: cleanup never needs the WAL writer's module (cold start)
    from agent_core._tasks.wal import WalWriter

_TERMINAL_WAL = {
    "task_completed": "completed_task_wal",
    "task_failed": "failed_task_wal",
    "task_cancelled": "cancelled_task_wal",
}


def unlink_path(path: Path) -> None:
    """Removes one file. The only low-level file deletion of WAL cleanup (a test seam)."""
    path.unlink()


def _error(code: ErrorCode, message: str, **details: Any) -> ErrorPayload:
    return ErrorPayload(code=code, message=message, details=details).redacted_copy()


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def read_last_complete_line(path: Path, chunk: int = 8192) -> bytes | None:
    """The last ``\\n``-terminated line of ``path`` (without the newline); ``None`` if there is none.

    Reads backwards from the end, so only the tail of a long WAL is touched.
    """
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        pos = fh.tell()
        buf = b""
        while pos > 0:
            step = min(chunk, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            last_nl = buf.rfind(b"\n")
            if last_nl == -1:
                continue
            prev_nl = buf.rfind(b"\n", 0, last_nl)
            if prev_nl != -1 or pos == 0:
                return buf[prev_nl + 1 : last_nl]
        return None


def _last_record(path: Path) -> dict[str, Any]:
    line = read_last_complete_line(path)
    if line is None:
        raise ValueError("no complete WAL line")
    record = json.loads(line)
    if not isinstance(record, dict) or not isinstance(record.get("event_type"), str):
        raise ValueError("the last WAL line is not a WAL record")
    if not isinstance(record.get("created_at"), str):
        raise ValueError("the last WAL line has no created_at")
    parse_ts(record["created_at"])
    return record


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _cleanup_task_wals_sync(
    wal_root: Path,
    dry_run: bool,
    include_failed: bool,
    include_cancelled: bool,
    older_than: datetime | None,
    active_wal_paths: Iterable[Path],
    writer: WalWriter | None = None,
) -> CleanupResult:
    if writer is not None and writer.SHARED:
        return _cleanup_shared_wals(
            writer,
            wal_root,
            dry_run,
            _wanted(include_failed, include_cancelled),
            older_than,
            active_wal_paths,
        )
    result = CleanupResult(dry_run=dry_run)
    if not wal_root.is_dir():
        return result
    cutoff = _as_utc(older_than) if older_than is not None else None
    active = {Path(p).resolve() for p in active_wal_paths}
    wanted = _wanted(include_failed, include_cancelled)
    for path in sorted(wal_root.glob(f"*/*{WAL_SUFFIX}")):
        if path.resolve() in active:
            continue
        try:
            record = _last_record(path)
        except (OSError, ValueError) as exc:
            item = CleanupItem(
                kind="task_wal",
                id=None,
                path=str(path),
                size_bytes=_size(path),
                reason="task_wal_unavailable",
            )
            error = _error(ErrorCode.task_wal_unavailable, f"cannot read Task WAL: {exc}", path=str(path))
            result.failures.append(CleanupFailure(item=item, error=error))
            continue
        reason = _TERMINAL_WAL.get(record["event_type"])
        if reason not in wanted:
            continue
        if cutoff is not None and parse_ts(record["created_at"]) >= cutoff:
            continue
        task_id = record.get("task_id")
        result.candidates.append(
            CleanupItem(
                kind="task_wal",
                id=task_id if isinstance(task_id, str) else None,
                path=str(path),
                size_bytes=_size(path),
                reason=str(reason),
            )
        )
    if not dry_run:
        touched: set[Path] = set()
        for item in result.candidates:
            path = Path(item.path)
            try:
                unlink_path(path)
            except OSError as exc:
                error = _error(ErrorCode.storage_error, f"cannot delete Task WAL: {exc}", path=item.path)
                result.failures.append(CleanupFailure(item=item, error=error))
                continue
            result.deleted.append(item)
            result.freed_bytes += item.size_bytes
            touched.add(path.parent)
        for folder in touched:
            try:
                if not any(folder.iterdir()):
                    folder.rmdir()
            except OSError:
                pass  # a directory that cannot be removed is left in place; no WAL was lost
    result.partial_failure = bool(result.failures)
    return result


def _wanted(include_failed: bool, include_cancelled: bool) -> set[str]:
    wanted = {"completed_task_wal"}
    if include_failed:
        wanted.add("failed_task_wal")
    if include_cancelled:
        wanted.add("cancelled_task_wal")
    return wanted


def _cleanup_shared_wals(
    writer: WalWriter,
    wal_root: Path,
    dry_run: bool,
    wanted: set[str],
    older_than: datetime | None,
    active_wal_paths: Iterable[Path],
) -> CleanupResult:
    """The same selection on a WAL medium shared by processes (the postgres ``task_wal`` table)."""
    result = CleanupResult(dry_run=dry_run)
    cutoff = _as_utc(older_than) if older_than is not None else None
    active = {Path(p).resolve() for p in active_wal_paths}
    for path in writer.list_all_wals(wal_root.resolve()):
        if path in active:
            continue
        try:
            tail = writer.read_tail(path)
        except OSError as exc:
            item = CleanupItem(
                kind="task_wal", id=None, path=str(path), size_bytes=0, reason="task_wal_unavailable"
            )
            error = _error(ErrorCode.task_wal_unavailable, f"cannot read Task WAL: {exc}", path=str(path))
            result.failures.append(CleanupFailure(item=item, error=error))
            continue
        reason = _TERMINAL_WAL.get(tail.event_type or "")
        if reason not in wanted or tail.created_at is None:
            continue
        if cutoff is not None and parse_ts(tail.created_at) >= cutoff:
            continue
        result.candidates.append(
            CleanupItem(
                kind="task_wal",
                id=tail.task_id,
                path=str(path),
                size_bytes=writer.size_bytes(path),
                reason=reason,
            )
        )
    if not dry_run:
        for item in result.candidates:
            try:
                writer.remove(Path(item.path))
            except OSError as exc:
                error = _error(ErrorCode.storage_error, f"cannot delete Task WAL: {exc}", path=item.path)
                result.failures.append(CleanupFailure(item=item, error=error))
                continue
            result.deleted.append(item)
            result.freed_bytes += item.size_bytes
    result.partial_failure = bool(result.failures)
    return result


async def cleanup_task_wals(
    wal_root: Path,
    dry_run: bool = True,
    include_failed: bool = False,
    include_cancelled: bool = False,
    older_than: datetime | None = None,
    active_wal_paths: Iterable[Path] = (),
    writer: WalWriter | None = None,
) -> CleanupResult:
    """Terminal Task WALs under ``<wal_root>/<session_id>/*.wal.jsonl`` (only the last line is read).

    Completed WALs are candidates by default; failed/cancelled ones need the flags; non-terminal and
    ``active_wal_paths`` WALs never are. Unreadable WALs are reported with ``task_wal_unavailable``.
    After real deletion, emptied ``<session_id>`` directories are removed. ``writer``: the WAL medium
    (a shared one, e.g. the postgres table, is cleaned in place; default: the files).
    """
    return await asyncio.to_thread(
        _cleanup_task_wals_sync,
        Path(wal_root),
        dry_run,
        include_failed,
        include_cancelled,
        older_than,
        tuple(active_wal_paths),
        writer,
    )
