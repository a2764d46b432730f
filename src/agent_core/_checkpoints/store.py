"""One session's checkpoint files: a content-addressed object store, the journal and the stat cache.

Layout under ``${SOONG_AGENT_HOME}/sessions/<session_id>/checkpoints/`` (directories 0700, files 0600):

* ``objects/<aa>/<sha256>`` — file contents, zlib-compressed, named by the SHA-256 of the raw content;
  written once (temp file + rename) and never changed, so concurrent writers of one content agree;
* ``journal.jsonl`` — one :class:`~agent_core._checkpoints.model.CheckpointRecord` or ``RewindRecord`` per
  line, appended (``O_APPEND``) and fsynced when a checkpoint closes; a torn last line (a crash while
  writing) is ignored when read;
* ``stat_cache.json`` — what the last walk saw of each path (size, times, inode, mode, content hash), so a
  walk re-reads only files whose ``stat`` changed.

``max_store_bytes`` bounds the stored (compressed) bytes: beyond it :meth:`CheckpointStore.put` stores
nothing and returns ``None`` (the state is recorded without content, ``note = "store_full"``).
Everything here is synchronous (callers run it in a thread).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import zlib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_core._checkpoints.model import CheckpointRecord, RewindRecord
from agent_core._private_fs import FILE_MODE, make_private_dirs

log = logging.getLogger(__name__)

JournalRecord = CheckpointRecord | RewindRecord
StatSig = tuple[int, int, int, int, int]
"""``(size, mtime_ns, ctime_ns, inode, mode)`` of a regular file."""


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_private(path: Path, data: bytes) -> None:
    """Writes ``path`` atomically (temp file + rename in its directory), mode 0600."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class CheckpointStore:
    """The checkpoint files of one session (see the module docstring)."""

    def __init__(self, directory: Path, *, max_store_bytes: int) -> None:
        self.directory = directory
        self.objects = directory / "objects"
        self.journal = directory / "journal.jsonl"
        self.stat_cache_path = directory / "stat_cache.json"
        self._max_bytes = max_store_bytes
        self._bytes: int | None = None
        self._present: set[str] = set()
        """Objects known to exist (an object is never removed while its session exists)."""

    # ---- objects --------------------------------------------------------------------------------

    def _object(self, sha: str) -> Path:
        return self.objects / sha[:2] / sha

    def has(self, sha: str) -> bool:
        if sha in self._present:
            return True
        if os.path.isfile(os.path.join(self.objects, sha[:2], sha)):
            self._present.add(sha)
            return True
        return False

    def stored_bytes(self) -> int:
        """Compressed bytes in the object store (counted once, then kept up to date)."""
        if self._bytes is None:
            total = 0
            if self.objects.is_dir():
                for sub in os.scandir(self.objects):
                    if sub.is_dir(follow_symlinks=False):
                        for entry in os.scandir(sub.path):
                            with contextlib.suppress(OSError):
                                total += entry.stat(follow_symlinks=False).st_size
            self._bytes = total
        return self._bytes

    def put(self, data: bytes, sha: str | None = None) -> str | None:
        """Stores ``data``; its SHA-256, or ``None`` when the store is full."""
        sha = sha or digest(data)
        if self.has(sha):
            return sha
        path = self._object(sha)
        packed = zlib.compress(data, 1)
        if self.stored_bytes() + len(packed) > self._max_bytes:
            return None
        make_private_dirs(path.parent)
        _write_private(path, packed)
        self._bytes = self.stored_bytes() + len(packed)
        self._present.add(sha)
        return sha

    def get(self, sha: str) -> bytes:
        """The content stored as ``sha`` (``OSError`` when missing, ``ValueError`` when damaged)."""
        data = zlib.decompress(self._object(sha).read_bytes())
        if digest(data) != sha:
            raise ValueError(f"checkpoint object {sha} is damaged")
        return data

    # ---- journal --------------------------------------------------------------------------------

    def append(self, record: JournalRecord) -> None:
        make_private_dirs(self.directory)
        line = (record.model_dump_json() + "\n").encode("utf-8")
        fd = os.open(
            self.journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE
        )
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self) -> list[JournalRecord]:
        """The journal's records in order (unreadable lines, e.g. a torn last one, are skipped)."""
        try:
            raw = self.journal.read_bytes()
        except FileNotFoundError:
            return []
        out: list[JournalRecord] = []
        for line in raw.splitlines():
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                kind = data.get("type") if isinstance(data, dict) else None
                out.append(
                    RewindRecord.model_validate(data)
                    if kind == "rewind"
                    else CheckpointRecord.model_validate(data)
                )
            except (ValueError, ValidationError):
                log.warning("skipping an unreadable line of %s", self.journal)
        return out

    # ---- stat cache -----------------------------------------------------------------------------

    def load_stat_cache(self) -> dict[str, tuple[StatSig, str | None]]:
        """``path -> (stat signature, content hash or None)`` of the last walk (empty when absent)."""
        try:
            data: Any = json.loads(self.stat_cache_path.read_bytes())
        except (OSError, ValueError):
            return {}
        out: dict[str, tuple[StatSig, str | None]] = {}
        if isinstance(data, dict):
            for path, value in data.items():
                if (
                    isinstance(value, list)
                    and len(value) == 2
                    and isinstance(value[0], list)
                    and len(value[0]) == 5
                ):
                    sig = tuple(int(v) for v in value[0])
                    out[path] = (sig, value[1] if isinstance(value[1], str) else None)  # type: ignore[assignment]
        return out

    def save_stat_cache(self, cache: dict[str, tuple[StatSig, str | None]]) -> None:
        make_private_dirs(self.directory)
        data = {path: [list(sig), sha] for path, (sig, sha) in cache.items()}
        _write_private(self.stat_cache_path, json.dumps(data, separators=(",", ":")).encode("utf-8"))
