"""The Memory Writer (docs/context.md#extraction): the only code that writes memory files.

Not a tool of any run; only the Memory Extraction Job uses it. Contracts:

- Targets are confined to ``<memory dir>/MEMORY.md`` and ``<memory dir>/{user,feedback,reference}/<f>.md``
  (``<f>`` a plain file name, not starting with ``.``). Relative targets are taken relative to the memory
  dir; ``..`` components are refused outright. Every target is also checked after resolving symlinks:
  the memory dir, the category directory and an existing target must not be symlinks leading elsewhere.
  Violations raise ``AgentCoreError(memory_write_failed)`` and write nothing.
- Content is never stored when it looks secret (:func:`~agent_core._memory.sensitive.find_secret`):
  the whole commit is rejected with ``memory_write_failed``; messages name the file, never the value.
- :meth:`MemoryWriter.commit` writes a batch in the given order via temp file + rename; existing targets
  are backed up first. If any step fails, already renamed targets are restored from their backups (new
  files removed) and ``memory_write_failed`` is raised. Callers put memory files before ``MEMORY.md``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Sequence
from pathlib import Path

from agent_core._memory.files import CATALOG_FILE, CATEGORIES
from agent_core._memory.sensitive import find_secret
from agent_core._private_fs import make_private_dirs
from agent_core._redaction import Redactor
from agent_core.errors import AgentCoreError, ErrorCode, MemoryOperationError

_replace = os.replace
"""The rename step (a module attribute so tests can inject a failure)."""


def _refuse(message: str, *, cause: BaseException | None = None) -> AgentCoreError:
    return MemoryOperationError(ErrorCode.memory_write_failed, message, cause=cause)


class MemoryWriter:
    """Confined, atomic writer for one memory dir."""

    def __init__(self, memory_dir: Path, *, redactor: Redactor) -> None:
        self.memory_dir = Path(os.path.abspath(memory_dir))
        self._redactor = redactor

    # ---- confinement ----------------------------------------------------------------------------
    def target(self, path: str | Path) -> Path:
        """The absolute target for ``path`` if it is an allowed memory path; raises otherwise."""
        candidate = Path(path)
        if ".." in candidate.parts:
            raise _refuse(f"memory target {str(path)!r} contains '..'")
        if not candidate.is_absolute():
            candidate = self.memory_dir / candidate
        try:
            rel = candidate.relative_to(self.memory_dir)
        except ValueError:
            raise _refuse(f"memory target {str(path)!r} is outside the memory directory") from None
        parts = rel.parts
        allowed = parts == (CATALOG_FILE,) or (
            len(parts) == 2
            and parts[0] in CATEGORIES
            and parts[1].endswith(".md")
            and not parts[1].startswith(".")
            and parts[1] != ".md"
        )
        if not allowed:
            raise _refuse(
                f"memory target {rel.as_posix()!r} is not MEMORY.md or {{user,feedback,reference}}/*.md"
            )
        self._check_resolved(candidate, rel)
        return candidate

    def _check_resolved(self, candidate: Path, rel: Path) -> None:
        real_root = self.memory_dir.parent.resolve() / self.memory_dir.name
        if self.memory_dir.is_symlink():
            raise _refuse("the memory directory is a symlink; refusing to write through it")
        if len(rel.parts) == 2 and (self.memory_dir / rel.parts[0]).is_symlink():
            raise _refuse(f"memory category directory {rel.parts[0]!r} is a symlink")
        if candidate.is_symlink():
            raise _refuse(f"memory target {rel.as_posix()!r} is a symlink")
        if candidate.resolve() != real_root / rel:
            raise _refuse(f"memory target {rel.as_posix()!r} resolves outside the memory directory")

    def check_content(self, label: str, text: str) -> None:
        """Raises ``memory_write_failed`` when ``text`` contains secret-looking content."""
        kind = find_secret(text, self._redactor)
        if kind is not None:
            raise _refuse(f"{label} contains secret-looking content ({kind}); nothing was written")

    # ---- commit ---------------------------------------------------------------------------------
    def commit(self, files: Sequence[tuple[str | Path, str]]) -> list[Path]:
        """Writes every ``(target, text)`` in order, all or nothing; returns the written paths."""
        targets = [self.target(p) for p, _ in files]
        if len(set(targets)) != len(targets):
            raise _refuse("a memory commit names the same file twice")
        for target, (_, text) in zip(targets, files, strict=True):
            self.check_content(f"memory file {target.relative_to(self.memory_dir).as_posix()!r}", text)
        try:
            for target in targets:
                make_private_dirs(target.parent)
        except OSError as exc:
            raise _refuse(f"cannot create memory directories: {type(exc).__name__}", cause=exc) from exc
        for target in targets:  # re-check after mkdir (a directory may have been swapped meanwhile)
            self._check_resolved(target, target.relative_to(self.memory_dir))
        temps: list[Path] = []
        backups: list[Path | None] = []
        done: list[int] = []
        try:
            for target, (_, text) in zip(targets, files, strict=True):
                temps.append(_write_temp(target, text))
            for index, target in enumerate(targets):
                backups.append(_backup(target))
                _replace(temps[index], target)
                done.append(index)
        except OSError as exc:
            _rollback(targets, backups, done)
            for tmp in temps:
                with contextlib.suppress(OSError):
                    tmp.unlink()
            for backup in backups:
                if backup is not None:
                    with contextlib.suppress(OSError):
                        backup.unlink()
            rel = [t.relative_to(self.memory_dir).as_posix() for t in targets]
            raise _refuse(
                f"writing memory files {rel} failed ({type(exc).__name__}); previous contents restored",
                cause=exc,
            ) from exc
        for backup in backups:
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()
        return targets


def _write_temp(target: Path, text: str) -> Path:
    tmp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def _backup(target: Path) -> Path | None:
    if not target.exists():
        return None
    backup = target.parent / f".{target.name}.{secrets.token_hex(4)}.bak"
    try:
        os.link(target, backup)
    except OSError:
        shutil.copy2(target, backup)
    return backup


def _rollback(targets: list[Path], backups: list[Path | None], done: list[int]) -> None:
    for index in reversed(done):
        backup = backups[index]
        with contextlib.suppress(OSError):
            if backup is not None:
                os.replace(backup, targets[index])
            else:
                targets[index].unlink()
