"""Artifact deletion/cleanup (docs/storage.md#deleting-and-cleaning-up); Task WALs:
:mod:`agent_core._tasks.wal_cleanup`.

Dry runs never delete anything. Deletion failures are returned as structured ``failures`` with
``partial_failure=True`` and are never raised. Every artifact file removal goes through :func:`unlink_path`
(the low-level seam tests replace to inject ``OSError``). Cleanup never touches memory files.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core._storage.protocol import SessionStore
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError
from agent_core.types.base import parse_ts
from agent_core.types.content import ErrorPayload
from agent_core.types.storage import ArtifactRecord

if TYPE_CHECKING:
    from agent_core.types._results import CleanupItem, CleanupResult

DEBUG_KINDS: frozenset[str] = frozenset({"provider_raw", "hook_log", "traceback", "context_report", "debug"})
"""Debug/raw artifact kinds: the default cleanup candidates (docs/storage.md#artifacts)."""
ORDINARY_KINDS: frozenset[str] = frozenset(
    {"tool_output", "child_output", "compact", "attachment", "context_degradation"}
)
ARTIFACT_KINDS: frozenset[str] = DEBUG_KINDS | ORDINARY_KINDS


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
    from agent_core.types._results import CleanupItem  # imported on first use (cold start)

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


async def delete_artifact_record(storage: SessionStore, record: ArtifactRecord, reason: str) -> CleanupResult:
    """Deletes one artifact's files, then its registry row; failures are reported, not raised."""
    from agent_core.types._results import CleanupFailure, CleanupResult

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
    storage: SessionStore,
    session_id: str | None = None,
    dry_run: bool = True,
    include_all: bool = False,
    older_than: datetime | None = None,
    max_bytes: int | None = None,
) -> CleanupResult:
    """Selects debug artifacts (all kinds with ``include_all``) created before ``older_than``; with
    ``max_bytes`` the oldest are selected until the remaining eligible total is ≤ ``max_bytes``."""
    from agent_core.types._results import CleanupResult  # imported on first use (cold start)

    if max_bytes is not None and max_bytes < 0:
        raise InvalidArgumentError(ErrorCode.validation_error, "max_bytes must be >= 0")
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
