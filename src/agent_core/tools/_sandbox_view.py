"""What the bwrap sandbox hides and keeps read-only (issue 14 item 8, issue 31 items 3, 5, 17).

:func:`sandbox_view` computes, from the write roots, the sensitive-path matcher (``tools.sensitive_paths``
plus the built-in credential class) and the user's home:

* ``read_only``: paths inside the write roots that are re-bound read-only on top of the writable root:
  every existing ``.git`` (directory, or the ``.git`` file of a worktree or submodule) and ``.soong-agent``
  at any depth, and ``${SOONG_AGENT_HOME}`` when it lies in a root. A command cannot plant git hooks or
  config, rewrite a worktree's ``gitdir:``, or touch the runtime's own state; it also cannot rename those
  entries away (they are mount points).
* ``masked``: every existing sensitive prefix (``~/.ssh``, ``~/.aws``, ...), every file directly in
  ``$HOME`` whose name matches a sensitive glob, and every file or directory anywhere in the write roots
  whose name matches one (a symlink is masked at its target; so is a symlink whose target's name matches).
  Files are covered by an empty read-only file, directories by an empty read-only tmpfs.

The walk does not descend into ``.git`` directories, dependency directories (:data:`DEPENDENCY_DIRS`),
masked directories or symlinked directories; entries
that vanish or cannot be resolved meanwhile are skipped. A file created or renamed by the command itself
after the sandbox started is not masked (it was not a secret of the project before), and a ``.git`` that
does not exist yet cannot be re-bound (nothing to protect).
"""

from __future__ import annotations

import fnmatch
import os
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.errors import AgentCoreError
from agent_core.tools._paths import SensitiveMatcher, is_within, resolve_dir

GUARDED_NAMES = (".git", ".soong-agent")
DEPENDENCY_DIRS = frozenset({"node_modules", ".venv", "venv", "site-packages", ".tox", ".nox", "__pycache__"})
"""Installed third-party code, not walked for secrets: their certificate bundles (``certifi``'s
``cacert.pem``) and test keys are public, and masking them would break TLS inside the sandbox."""


@dataclass(slots=True)
class SandboxView:
    read_only: list[Path] = field(default_factory=list)
    masked: list[Path] = field(default_factory=list)

    def _covered(self, path: Path) -> bool:
        return any(is_within(path, done) for done in self.masked)

    def mask(self, path: Path) -> None:
        if not self._covered(path):
            self.masked.append(path)

    def keep_read_only(self, path: Path) -> None:
        if path not in self.read_only and not self._covered(path):
            self.read_only.append(path)


def _resolved(path: str) -> Path | None:
    try:
        resolved = resolve_dir(Path(path))
    except AgentCoreError:
        return None
    return resolved if os.path.lexists(resolved) and resolved.exists() else None


def _home_entries(matcher: SensitiveMatcher, home: Path, view: SandboxView) -> None:
    for prefix in matcher.prefixes:
        if os.path.lexists(prefix):
            found = _resolved(os.fspath(prefix))
            if found is not None:
                view.mask(found)
    try:
        entries = list(os.scandir(home))
    except OSError:
        return
    for entry in entries:
        if matcher.name_matches(entry.name):
            found = _resolved(entry.path)
            if found is not None:
                view.mask(found)


class _NameMatcher:
    """:meth:`SensitiveMatcher.name_matches` as one compiled pattern (the walk checks every name)."""

    def __init__(self, globs: Sequence[str]) -> None:
        self._pattern = re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs)) if globs else None

    def __call__(self, name: str) -> bool:
        if self._pattern is None or not name:
            return False
        if self._pattern.match(name):
            return True
        return not name.isascii() and bool(self._pattern.match(unicodedata.normalize("NFKC", name)))


def _walk_root(root: Path, matches: _NameMatcher, view: SandboxView) -> None:
    stack = [os.fspath(root)]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            try:
                is_link = entry.is_symlink()
                is_dir = not is_link and entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if entry.name in GUARDED_NAMES:
                found = _resolved(entry.path)
                if found is not None:
                    view.keep_read_only(found)
                if entry.name == ".git":
                    continue  # git's own objects and config: never walked
            target = _resolved(entry.path) if is_link else None
            if matches(entry.name) or (target is not None and matches(target.name)):
                found = target if is_link else Path(entry.path)
                if found is not None:
                    view.mask(found)
                continue
            if is_dir and entry.name not in DEPENDENCY_DIRS:
                stack.append(entry.path)


def sandbox_view(
    roots: Sequence[Path], matcher: SensitiveMatcher, home: Path, *, soong_home: Path | None = None
) -> SandboxView:
    """The read-only re-binds and masks of one sandboxed command (see the module docstring)."""
    view = SandboxView()
    _home_entries(matcher, home, view)
    matches = _NameMatcher(matcher.globs)
    for root in _outermost(roots):
        if root.is_dir():
            _walk_root(root, matches, view)
    if soong_home is not None and any(is_within(soong_home, r) for r in roots) and soong_home.is_dir():
        view.keep_read_only(soong_home)
    view.read_only = [p for p in view.read_only if not view._covered(p)]
    return view


def _outermost(roots: Iterable[Path]) -> list[Path]:
    """``roots`` without those inside another root (walked once)."""
    unique = list(dict.fromkeys(roots))
    return [r for r in unique if not any(r != o and is_within(r, o) for o in unique)]
