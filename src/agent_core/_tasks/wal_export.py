"""Finding and exporting a session's Task WALs in their JSONL file form (docs/scale-out.md: "the JSONL file
remains the sqlite backend's format and can be exported from either").

Works on any :class:`WalWriter`: JSONL files (the bytes of the file) or the postgres table (the stored
lines, byte-identical to the file the sqlite backend writes for the same records).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agent_core._ids import validate_session_id
from agent_core._tasks.wal import WalWriter
from agent_core._tasks.wal_files import WAL_SUFFIX
from agent_core.errors import ErrorCode, StorageError, error_for


@dataclass(frozen=True, slots=True)
class WalSummary:
    """One WAL of a session: its name (``<name>.wal.jsonl``), path, first Task id and last record type."""

    name: str
    path: Path
    task_id: str | None
    last_event_type: str | None


def session_wals(writer: WalWriter, wal_root: Path, session_id: str) -> list[WalSummary]:
    """The session's WALs, by name (``validation_error`` for a malformed session id)."""
    session_dir = wal_root / validate_session_id(session_id)
    try:
        paths = writer.list_wal_files(session_dir)
        return [
            WalSummary(
                name=p.name,
                path=p,
                task_id=writer.read_first_task_id(p),
                last_event_type=writer.read_tail(p).event_type,
            )
            for p in paths
        ]
    except OSError as exc:
        raise StorageError(
            ErrorCode.storage_error, f"cannot list the Task WALs of {session_id}: {exc}"
        ) from exc


def export_wal(
    writer: WalWriter, wal_root: Path, session_id: str, name: str | None
) -> tuple[WalSummary, bytes]:
    """The JSONL bytes of one WAL of ``session_id``: ``name`` (with or without ``.wal.jsonl``, or a Task
    id), or the session's only WAL. ``task_not_found`` when there is no such WAL (the names that exist are
    in ``details["wals"]``); ``validation_error`` when no name is given and the session has several."""
    wals = session_wals(writer, wal_root, session_id)
    names = [w.name for w in wals]
    if name is None:
        if len(wals) != 1:
            raise error_for(
                ErrorCode.task_not_found if not wals else ErrorCode.validation_error,
                f"session {session_id} has no Task WAL"
                if not wals
                else f"session {session_id} has {len(wals)} Task WALs; name one: {', '.join(names)}",
                details={"session_id": session_id, "wals": names},
            )
        chosen = wals[0]
    else:
        wanted = name if name.endswith(WAL_SUFFIX) else name + WAL_SUFFIX
        matches = [w for w in wals if w.name == wanted] or [w for w in wals if w.task_id == name]
        if len(matches) != 1:
            raise error_for(
                ErrorCode.task_not_found if not matches else ErrorCode.validation_error,
                f"no Task WAL {name!r} in session {session_id} (its WALs: {', '.join(names) or 'none'})"
                if not matches
                else f"several Task WALs of Task {name!r} in session {session_id}: "
                + ", ".join(w.name for w in matches),
                details={"session_id": session_id, "wals": names},
            )
        chosen = matches[0]
    try:
        return chosen, writer.export_jsonl(chosen.path)
    except OSError as exc:
        raise StorageError(ErrorCode.storage_error, f"cannot read {chosen.name}: {exc}") from exc
