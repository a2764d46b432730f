"""The ``stat`` walk a command's checkpoint compares before and after the command.

:func:`walk` lists every regular file, symlink and directory below the write roots with ``os.scandir``
(no file is opened), skipping:

* :data:`SKIPPED_NAMES` — version-control and soong-agent state (``.git``, ``.soong-agent``, ...), never
  written by a rewind anyway — and :data:`DEPENDENCY_NAMES` (``node_modules``, ``.venv``, caches):
  installed or generated trees, large and restorable by their tools;
* what the ``.gitignore`` files of the walked directories ignore (``checkpoints.use_gitignore``; git's
  rules: patterns relative to the file's directory, the deepest file deciding first, negations, a
  directory ignored as a whole), and ``checkpoints.exclude`` patterns relative to each root;
* symlinked directories (the link itself is recorded, never followed).

Sensitive and credential files (``tools.sensitive_paths`` and the built-in credential class) are listed
(their changes are noticed) but marked, so their content is never read into the store. The walk stops
after ``checkpoints.max_files`` entries (``complete = False``). Entries vanishing meanwhile are skipped.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agent_core._checkpoints.store import StatSig
from agent_core.tools._paths import SensitiveMatcher, is_within
from agent_core.tools._sandbox_view import DEPENDENCY_DIRS, _NameMatcher

log = logging.getLogger(__name__)

SKIPPED_NAMES = frozenset({".git", ".hg", ".svn", ".soong-agent"})
DEPENDENCY_NAMES = DEPENDENCY_DIRS | {".mypy_cache", ".pytest_cache", ".ruff_cache", ".gradle", ".cache"}
GITIGNORE_MAX_BYTES = 1 << 20


@dataclass(slots=True, frozen=True)
class Seen:
    """One path as a walk saw it."""

    kind: Literal["file", "symlink", "dir"]
    sig: StatSig | None = None
    """A file's ``(size, mtime_ns, ctime_ns, inode, mode)``."""
    target: str | None = None
    """A symlink's target text."""
    mode: int = 0
    sensitive: bool = False


@dataclass(slots=True)
class WalkResult:
    seen: dict[str, Seen] = field(default_factory=dict)
    complete: bool = True


@dataclass(slots=True)
class WalkRules:
    """What a walk skips and how far it goes (built from ``[checkpoints]`` and the sensitive paths)."""

    sensitive: SensitiveMatcher
    max_files: int
    use_gitignore: bool = True
    exclude: Sequence[str] = ()
    _names: _NameMatcher | None = None

    def names(self) -> _NameMatcher:
        if self._names is None:
            self._names = _NameMatcher(self.sensitive.globs)
        return self._names

    def prefixes_in(self, root: Path) -> tuple[bool, tuple[str, ...]]:
        """For a walk of ``root``: whether all of it is sensitive (it lies below a sensitive prefix), and
        the sensitive prefixes inside it (as ``"<prefix>/"`` strings, matched by ``startswith``)."""
        if any(is_within(root, prefix) for prefix in self.sensitive.prefixes):
            return True, ()
        inside = [p for p in self.sensitive.prefixes if is_within(p, root)]
        return False, tuple(os.fspath(p) + os.sep for p in inside)


@dataclass(slots=True)
class _Ignore:
    """The ignore patterns in force in one directory: ``(base directory, spec)``, deepest last."""

    specs: tuple[tuple[str, object], ...] = ()

    def ignored(self, path: str, is_dir: bool) -> bool:
        """``path`` (below every base) is ignored; the deepest file with a matching pattern decides."""
        for base, spec in reversed(self.specs):
            rel = path[len(base) + 1 :]
            result = spec.check_file(rel + "/" if is_dir else rel)  # type: ignore[attr-defined]
            if result.include is not None:
                return bool(result.include)
        return False


def _spec(lines: Sequence[str]) -> object | None:
    if not any(line.strip() and not line.lstrip().startswith("#") for line in lines):
        return None
    from pathspec import GitIgnoreSpec  # the maintained .gitignore matcher; imported when first needed

    return GitIgnoreSpec.from_lines(lines)


def _gitignore(directory: str) -> object | None:
    try:
        with open(os.path.join(directory, ".gitignore"), "rb") as fh:
            raw = fh.read(GITIGNORE_MAX_BYTES)
    except OSError:
        return None
    return _spec(raw.decode("utf-8", errors="replace").splitlines())


def walk(roots: Sequence[Path], rules: WalkRules) -> WalkResult:
    """Everything below ``roots`` (see the module docstring), keyed by absolute path."""
    result = WalkResult()
    seen = result.seen
    configured = _spec(list(rules.exclude))
    names = rules.names()
    for root in roots:
        top = os.fspath(root)
        all_sensitive, prefixes = rules.prefixes_in(root)
        base = _Ignore(((top, configured),)) if configured is not None else _Ignore()
        stack: list[tuple[str, _Ignore]] = [(top, base)]
        while stack:
            directory, ignore = stack.pop()
            if rules.use_gitignore:
                spec = _gitignore(directory)
                if spec is not None:
                    ignore = _Ignore((*ignore.specs, (directory, spec)))
            try:
                with os.scandir(directory) as listing:
                    entries = list(listing)
            except OSError:
                continue
            for entry in entries:
                name = entry.name
                if name in SKIPPED_NAMES:
                    continue
                try:
                    is_dir = entry.is_dir(follow_symlinks=False)  # the directory entry's type: no stat
                    if is_dir and name in DEPENDENCY_NAMES:
                        continue
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                mode = st.st_mode
                is_dir = stat.S_ISDIR(mode)
                path = entry.path
                if ignore.specs and ignore.ignored(path, is_dir):
                    continue
                if len(seen) >= rules.max_files:
                    result.complete = False
                    return result
                if is_dir:
                    seen[path] = Seen("dir", mode=stat.S_IMODE(mode))
                    stack.append((path, ignore))
                elif stat.S_ISLNK(mode):
                    try:
                        target = os.readlink(path)
                    except OSError:
                        continue
                    seen[path] = Seen("symlink", target=target, mode=stat.S_IMODE(mode))
                elif stat.S_ISREG(mode):
                    sig = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, stat.S_IMODE(mode))
                    sensitive = (
                        all_sensitive
                        or names(name)
                        or (bool(prefixes) and (path + os.sep).startswith(prefixes))
                    )
                    seen[path] = Seen("file", sig=sig, mode=stat.S_IMODE(mode), sensitive=sensitive)
    return result
