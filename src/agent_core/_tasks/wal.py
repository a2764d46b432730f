"""Task WAL files: naming, the single writer, tail/first-line reads and replay (docs/task-board.md#storage).

Writes are synchronous on purpose: one commit's lines are written with one ``os.write`` loop, flushed and
``fsync``ed while holding the writer lock, so no ``await`` can separate the append from the in-memory
apply that follows it (a cancelled tool call can never leave the WAL ahead of memory). A failed append is
truncated back to the pre-append length; if that also fails the caller marks the Task unavailable.
"""

from __future__ import annotations

import io
import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from agent_core._tasks.dag import IllegalTransition, TaskDag
from agent_core._tasks.models import (
    CORE_ACTOR,
    TERMINAL_EVENT_STATUS,
    TaskWalEvent,
    unchecked_actor_validator,
    wal_event_adapter,
)
from agent_core._tasks.wal_files import WAL_SUFFIX
from agent_core._tasks.wal_files import list_wal_files as list_wal_files
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InvalidArgumentError,
    StorageError,
)
from agent_core.types.enums import TaskStatus

T = TypeVar("T")

MAX_WAL_NAME = 64
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def normalize_wal_name(candidate: str) -> str:
    """Validates a model-chosen WAL base name (docs/task-board.md#wal-names) and returns the file name.

    A trailing ``.wal.jsonl`` is stripped first; the rest must be 1–64 characters of ``a-z0-9-_`` (so no
    ``/``, ``..``, leading ``.``, absolute path or other ``.``). Violations raise ``validation_error``.
    """
    name = candidate[: -len(WAL_SUFFIX)] if candidate.endswith(WAL_SUFFIX) else candidate
    if not name or len(name) > MAX_WAL_NAME or not set(name) <= _NAME_CHARS:
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"invalid wal_name {candidate!r}: use 1-{MAX_WAL_NAME} characters of a-z, 0-9, '-', '_' "
            f"(an optional {WAL_SUFFIX} suffix is stripped)",
        )
    return name + WAL_SUFFIX


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------


