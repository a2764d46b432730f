"""Maintenance of stored data: session deletion and the cleanup of Task WALs, task worktrees and artifacts
(docs/storage.md#deleting-and-cleaning-up). Imported on first use: not needed to run agents."""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

from agent_core._api._args import check_type
from agent_core._artifacts.cleanup import cleanup_artifacts as _cleanup_artifacts
from agent_core._ids import validate_session_id
from agent_core._runtime.runs import RunManager
from agent_core._tasks.wal_cleanup import cleanup_task_wals
from agent_core.config.loader import resolve_project
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    SessionBusyError,
    SessionNotFoundError,
    StorageError,
)
from agent_core.types._results import CleanupResult, DeleteFailure, DeleteSessionResult


async def delete_session(manager: RunManager, session_id: str) -> DeleteSessionResult:
    try:
        validate_session_id(session_id)
    except AgentCoreError as exc:
        return DeleteSessionResult(session_id=str(session_id), deleted=False, error=exc.to_payload())
    storage = manager.services.storage
    record = await storage.get_session(session_id)
    if record is None:
        error = SessionNotFoundError(
            ErrorCode.validation_error, f"unknown session {session_id!r}", details={"session_id": session_id}
        ).to_payload()
        return DeleteSessionResult(session_id=session_id, deleted=False, error=error)
    live = manager.sessions.get(session_id)
    if live is not None and (live.busy or any(not r.terminal for r in live.live_runs.values())):
        error = SessionBusyError(
            ErrorCode.session_active, f"session {session_id!r} has a queued, pending or running run"
        ).to_payload()
        return DeleteSessionResult(session_id=session_id, deleted=False, error=error)
    counts = await storage.delete_session_rows(session_id)
    manager.sessions.pop(session_id, None)
    manager.services.gate.forget_session(session_id)
    manager.services.checkpoints.forget(session_id)
    failures: list[DeleteFailure] = []
    directory = manager.services.config.home / "sessions" / session_id
    if directory.exists():
        try:
            shutil.rmtree(directory)
        except OSError as exc:
            failures.append(
                DeleteFailure(
                    target=str(directory),
                    error=StorageError(
                        ErrorCode.storage_error, f"could not remove {directory}: {exc}"
                    ).to_payload(),
                )
            )
    return DeleteSessionResult(session_id=session_id, deleted=True, counts=counts, failures=failures)


async def cleanup_project_tasks(
    manager: RunManager,
    project: str | Path,
    dry_run: bool,
    include_failed: bool,
    include_cancelled: bool,
    older_than: datetime | None,
) -> CleanupResult:
    check_type("project", project, (str, Path))
    check_type("older_than", older_than, datetime, optional=True)
    resolved = resolve_project(project)
    config = manager.services.config
    wal_root = config.settings.task.wal_dir
    if resolved != config.project:
        wal_root = resolved / ".soong-agent" / "tasks"
    tasks = manager.features.tasks
    active_paths: set[Path] = set(tasks.active_wal_paths()) if tasks is not None else set()
    result = await cleanup_task_wals(
        wal_root,
        dry_run=dry_run,
        include_failed=include_failed,
        include_cancelled=include_cancelled,
        older_than=older_than,
        active_wal_paths=active_paths,
        writer=manager.services.storage.task_wal_writer(),
    )
    from agent_core._orchestrator.worktrees import cleanup_task_worktrees

    return await cleanup_task_worktrees(resolved, result)


async def cleanup_artifacts(
    manager: RunManager,
    session_id: str | None,
    dry_run: bool,
    include_all: bool,
    older_than: datetime | None,
    max_bytes: int | None,
) -> CleanupResult:
    if session_id is not None:
        validate_session_id(session_id)
    check_type("older_than", older_than, datetime, optional=True)
    check_type("max_bytes", max_bytes, int, optional=True)
    return await _cleanup_artifacts(
        manager.services.storage,
        session_id=session_id,
        dry_run=dry_run,
        include_all=include_all,
        older_than=older_than,
        max_bytes=max_bytes,
    )


__all__ = ["cleanup_artifacts", "cleanup_project_tasks", "delete_session"]
