"""The artifact store (docs/storage.md#artifacts): files under
``${SOONG_AGENT_HOME}/sessions/<session_id>/artifacts/<artifact_id>/<filename>`` plus the ``artifacts``
registry rows.

Contracts:

- The file is written atomically (temp file in the artifact directory, then rename) BEFORE the
  registry row is inserted through the writer queue; if the insert fails the file is removed again.
- Text (``str``, and ``bytes`` that decode as UTF-8 without NUL) and JSON-serialisable objects are
  secret-redacted before writing (``metadata.redacted=true``); other bytes are binary and stored as-is
  (``metadata.redacted=false``). Summaries and metadata are redacted too.
- ``artifacts.path`` is the absolute resolved path; ``filename`` is sanitised to ``[A-Za-z0-9._-]``
  (max 128 chars) and never used as an identifier.
"""

from __future__ import annotations

import asyncio
import mimetypes
import os
import re
import secrets as _secrets
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_core._artifacts.cleanup import ARTIFACT_KINDS, delete_artifact_record, unlink_path
from agent_core._ids import new_id, validate_id, validate_session_id
from agent_core._private_fs import make_private_dirs, open_private_new
from agent_core._redaction import Redactor, redact_with
from agent_core._storage.protocol import SessionStore
from agent_core._storage.rows import json_text, jsonable
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InvalidArgumentError,
    StorageError,
)
from agent_core.types.base import format_ts
from agent_core.types.content import ArtifactRefBlock, ErrorPayload
from agent_core.types.mappers import artifact_from_record
from agent_core.types.runtime import ArtifactRef
from agent_core.types.storage import ArtifactRecord

if TYPE_CHECKING:
    from agent_core.types._results import CleanupResult, DeleteFailure

MAX_FILENAME = 128
_UNSAFE_FILENAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def sanitize_filename(name: str | None, default: str = "output.txt") -> str:
    """Basename of ``name`` restricted to ``[A-Za-z0-9._-]`` (others → ``_``), at most 128 chars,
    never hidden, ``.`` or ``..``; empty → ``default``."""
    base = re.split(r"[\\/]", name or "")[-1]
    cleaned = _UNSAFE_FILENAME_CHARS.sub("_", base)
    if cleaned.startswith("."):
        cleaned = "_" + cleaned[1:]
    if not cleaned.strip("._"):
        cleaned = default
    if len(cleaned) > MAX_FILENAME:
        stem, dot, ext = cleaned.rpartition(".")
        cleaned = (
            stem[: MAX_FILENAME - len(ext) - 1] + dot + ext
            if dot and stem and len(ext) < 16
            else cleaned[:MAX_FILENAME]
        )
    return cleaned


def _write_atomic(folder: Path, filename: str, payload: bytes) -> Path:
    make_private_dirs(folder)
    final = folder / filename
    temp = folder / f".{filename}.tmp-{_secrets.token_hex(4)}"
    try:
        with os.fdopen(open_private_new(temp), "wb") as fh:
            fh.write(payload)
        os.replace(temp, final)
    except BaseException:
        _remove_quietly(temp)
        raise
    return final


def _remove_quietly(path: Path) -> None:
    try:
        unlink_path(path)
    except OSError:
        pass


def _discard_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