def write_and_sync(fd: int, data: bytes, fsync: bool) -> None:
    """Low-level write of one commit (all bytes), then ``fsync``; the seam tests use to inject errors."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    if fsync:
        os.fsync(fd)


class WalAppendError(StorageError):
    """An append failed; ``unavailable`` is true when the file could not be restored either."""

    def __init__(self, message: str, *, unavailable: bool, cause: BaseException | None = None) -> None:
        super().__init__(ErrorCode.storage_error, message, cause=cause, details={"phase": "append"})
        self.unavailable = unavailable


class WalWriter:
    """Where a project's Task WALs live and their single writer: JSONL files (the ``sqlite`` backend's
    format; one lock, whole-commit writes, fsync per commit).

    A WAL is named by its path (``<wal_dir>/<session_id>/<name>.wal.jsonl``, the ``wal_path`` of events);
    the ``postgres`` backend keeps the same records under the same names in a table
    (``storage/postgres/task_wal.py`` overrides every method). All methods are synchronous by design;
    async callers run them through :meth:`offload`.
    """

    SHARED = False
    """True when other processes may append to the same WALs (then :meth:`records_after` reads)."""

    def __init__(self, *, fsync: bool = True) -> None:
        self._lock = threading.Lock()
        self._fsync = fsync

    def create(self, path: Path, records: list[TaskWalEvent]) -> None:
        """Creates ``path`` exclusively with the first commit; ``path_conflict`` if it exists."""
        data = b"".join(r.to_line() for r in records)
        with self._lock:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            except FileExistsError as exc:
                raise FileOperationError(
                    ErrorCode.path_conflict, f"a Task WAL named {path.name} already exists", cause=exc
                ) from exc
            except OSError as exc:
                raise WalAppendError(
                    f"cannot create {path.name}: {exc}", unavailable=False, cause=exc
                ) from exc
            try:
                write_and_sync(fd, data, self._fsync)
            except OSError as exc:
                os.close(fd)
                try:
                    path.unlink()
                except OSError:
                    pass
                raise WalAppendError(
                    f"cannot write {path.name}: {exc}", unavailable=False, cause=exc
                ) from exc
            os.close(fd)

    def append(self, path: Path, records: list[TaskWalEvent]) -> None:
        """Appends one commit; on failure truncates back and raises :class:`WalAppendError`."""
        data = b"".join(r.to_line() for r in records)
        with self._lock:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            except OSError as exc:
                raise WalAppendError(f"cannot open {path.name}: {exc}", unavailable=False, cause=exc) from exc
            try:
                size = os.fstat(fd).st_size
                try:
                    write_and_sync(fd, data, self._fsync)
                except OSError as exc:
                    try:
                        os.ftruncate(fd, size)
                        restored = True
                    except OSError:
                        restored = False
                    raise WalAppendError(
                        f"cannot append to {path.name}: {exc}", unavailable=not restored, cause=exc
                    ) from exc
            finally:
                os.close(fd)

    # ---- reads (the file implementations below; other media override them) ----------------------

    def list_wal_files(self, session_dir: Path) -> list[Path]:
        return list_wal_files(session_dir)

    def exists(self, path: Path) -> bool:
        return path.exists()

    def list_all_wals(self, wal_root: Path) -> list[Path]:
        """Every WAL under ``<wal_root>/<session_id>/``, sorted."""
        return sorted(wal_root.glob(f"*/*{WAL_SUFFIX}")) if wal_root.is_dir() else []

    def size_bytes(self, path: Path) -> int:
        """The WAL's size in its JSONL form (0 when unreadable)."""
        try:
            return path.stat().st_size
        except OSError:
            return 0

    def mtime_ns(self, path: Path) -> int:
        """Last-change time (``OSError`` when unreadable)."""
        return path.stat().st_mtime_ns

    def remove(self, path: Path) -> None:
        path.unlink()

    def uncommitted_create(self, path: Path) -> bool:
        return uncommitted_create(path)

    def read_tail(self, path: Path) -> WalTail:
        return read_tail(path)

    def read_first_task_id(self, path: Path) -> str | None:
        return read_first_task_id(path)

    def read_timeline(self, path: Path) -> list[dict[str, Any]]:
        return read_timeline(path)

    def replay(self, path: Path, *, session_id: str, repair: bool, recent: int = 64) -> ReplayOutcome:
        return replay_wal(path, session_id=session_id, repair=repair, recent=recent)

    def records_after(self, path: Path, wal_seq: int) -> list[TaskWalEvent]:
        """Records with ``wal_seq`` above ``wal_seq`` written by other processes (files: none, one writer)."""
        return []

    def export_jsonl(self, path: Path) -> bytes:
        """The WAL in its JSONL file form (``OSError`` when it cannot be read)."""
        return path.read_bytes()

    async def offload(self, fn: Callable[[], T]) -> T:
        """Runs ``fn`` (synchronous calls on this writer) where it does not block the event loop: files
        run it right here (local appends are as fast as a thread hop); a writer on a database server
        runs it on its connection thread."""
        return fn()


# --------------------------------------------------------------------------------------------------
# Cheap reads
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class WalTail:
    """What the last complete line says (terminal detection reads only this line,
    docs/task-board.md#restore-and-replay)."""

    event_type: str | None
    created_at: str | None
    task_id: str | None

    @property
    def terminal_status(self) -> TaskStatus | None:
        return TERMINAL_EVENT_STATUS.get(self.event_type or "")


def read_tail(path: Path) -> WalTail:
    """Parses only the last complete (newline-terminated) line of ``path``."""
    with path.open("rb") as fh:
        fh.seek(0, os.SEEK_END)
        pos = fh.tell()
        buf = b""
        while pos > 0:
            step = min(8192, pos)
            pos -= step
            fh.seek(pos)
            buf = fh.read(step) + buf
            end = buf.rfind(b"\n")
            if end != -1 and (buf.rfind(b"\n", 0, end) != -1 or pos == 0):
                break
    end = buf.rfind(b"\n")
    if end == -1:
        return WalTail(event_type=None, created_at=None, task_id=None)
    line = buf[buf.rfind(b"\n", 0, end) + 1 : end]
    try:
        data = json.loads(line)
    except ValueError:
        return WalTail(event_type=None, created_at=None, task_id=None)
    if not isinstance(data, dict):
        return WalTail(event_type=None, created_at=None, task_id=None)
    return WalTail(
        event_type=_str_or_none(data.get("event_type")),
        created_at=_str_or_none(data.get("created_at")),
        task_id=_str_or_none(data.get("task_id")),
    )


