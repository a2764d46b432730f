"""Protected paths (issue 31 items 2, 17): the classes of paths no allow rule and no session grant covers.

A call touching one of them always asks (``suggested_decision = deny``), is denied without a permission
callback, and its prompt says why (``PermissionRequest.metadata["protected"]``). The classes:

* ``git`` (writes): a path with a ``.git`` component (the ``.git`` directory and everything in it, a
  worktree's or submodule's ``.git`` file, any nested repository). A write there turns into code execution
  at the next git command (``core.hooksPath``, ``core.fsmonitor``, filters, hooks, ``gitdir:``).
* ``runtime`` (writes): a path with a ``.soong-agent`` component below the project (plans, Task WALs,
  worker worktrees of this runtime) and anything in ``${SOONG_AGENT_HOME}`` (config with hooks and
  permission rules, the session store).
* ``credential`` (reads and writes): well-known credential files, on top of ``tools.sensitive_paths``:
  :data:`CREDENTIAL_PREFIXES` (below the user's home) and :data:`CREDENTIAL_GLOBS` (basenames anywhere).

Only the components below the project count for ``git`` and ``runtime`` (a worker's project is a worktree
below ``<project>/.soong-agent/worktrees/``), all components of a path outside the project. Everything here
is pure: callers pass the resolved path and its lexical (pre-symlink) form, and a path is protected when
either form is.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Literal

from agent_core.tools._paths import is_within

ProtectedKind = Literal["git", "runtime", "credential"]

CREDENTIAL_PREFIXES: tuple[str, ...] = (
    ".git-credentials",
    ".netrc",
    ".docker/config.json",
    ".kube/config",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".config/gh",
)
"""Below the user's home: files and directories holding tokens or passwords."""
CREDENTIAL_GLOBS: tuple[str, ...] = ("*.p12", "*.pfx", "id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*")
"""Basenames matched anywhere (private keys and certificate bundles)."""

WHY: dict[ProtectedKind, str] = {
    "git": "git internals: a write here can make the next git command run code (hooks, config, filters)",
    "runtime": "soong-agent's own state (config, permission rules, hooks, plans, Task WALs, worktrees)",
    "credential": "a credential file (tokens, passwords or private keys)",
}


@dataclass(frozen=True, slots=True)
class ProtectedPath:
    """One protected target of a call and its class."""

    path: Path
    kind: ProtectedKind

    @property
    def why(self) -> str:
        return WHY[self.kind]

    def describe(self) -> dict[str, str]:
        """The entry of ``PermissionRequest.metadata["protected"]``."""
        return {"path": str(self.path), "kind": self.kind, "why": self.why}


def _fold(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def _own_parts(path: Path, project: Path) -> tuple[str, ...]:
    """The components of ``path`` below ``project``, or all of them when it lies outside."""
    if is_within(path, project):
        return path.relative_to(project).parts
    return path.parts


def credential_entries() -> tuple[str, ...]:
    """The credential class as ``tools.sensitive_paths`` entries (``~/`` prefixes and globs), which the
    code tools and the sandbox add to the configured ones (recursive listings, search and the sandbox
    hide these files like any other sensitive path)."""
    return (*(f"~/{entry}" for entry in CREDENTIAL_PREFIXES), *CREDENTIAL_GLOBS)


def credential_prefixes(home: Path) -> tuple[Path, ...]:
    return tuple(home / entry for entry in CREDENTIAL_PREFIXES)


def is_credential(path: Path, home: Path) -> bool:
    """``path`` is a well-known credential file (a :data:`CREDENTIAL_PREFIXES` entry below ``home`` or
    a basename matching :data:`CREDENTIAL_GLOBS`, also in NFKC form)."""
    if any(is_within(path, prefix) for prefix in credential_prefixes(home)):
        return True
    name = path.name
    folded = unicodedata.normalize("NFKC", name)
    return bool(name) and any(fnmatchcase(name, g) or fnmatchcase(folded, g) for g in CREDENTIAL_GLOBS)


def protected_kind(
    path: Path, *, project: Path, soong_home: Path, home: Path, write: bool
) -> ProtectedKind | None:
    """The protected class of one (absolute, normalised) path, ``None`` when it has none. ``git`` and
    ``runtime`` apply to writes only."""
    if write:
        parts = [_fold(p) for p in _own_parts(path, project)]
        if ".git" in parts:
            return "git"
        if ".soong-agent" in parts or is_within(path, soong_home):
            return "runtime"
    if is_credential(path, home):
        return "credential"
    return None


def protected_targets(
    targets: Iterable[tuple[Path, Path | None]],
    *,
    project: Path,
    soong_home: Path,
    home: Path,
    write: bool,
) -> tuple[ProtectedPath, ...]:
    """The protected entries among ``targets`` (each ``(resolved, lexical)``; the lexical form may be
    ``None``), reported under the resolved path."""
    found: list[ProtectedPath] = []
    for resolved, lexical in targets:
        for form in (resolved, lexical):
            if form is None:
                continue
            kind = protected_kind(
                Path(os.path.normpath(form)), project=project, soong_home=soong_home, home=home, write=write
            )
            if kind is not None:
                entry = ProtectedPath(resolved, kind)
                if entry not in found:
                    found.append(entry)
                break
    return tuple(found)