class ArtifactManager:
    """Creates, registers, reads and deletes artifacts of one ``${SOONG_AGENT_HOME}``."""

    def __init__(self, home: Path, storage: SessionStore, redactor: Redactor) -> None:
        self._home = Path(home).expanduser().resolve()
        self._storage = storage
        self._redactor = redactor

    @property
    def redactor(self) -> Redactor:
        return self._redactor

    def session_dir(self, session_id: str) -> Path:
        """``${SOONG_AGENT_HOME}/sessions/<session_id>`` (the id is validated first)."""
        return self._home / "sessions" / validate_session_id(session_id)

    def artifact_dir(self, session_id: str, artifact_id: str) -> Path:
        return self.session_dir(session_id) / "artifacts" / validate_id(artifact_id, "artifact_")

    def _encode(self, data: Any) -> tuple[bytes, bool, str]:
        """``(bytes to write, redacted, fallback mime type)``."""
        secrets = self._redactor.secrets()
        if isinstance(data, bytes | bytearray | memoryview):
            raw = bytes(data)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                return raw, False, "application/octet-stream"
            if "\x00" in text:
                return raw, False, "application/octet-stream"
            return redact_with(text, secrets).encode("utf-8"), True, "text/plain"
        if isinstance(data, str):
            return redact_with(data, secrets).encode("utf-8"), True, "text/plain"
        try:
            text = json_text(jsonable(data, "artifact data", secrets), "artifact data")
        except AgentCoreError as exc:
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"artifact data is not JSON-serialisable: {exc.message}"
            ) from exc
        return text.encode("utf-8"), True, "application/json"

    async def create(
        self,
        data: bytes | str | Any,
        *,
        filename: str,
        mime_type: str | None = None,
        summary: str | None = None,
        kind: str,
        session_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ArtifactRefBlock:
        """Writes ``data`` as a new artifact and registers it; returns its ``artifact_ref`` block."""
        payload, redacted, fallback_mime = self._encode(data)
        return await self._store(
            payload,
            redacted=redacted,
            fallback_mime=fallback_mime,
            filename=filename,
            mime_type=mime_type,
            summary=summary,
            kind=kind,
            session_id=session_id,
            agent_id=agent_id,
            run_id=run_id,
            node_id=node_id,
            tool_call_id=tool_call_id,
            metadata=metadata,
        )

    async def register_file(
        self,
        path: str | Path,
        *,
        filename: str | None = None,
        mime_type: str | None = None,
        summary: str | None = None,
        kind: str = "tool_output",
        session_id: str,
        agent_id: str | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> ArtifactRefBlock:
        """Copies an existing file into the artifact store (the original is left untouched)."""
        source = Path(path)
        try:
            data = await asyncio.to_thread(source.read_bytes)
        except FileNotFoundError as exc:
            raise FileOperationError(
                ErrorCode.file_not_found, f"file not found: {source}", cause=exc
            ) from exc
        except OSError as exc:
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"cannot read {source}: {exc}", cause=exc
            ) from exc
        return await self.create(
            data,
            filename=filename or source.name,
            mime_type=mime_type,
            summary=summary,
            kind=kind,
            session_id=session_id,
            agent_id=agent_id,
            run_id=run_id,
            node_id=node_id,
            tool_call_id=tool_call_id,
            metadata=metadata,
        )

    async def _store(
        self,
        payload: bytes,
        *,
        redacted: bool,
        fallback_mime: str,
        filename: str,
        mime_type: str | None,
        summary: str | None,
        kind: str,
        session_id: str,
        agent_id: str | None,
        run_id: str | None,
        node_id: str | None,
        tool_call_id: str | None,
        metadata: dict[str, Any] | None,
    ) -> ArtifactRefBlock:
        if kind not in ARTIFACT_KINDS:
            raise InvalidArgumentError(ErrorCode.validation_error, f"unknown artifact kind {kind!r}")
        artifact_id = new_id("artifact_")
        folder = self.artifact_dir(session_id, artifact_id)
        name = sanitize_filename(filename)
        mime = mime_type or mimetypes.guess_type(name)[0] or fallback_mime
        secrets = self._redactor.secrets()
        meta = jsonable(metadata or {}, "artifact metadata", secrets)
        if not isinstance(meta, dict):
            raise InvalidArgumentError(ErrorCode.validation_error, "artifact metadata must be a mapping")
        meta.update(kind=kind, redacted=redacted)
        clean_summary = redact_with(summary, secrets) if summary is not None else None
        try:
            final = await asyncio.to_thread(_write_atomic, folder, name, payload)
        except OSError as exc:
            await asyncio.to_thread(_discard_folder, folder)
            raise StorageError(
                ErrorCode.storage_error, f"cannot write artifact file: {exc}", cause=exc
            ) from exc
        record = ArtifactRecord(
            artifact_id=artifact_id,
            session_id=session_id,
            agent_id=agent_id,
            run_id=run_id,
            node_id=node_id,
            tool_call_id=tool_call_id,
            path=str(final),
            filename=name,
            mime_type=mime,
            size_bytes=len(payload),
            summary=clean_summary,
            metadata_json=json_text(meta, "artifact metadata"),
            created_at=format_ts(),
        )
        try:
            await self._storage.insert_artifact(record)
        except BaseException:
            await asyncio.to_thread(_discard_folder, folder)
            raise
        return ArtifactRefBlock(artifact_id=artifact_id, summary=clean_summary, mime_type=mime)

    async def get(self, artifact_id: str) -> ArtifactRecord:
        """The registry row; unknown id → ``AgentCoreError(file_not_found)``."""
        record = await self._storage.get_artifact(artifact_id)
        if record is None:
            raise FileOperationError(ErrorCode.file_not_found, f"unknown artifact {artifact_id!r}")
        return record

    async def get_ref(self, artifact_id: str) -> ArtifactRef:
        return artifact_from_record(await self.get(artifact_id))

    async def read_bytes(self, artifact_id: str) -> bytes:
        """The artifact file's content; a missing row or file → ``file_not_found``."""
        record = await self.get(artifact_id)
        try:
            return await asyncio.to_thread(Path(record.path).read_bytes)
        except OSError as exc:
            raise FileOperationError(
                ErrorCode.file_not_found, f"cannot read artifact {artifact_id!r}: {exc}", cause=exc
            ) from exc

    async def delete(self, artifact_id: str) -> CleanupResult:
        """Deletes the file, its directory and the registry row (``dry_run=False``). An unknown id is
        reported in ``failures`` with ``file_not_found``; node content referencing it is untouched."""
        from agent_core.types._results import CleanupFailure, CleanupItem, CleanupResult  # cold start

        record = await self._storage.get_artifact(artifact_id)
        if record is None:
            item = CleanupItem(
                kind="artifact", id=artifact_id, path="", size_bytes=0, reason="delete_artifact"
            )
            error = ErrorPayload(
                code=ErrorCode.file_not_found, message=f"unknown artifact {artifact_id!r}"
            ).redacted_copy(self._redactor)
            return CleanupResult(
                dry_run=False, failures=[CleanupFailure(item=item, error=error)], partial_failure=True
            )
        return await delete_artifact_record(self._storage, record, "delete_artifact")

    async def delete_session_files(self, session_id: str) -> list[DeleteFailure]:
        """Removes ``${SOONG_AGENT_HOME}/sessions/<session_id>/`` (after the rows were deleted).

        Returns the failures (``target`` = path) instead of raising; a missing directory is fine.
        """
        from agent_core.types._results import DeleteFailure  # imported on first use (cold start)

        folder = self.session_dir(session_id)
        failures: list[DeleteFailure] = []

        def record_failure(path: str, exc: BaseException) -> None:
            if not isinstance(exc, FileNotFoundError):
                payload = ErrorPayload(
                    code=ErrorCode.storage_error,
                    message=f"cannot delete {path}: {exc}",
                    details={"path": path},
                )
                failures.append(DeleteFailure(target=path, error=payload.redacted_copy(self._redactor)))

        def remove() -> None:
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder, onerror=lambda _f, path, info: record_failure(path, info[1]))
            elif folder.exists() or folder.is_symlink():
                try:
                    unlink_path(folder)
                except OSError as exc:
                    record_failure(str(folder), exc)

        await asyncio.to_thread(remove)
        return failures
