"""``AgentRuntime.list_task_wals`` / ``export_task_wal``: a session's Task WALs and their JSONL form, on the
runtime's storage backend (JSONL files, or the PostgreSQL table's byte-identical lines)."""

from __future__ import annotations

from pathlib import Path

from agent_core._runtime.runs import RunManager
from agent_core._tasks.wal import WalWriter
from agent_core._tasks.wal_export import WalSummary, export_wal, session_wals
from agent_core.types._results import TaskWalSummary


def _writer_and_root(manager: RunManager) -> tuple[WalWriter, Path]:
    writer = manager.services.storage.task_wal_writer() or WalWriter()
    return writer, Path(manager.services.settings.task.wal_dir).resolve()


def _summary(wal: WalSummary) -> TaskWalSummary:
    return TaskWalSummary(
        name=wal.name, path=str(wal.path), task_id=wal.task_id, last_event_type=wal.last_event_type
    )


async def list_wals(manager: RunManager, session_id: str) -> list[TaskWalSummary]:
    writer, root = _writer_and_root(manager)
    wals = await writer.offload(lambda: session_wals(writer, root, session_id))
    return [_summary(w) for w in wals]


async def export(manager: RunManager, session_id: str, name: str | None) -> tuple[TaskWalSummary, bytes]:
    writer, root = _writer_and_root(manager)
    wal, data = await writer.offload(lambda: export_wal(writer, root, session_id, name))
    return _summary(wal), data
