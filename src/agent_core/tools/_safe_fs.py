"""Acting on exactly the path that was checked (issue 14 item 1): symlink-free opens and writes by descriptor.

A permission check looks at a *resolved* path (no symlink in any component). Between that check and the
tool's use of the path, any component can be swapped for a symlink. The functions here never follow one:

* :func:`open_dir` walks a resolved absolute directory path from ``/`` one component at a time with
  ``O_NOFOLLOW | O_DIRECTORY`` (``O_PATH`` where available, so no read permission is needed on the way),
  optionally creating missing components with ``mkdirat``. A component that is now a symlink or not a
  directory raises ``path_conflict``; nothing is created through a link.
* :func:`open_file` / :func:`open_listing` open the final component relative to that descriptor with
  ``O_NOFOLLOW`` and compare the opened object's device and inode with the :class:`FileIdentity` recorded
  at check time (a replaced file is a ``path_conflict``).
* :func:`write_at` writes a temp file in the parent descriptor and renames it over the final name
  (``renameat`` replaces a symlink, it never writes through one).

Linux/POSIX only (``dir_fd`` support); every function is synchronous.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    FileOperationError,
    InternalError,
    InvalidArgumentError,
)

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_DIR_FLAGS = _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0)


@dataclass(frozen=True, slots=True)
class FileIdentity:
    """Device and inode of a filesystem object at check time."""

    dev: int
    ino: int

    @classmethod
    def of(cls, st: os.stat_result) -> FileIdentity:
        return cls(st.st_dev, st.st_ino)


def identity(path: Path) -> FileIdentity | None:
    """The identity of ``path`` itself (``lstat``), ``None`` when it does not exist."""
    try:
        return FileIdentity.of(os.lstat(path))
    except OSError:
        return None


def changed(path: Path, what: str) -> AgentCoreError:
    return FileOperationError(
        ErrorCode.path_conflict,
        f"{path} changed since it was checked ({what}); nothing was read or written, retry the call",
        details={"path": str(path), "reason": what},
    )


def _not_found(path: Path) -> AgentCoreError:
    return FileOperationError(ErrorCode.file_not_found, f"not found: {path}", details={"path": str(path)})


def _components(path: Path) -> list[str]:
    if not path.is_absolute():
        raise InternalError(ErrorCode.internal_error, f"safe open needs an absolute path, got {path}")
    return [part for part in path.parts[1:] if part]


def open_dir(path: Path, *, create: bool = False) -> int:
    """A descriptor of directory ``path`` reached without following any symlink (caller closes it).

    ``create`` makes missing components (mode ``0o777`` minus the umask). Missing without ``create`` →
    ``file_not_found``; a symlink or non-directory component → ``path_conflict``."""
    fd = os.open("/", _DIR_FLAGS)
    walked = Path("/")
    try:
        for part in _components(path):
            walked = walked / part
            try:
                next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise _not_found(walked) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=fd)
                try:
                    next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise changed(walked, "a directory component was replaced") from exc
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise changed(walked, "a component is now a symlink or not a directory") from exc
                raise
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_identity(path: Path, st: os.stat_result, expect: FileIdentity | None) -> None:
    if expect is not None and FileIdentity.of(st) != expect:
        raise changed(path, "it was replaced by another file")


def open_file(path: Path, expect: FileIdentity | None) -> int:
    """A read descriptor of regular file ``path`` (no symlink anywhere; identity checked)."""
    parent = open_dir(path.parent)
    try:
        try:
            fd = os.open(path.name, _READ_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            raise _not_found(path) from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise changed(path, "it is now a symlink") from exc
            raise
    finally:
        os.close(parent)
    try:
        st = os.fstat(fd)
        _check_identity(path, st, expect)
        if stat.S_ISDIR(st.st_mode):
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"{path} is a directory (use code.list_dir)",
                details={"path": str(path)},
            )
        if not stat.S_ISREG(st.st_mode):
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"{path} is not a regular file", details={"path": str(path)}
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_listing(path: Path, expect: FileIdentity | None) -> int:
    """A readable descriptor of directory ``path`` for ``os.scandir`` (no symlink; identity checked)."""
    if path == Path("/"):
        fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    else:
        parent = open_dir(path.parent)
        try:
            try:
                fd = os.open(
                    path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
                )
            except FileNotFoundError:
                raise _not_found(path) from None
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise changed(path, "it is now a symlink or not a directory") from exc
                raise
        finally:
            os.close(parent)
    try:
        _check_identity(path, os.fstat(fd), expect)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_subdir(parent_fd: int, name: str) -> int | None:
    """A readable descriptor of entry ``name`` of ``parent_fd`` if it is a real directory, else ``None``."""
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError:
        return None


def current_umask() -> int:
    """The process umask, read without changing it (``os.umask`` is process-global and racy)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_at(
    parent_fd: int, target: Path, data: bytes, *, exclusive: bool, expect: FileIdentity | None
) -> bool:
    """Atomically replaces/creates ``target.name`` in ``parent_fd``; returns whether it existed.

    An existing target must be a regular file (not a symlink) with identity ``expect`` when given; it
    keeps its mode bits. ``exclusive`` publishes with ``linkat`` so a concurrently created file is never
    clobbered (:class:`FileExistsError`)."""
    name = target.name
    mode: int | None = None
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise changed(target, "it is now a symlink")
        if not stat.S_ISREG(st.st_mode):
            raise FileOperationError(
                ErrorCode.path_conflict, f"{target} is not a regular file", details={"path": str(target)}
            )
        _check_identity(target, st, expect)
        if exclusive:
            raise FileExistsError(target)
        mode = stat.S_IMODE(st.st_mode)
    tmp = f".{name[:64]}.{secrets.token_hex(6)}.soong-tmp"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent_fd
    )
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode if mode is not None else 0o666 & ~current_umask())
            os.fsync(fh.fileno())
        if exclusive:
            try:
                os.link(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd, follow_symlinks=False)
            except FileExistsError:
                raise
            except OSError:  # no hard links on this filesystem: a checked rename
                if _lexists_at(parent_fd, name):
                    raise FileExistsError(target) from None
                os.replace(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
                return False
            os.unlink(tmp, dir_fd=parent_fd)
        else:
            os.replace(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent_fd)
        raise
    return st is not None


def _lexists_at(parent_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