def uncommitted_create(path: Path) -> bool:
    """True when ``path`` holds no complete record: a create cut before its first commit was written whole.

    :meth:`WalWriter.create` opens the file exclusively and then writes the first commit, so a process
    killed in between leaves an empty file or one unterminated line that is not valid JSON. Nothing in it
    was ever committed (the tool call never returned), so the file is not a Task and never was.
    """
    try:
        data = path.read_bytes()
    except OSError:
        return False
    if b"\n" in data:
        return False
    if not data:
        return True
    try:
        json.loads(data)
    except ValueError:
        return True
    return False


def read_first_task_id(path: Path) -> str | None:
    """``task_id`` of the first line (the ``task_created`` record), or ``None`` if unreadable."""
    try:
        with path.open("rb") as fh:
            line = fh.readline()
        data = json.loads(line)
    except (OSError, ValueError):
        return None
    return _str_or_none(data.get("task_id")) if isinstance(data, dict) else None


def read_timeline(path: Path) -> list[dict[str, Any]]:
    """The WAL's parseable lines as dicts (the Task timeline for inspect); stops at the first bad line."""
    out: list[dict[str, Any]] = []
    try:
        raw = path.read_bytes()
    except OSError:
        return out
    for line in raw.split(b"\n"):
        if not line:
            continue
        try:
            data = json.loads(line)
        except ValueError:
            break
        if not isinstance(data, dict):
            break
        out.append(data)
    return out


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


# --------------------------------------------------------------------------------------------------
# Replay
# --------------------------------------------------------------------------------------------------


class WalReplayError(StorageError):
    """A WAL that cannot be replayed; the Task becomes unavailable (``task_wal_unavailable``)."""

    def __init__(self, path: Path, message: str, *, task_id: str | None, line: int | None = None) -> None:
        details: dict[str, Any] = {"wal_path": str(path), "phase": "replay"}
        if task_id is not None:
            details["task_id"] = task_id
        if line is not None:
            details["line"] = line
        super().__init__(ErrorCode.task_wal_unavailable, f"{path.name}: {message}", details=details)
        self.task_id = task_id


@dataclass(kw_only=True, slots=True)
class ReplayOutcome:
    dag: TaskDag
    records: int
    torn_tail_truncated: bool
    recent: list[TaskWalEvent] = field(default_factory=list)
    """The last records (newest last), for the board's recent-changes buffer."""


