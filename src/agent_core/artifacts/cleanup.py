"""Artifact and Task WAL deletion/cleanup (storage.md §11, runtime.md §11.2–§11.4).

Dry runs never delete anything. Deletion failures are returned as structured ``failures`` with
``partial_failure=True`` and are never raised. Every file removal goes through :func:`unlink_path`
(the single low-level seam tests replace to inject ``OSError``). Cleanup never touches memory files,
and ``cleanup_task_wals`` never touches SQLite.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.storage.sqlite import StorageManager
from agent_core.types.base import parse_ts
from agent_core.types.content import ErrorPayload
from agent_core.types.runtime import CleanupFailure, CleanupItem, CleanupResult
from agent_core.types.storage import ArtifactRecord

DEBUG_KINDS: frozenset[str] = frozenset({"provider_raw", "hook_log", "traceback", "context_report", "debug"})
"""Debug/raw artifact kinds: the default cleanup candidates (storage.md §10.4)."""
ORDINARY_KINDS: frozenset[str] = frozenset(
    {"tool_output", "child_output", "compact", "attachment", "context_degradation"}
)
ARTIFACT_KINDS: frozenset[str] = DEBUG_KINDS | ORDINARY_KINDS

WAL_SUFFIX = ".wal.jsonl"
_TERMINAL_WAL = {
    "task_completed": "completed_task_wal",
    "task_failed": "failed_task_wal",
    "task_cancelled": "cancelled_task_wal",
}


def unlink_path(path: Path) -> None:
    """Removes one file. The only low-level file deletion used by cleanup (a test seam)."""
    path.unlink()


def _error(code: ErrorCode, message: str, **details: Any) -> ErrorPayload:
    return ErrorPayload(code=code, message=message, details=details).redacted_copy()


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def artifact_kind(record: ArtifactRecord) -> str | None:
    """``metadata_json.kind`` of an artifact row (``None`` when absent or unreadable)."""
    try:
        meta = json.loads(record.metadata_json) if record.metadata_json else {}
    except ValueError:
        return None
    kind = meta.get("kind") if isinstance(meta, dict) else None
    return kind if isinstance(kind, str) else None


def _artifact_size(record: ArtifactRecord) -> int:
    if record.size_bytes is not None:
        return record.size_bytes
    try:
        return Path(record.path).stat().st_size
    except OSError:
        return 0


def _artifact_item(record: ArtifactRecord, reason: str) -> CleanupItem:
    return CleanupItem(
        kind="artifact",
        id=record.artifact_id,
        path=record.path,
        size_bytes=_artifact_size(record),
        reason=reason,
    )


def remove_artifact_files(record: ArtifactRecord) -> None:
    """Deletes the artifact file and its ``<artifact_id>/`` directory; already-missing files are fine."""
    path = Path(record.path)
    try:
        unlink_path(path)
    except FileNotFoundError:
        pass
    folder = path.parent
    if folder.name != record.artifact_id or not folder.is_dir():
        return
    for leftover in folder.iterdir():  # e.g. a temp file left by an interrupted write
        unlink_path(leftover)
    folder.rmdir()


async def delete_artifact_record(
    storage: StorageManager, record: ArtifactRecord, reason: str
) -> CleanupResult:
    """Deletes one artifact's files, then its registry row; failures are reported, not raised."""
    item = _artifact_item(record, reason)
    result = CleanupResult(dry_run=False, candidates=[item])
    try:
        await asyncio.to_thread(remove_artifact_files, record)
    except OSError as exc:
        error = _error(ErrorCode.storage_error, f"cannot delete artifact file: {exc}", path=record.path)
        result.failures.append(CleanupFailure(item=item, error=error))
        result.partial_failure = True
        return result
    try:
        await storage.delete_artifact_row(record.artifact_id)
    except AgentCoreError as exc:
        result.failures.append(CleanupFailure(item=item, error=exc.to_payload()))
        result.partial_failure = True
        return result
    result.deleted.append(item)
    result.freed_bytes = item.size_bytes
    return result


def _merge(target: CleanupResult, part: CleanupResult) -> None:
    target.deleted.extend(part.deleted)
    target.failures.extend(part.failures)
    target.freed_bytes += part.freed_bytes
    target.partial_failure = target.partial_failure or part.partial_failure


async def cleanup_artifacts(
    storage: StorageManager,
    session_id: str | None = None,
    dry_run: bool = True,
    include_all: bool = False,
    older_than: datetime | None = None,
    max_bytes: int | None = None,
) -> CleanupResult:
    """Selects debug artifacts (all kinds with ``include_all``) created before ``older_than``; with
    ``max_bytes`` the oldest are selected until the remaining eligible total is ≤ ``max_bytes``."""
    if max_bytes is not None and max_bytes < 0:
        raise AgentCoreError(ErrorCode.validation_error, "max_bytes must be >= 0")
    cutoff = _as_utc(older_than) if older_than is not None else None
    eligible: list[tuple[ArtifactRecord, str]] = []
    for record in await storage.list_artifacts(session_id=session_id):  # oldest first
        is_debug = artifact_kind(record) in DEBUG_KINDS
        if not is_debug and not include_all:
            continue
        if cutoff is not None and parse_ts(record.created_at) >= cutoff:
            continue
        eligible.append((record, "debug_artifact" if is_debug else "include_all"))
    selected = eligible
    if max_bytes is not None:
        remaining = sum(_artifact_size(r) for r, _ in eligible)
        selected = []
        for record, reason in eligible:
            if remaining <= max_bytes:
                break
            selected.append((record, reason))
            remaining -= _artifact_size(record)
    result = CleanupResult(dry_run=dry_run, candidates=[_artifact_item(r, why) for r, why in selected])
    if dry_run:
        return result
    for record, reason in selected:
        _merge(result, await delete_artifact_record(storage, record, reason))
    return result


# ---- Task WALs --------------------------------------------------------------------------------------


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
) -> CleanupResult:
    result = CleanupResult(dry_run=dry_run)
    if not wal_root.is_dir():
        return result
    cutoff = _as_utc(older_than) if older_than is not None else None
    active = {Path(p).resolve() for p in active_wal_paths}
    wanted = {"completed_task_wal"}
    if include_failed:
        wanted.add("failed_task_wal")
    if include_cancelled:
        wanted.add("cancelled_task_wal")
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


async def cleanup_task_wals(
    wal_root: Path,
    dry_run: bool = True,
    include_failed: bool = False,
    include_cancelled: bool = False,
    older_than: datetime | None = None,
    active_wal_paths: Iterable[Path] = (),
) -> CleanupResult:
    """Terminal Task WALs under ``<wal_root>/<session_id>/*.wal.jsonl`` (only the last line is read).

    Completed WALs are candidates by default; failed/cancelled ones need the flags; non-terminal and
    ``active_wal_paths`` WALs never are. Unreadable WALs are reported with ``task_wal_unavailable``.
    After real deletion, emptied ``<session_id>`` directories are removed.
    """
    return await asyncio.to_thread(
        _cleanup_task_wals_sync,
        Path(wal_root),
        dry_run,
        include_failed,
        include_cancelled,
        older_than,
        tuple(active_wal_paths),
    )