def replay_wal(path: Path, *, session_id: str, repair: bool, recent: int = 64) -> ReplayOutcome:
    """Rebuilds a Task DAG from ``path`` using only the WAL records (docs/task-board.md#restore-and-replay).

    A final unterminated line that is not valid JSON is a torn write: with ``repair`` it is truncated
    (``torn_tail_truncated``), otherwise ignored. A final unterminated line that *is* a valid record is
    kept (``repair`` adds its newline). Anything else that fails the schema or the transition rules raises
    :class:`WalReplayError`.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WalReplayError(path, f"cannot read: {exc}", task_id=None) from exc
    outcome, tail, torn, add_newline = replay_bytes(data, path, session_id=session_id, recent=recent)
    if repair and (torn or add_newline):
        try:
            if torn:
                os.truncate(path, len(data) - len(tail))
            else:
                with path.open("ab") as fh:
                    fh.write(b"\n")
        except OSError as exc:
            raise WalReplayError(
                path, f"cannot repair the final line: {exc}", task_id=outcome.dag.task_id
            ) from exc
    outcome.torn_tail_truncated = torn and repair
    return outcome


def replay_bytes(
    data: bytes, path: Path, *, session_id: str, recent: int = 64
) -> tuple[ReplayOutcome, bytes, bool, bool]:
    """Replays WAL ``data`` (named ``path``): the outcome, the unterminated tail, whether that tail is
    torn (not JSON) and whether it is a whole record lacking its newline. Bad records → ``WalReplayError``.
    """
    end = data.rfind(b"\n") + 1  # what follows the last newline is the unterminated tail
    tail = data[end:]
    torn = False
    add_newline = False
    if tail:
        try:
            json.loads(tail)
        except ValueError:
            torn = True
        else:
            add_newline = True
    if not end and not add_newline:
        raise WalReplayError(path, "no complete record (expected task_created)", task_id=None)
    # lines one at a time (each freed once applied): memchr per line, no list of 100k copies
    lines = io.BytesIO(memoryview(data)[:end] if torn else data)
    outcome = _replay_valid_lines(lines, path, session_id, recent)
    if outcome is None:  # some line is bad: the checked loop names it exactly
        exact = data.split(b"\n")
        del exact[-1]
        if add_newline:
            exact.append(tail)
        outcome = _replay_lines(exact, path, session_id, recent)
    return outcome, tail, torn, add_newline


def _replay_valid_lines(
    lines: Iterator[bytes], path: Path, session_id: str, recent: int
) -> ReplayOutcome | None:
    """The fast path of a WAL whose every line is good: the outcome, or ``None`` at the first bad line.

    ``lines`` keep their ``\\n`` (JSON whitespace). Records are validated without the per-record Python
    actor rule, which is checked here instead; the state and records equal :func:`_replay_lines`'s.
    """
    validate_line = unchecked_actor_validator().validate_json
    last: deque[TaskWalEvent] = deque(maxlen=max(recent, 1))
    append = last.append
    core = CORE_ACTOR
    count = 1
    try:
        event = validate_line(next(lines))
        if ((event.actor_run_id is None) != (event.actor_agent_id == core)) or event.session_id != session_id:
            return None
        dag = TaskDag.from_created(event, wal_path=str(path))
        append(event)
        apply = dag.apply_fields
        for count, line in enumerate(lines, start=2):  # noqa: B007 (the count is used after the loop)
            event = validate_line(line)
            rec = event.__dict__  # one read through pydantic's __getattr__ hook, not one per field
            if (rec["actor_run_id"] is None) != (rec["actor_agent_id"] == core):
                return None
            apply(event, rec)
            append(event)
    except (ValidationError, AgentCoreError, ValueError):
        return None
    return ReplayOutcome(dag=dag, records=count, torn_tail_truncated=False, recent=list(last))


def _replay_lines(lines: list[bytes], path: Path, session_id: str, recent: int) -> ReplayOutcome:
    """Validates and applies complete ``lines`` in order (``WalReplayError`` on the first bad one)."""
    dag: TaskDag | None = None
    last: deque[TaskWalEvent] = deque(maxlen=max(recent, 1))
    validate_line = wal_event_adapter.validator.validate_json  # the hot path: no wrapper per line
    append = last.append
    apply = None  # dag.apply once the first record built the DAG
    for number, line in enumerate(lines, start=1):
        try:
            event = validate_line(line)
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
            where = "/".join(str(p) for p in first["loc"])
            raise WalReplayError(
                path,
                f"line {number} is invalid: {where}: {first['msg']}",
                task_id=dag.task_id if dag is not None else None,
                line=number,
            ) from exc
        try:
            if apply is not None:
                apply(event)
            else:
                if event.session_id != session_id:
                    raise IllegalTransition(message="record session_id differs from the directory session")
                dag = TaskDag.from_created(event, wal_path=str(path))
                apply = dag.apply
        except (AgentCoreError, ValueError) as exc:
            message = exc.message if isinstance(exc, AgentCoreError) else str(exc)
            raise WalReplayError(
                path,
                f"line {number}: {message}",
                task_id=dag.task_id if dag is not None else event.task_id,
                line=number,
            ) from exc
        append(event)
    assert dag is not None
    return ReplayOutcome(dag=dag, records=len(lines), torn_tail_truncated=False, recent=list(last))
