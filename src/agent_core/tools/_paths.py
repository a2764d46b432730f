"""Path safety for file tools, command cwds and declarative working dirs (docs/tools.md#paths,
docs/tools.md#the-code-tools).

Every function here is side-effect free (it only ``lstat``s and ``readlink``s):

* :func:`resolve_path` turns a tool path argument into an absolute, symlink-free path: a leading ``~`` is
  the OS user home, relative paths join ``<project>``, ``.``/``..`` are normalised lexically, then every
  existing component is resolved (dangling symlinks included, loops rejected); the remainder of a
  not-yet-existing target is appended verbatim.
* :func:`write_roots` / :func:`within_roots` implement the allowed write roots; containment is
  component-wise (``/a/bc`` is not under ``/a/b``).
* :class:`SensitiveMatcher` implements ``tools.sensitive_paths``: ``~``/``/`` entries are prefixes of the
  resolved target, all other entries are case-sensitive ``fnmatch`` globs on the basename. It is stricter
  than the minimum: it also checks the lexical (pre-symlink) path and the NFKC form of the basename.

Bad input (NUL bytes, empty strings, ``~user``, over-long names, symlink loops) raises
``AgentCoreError(validation_error)``; nothing is guessed.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from agent_core.errors import AgentCoreError, ErrorCode, FileOperationError, InvalidArgumentError
from agent_core.tools._safe_fs import open_dir

SKIP_DIRS: frozenset[str] = frozenset(
    {".git", "node_modules", ".venv", "venv", "dist", "build", "target", ".next", ".cache", "__pycache__"}
)
"""Directory names never descended into by recursive listing, search and the instruction catalog."""

MAX_SYMLINK_HOPS = 40
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
HOME_PLACEHOLDER = "${SOONG_AGENT_HOME}"
PROJECT_PLACEHOLDER = "<project>"


def _invalid(message: str, raw: object) -> AgentCoreError:
    return InvalidArgumentError(ErrorCode.validation_error, message, details={"path": repr(raw)[:300]})


def user_home() -> Path:
    """The OS user home used for ``~`` (honours ``HOME``)."""
    return Path(os.path.expanduser("~"))


def expand_user(raw: str, *, home: Path | None = None) -> str:
    """Expands a leading ``~`` or ``~/``; ``~name`` is refused (no other user's home is ever guessed)."""
    if not raw.startswith("~"):
        return raw
    if raw != "~" and not raw.startswith("~/"):
        raise _invalid(f"only '~' and '~/' are expanded, got {raw[:80]!r}", raw)
    base = str(home if home is not None else user_home())
    return base + raw[1:]


def _check_text(raw: object) -> str:
    if isinstance(raw, Path):
        raw = str(raw)
    if not isinstance(raw, str):
        raise _invalid(f"path must be a string, got {type(raw).__name__}", raw)
    if raw == "" or raw.strip() == "":
        raise _invalid("path must not be empty", raw)
    if "\x00" in raw:
        raise _invalid("path must not contain NUL bytes", raw)
    try:
        encoded = os.fsencode(raw)
    except UnicodeError as exc:
        raise _invalid("path is not encodable for this filesystem", raw) from exc
    if len(encoded) > MAX_PATH_BYTES:
        raise _invalid(f"path is longer than {MAX_PATH_BYTES} bytes", raw)
    return raw


def lexical_path(raw: str | Path, *, base: Path, home: Path | None = None) -> Path:
    """Absolute, lexically normalised form of ``raw`` (``~`` expanded, relative joined to ``base``)."""
    text = expand_user(_check_text(raw), home=home)
    joined = text if os.path.isabs(text) else os.path.join(os.fspath(base), text)
    normalised = os.path.normpath(joined)
    if normalised.startswith("//"):  # POSIX keeps a leading '//' (implementation-defined); collapse it
        normalised = "/" + normalised.lstrip("/")
    return Path(normalised)


def _realpath(path: str) -> str:
    """Resolves every existing component of an absolute normalised ``path``; appends the rest."""
    pending = [p for p in path.split("/") if p]
    pending.reverse()
    resolved = "/"
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            resolved = os.path.dirname(resolved) or "/"
            continue
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise _invalid(f"path component longer than {MAX_NAME_BYTES} bytes", path)
        candidate = os.path.join(resolved, part)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            rest = [part, *reversed(pending)]
            return os.path.normpath(os.path.join(resolved, *rest))
        except NotADirectoryError:
            rest = [part, *reversed(pending)]
            return os.path.normpath(os.path.join(resolved, *rest))
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise _invalid("path name too long", path) from exc
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"cannot inspect path component {candidate!r}: {exc.strerror}"
            ) from exc
        if not stat.S_ISLNK(st.st_mode):
            resolved = candidate
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            raise _invalid("too many levels of symbolic links (symlink loop?)", path)
        target = os.readlink(candidate)
        if os.path.isabs(target):
            resolved = "/"
        for piece in reversed([p for p in target.split("/") if p]):
            pending.append(piece)
    return resolved


def resolve_path(raw: str | Path, *, base: Path, home: Path | None = None) -> Path:
    """Resolves a path argument against ``base`` (normally ``<project>``) per docs/tools.md#paths."""
    return Path(_realpath(os.fspath(lexical_path(raw, base=base, home=home))))


def resolve_dir(path: Path) -> Path:
    """Resolved form of a configured absolute directory (project, home, roots)."""
    return Path(_realpath(os.path.normpath(os.fspath(path.absolute()))))


def is_within(path: Path, root: Path) -> bool:
    """Component-wise containment of two resolved paths (``path`` equal to ``root`` counts)."""
    p, r = os.fspath(path), os.fspath(root)
    if p[:1] == "/" and r[:1] == "/" and p[:2] != "//" and r[:2] != "//":
        # absolute pathlib paths are normalised: containment is a prefix ending at a separator
        return p == r or p.startswith(r if r.endswith("/") else r + "/")
    return path == root or root in path.parents


def within_roots(path: Path, roots: Iterable[Path]) -> bool:
    return any(is_within(path, root) for root in roots)


def write_roots(
    project_dir: Path, allowed: Sequence[Path] = (), *, allow_tmp: bool = False
) -> tuple[Path, ...]:
    """``<project>`` ∪ ``tools.allowed_write_roots`` ∪ (``/tmp`` and ``tempfile.gettempdir()`` if allowed)."""
    roots: list[Path] = [resolve_dir(project_dir)]
    roots.extend(resolve_dir(Path(p)) for p in allowed)
    if allow_tmp:
        roots.append(resolve_dir(Path(tempfile.gettempdir())))
        roots.append(resolve_dir(Path("/tmp")))
    unique: list[Path] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return tuple(unique)


def _nfkc(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


@dataclass(frozen=True, slots=True)
class SensitiveMatcher:
    """Matches resolved paths against ``tools.sensitive_paths``."""

    prefixes: tuple[Path, ...]
    globs: tuple[str, ...]

    @classmethod
    def from_entries(
        cls,
        entries: Iterable[str],
        *,
        soong_home: Path | None = None,
        project_dir: Path | None = None,
        home: Path | None = None,
    ) -> SensitiveMatcher:
        """Builds a matcher; ``${SOONG_AGENT_HOME}`` / ``<project>`` placeholders are expanded first."""
        prefixes: list[Path] = []
        globs: list[str] = []
        for entry in entries:
            text = entry.strip()
            if not text:
                continue
            if soong_home is not None:
                text = text.replace(HOME_PLACEHOLDER, os.fspath(soong_home))
            if project_dir is not None:
                text = text.replace(PROJECT_PLACEHOLDER, os.fspath(project_dir))
            if text.startswith(("~", "/")):
                for form in (
                    lexical_path(text, base=Path("/"), home=home),
                    resolve_path(text, base=Path("/"), home=home),
                ):
                    if form not in prefixes:
                        prefixes.append(form)
            else:
                globs.append(text)
        return cls(tuple(prefixes), tuple(globs))

    def name_matches(self, name: str) -> bool:
        """``name`` (a basename) matches a sensitive glob (also checked in NFKC form)."""
        if not name:
            return False
        folded = _nfkc(name)
        return any(fnmatchcase(name, g) or fnmatchcase(folded, g) for g in self.globs)

    def under_prefix(self, path: Path) -> bool:
        """``path`` is a sensitive prefix or lies below one (component-wise)."""
        return any(is_within(path, prefix) for prefix in self.prefixes)

    def is_sensitive(self, resolved: Path, lexical: Path | None = None) -> bool:
        """Sensitive if the resolved target (or its lexical, pre-symlink form) matches any entry."""
        for candidate in (resolved, lexical):
            if candidate is None:
                continue
            if self.under_prefix(candidate) or self.name_matches(candidate.name):
                return True
        return False


@dataclass(frozen=True, slots=True)
class ResolvedTarget:
    """A path argument after docs/tools.md#paths normalisation."""

    raw: str
    lexical: Path
    resolved: Path


def resolve_target(raw: str | Path, *, base: Path, home: Path | None = None) -> ResolvedTarget:
    """Lexical and resolved forms of a path argument in one step."""
    lexical = lexical_path(raw, base=base, home=home)
    return ResolvedTarget(raw=os.fspath(raw), lexical=lexical, resolved=Path(_realpath(os.fspath(lexical))))


def project_side_dir(path: Path, project: Path, *, purpose: str, config_key: str | None = None) -> Path:
    """The resolved form of a runtime-owned directory (plans, Task WALs), created without following links.

    ``path`` is absolute. When it lies inside ``project`` lexically (the defaults
    ``<project>/.soong-agent/...`` and any model-suggested directory), its resolved form must lie inside the
    resolved project too: a symlink shipped with a cloned repository (``.soong-agent -> /elsewhere``)
    would otherwise redirect the runtime's own writes. That raises ``path_conflict`` naming the link and
    ``config_key``; nothing is created. A directory the user configured outside the project is theirs to
    choose and is only resolved. Missing components are created with ``mkdirat`` from ``/`` without
    following any symlink (issue 14 items 2, 3)."""
    lexical = Path(os.path.normpath(os.fspath(path)))
    project_lexical = Path(os.path.normpath(os.fspath(project)))
    project_resolved = resolve_dir(project)
    resolved = resolve_dir(lexical)
    inside = is_within(lexical, project_lexical) or is_within(lexical, project_resolved)
    if inside and not is_within(resolved, project_resolved):
        hint = f"; or set {config_key} to a directory of your choice" if config_key else ""
        raise FileOperationError(
            ErrorCode.path_conflict,
            f"the {purpose} {lexical} resolves to {resolved}, outside the project {project_resolved} "
            f"(a symlink inside the project, e.g. .soong-agent, points elsewhere); remove the link{hint}",
            details={"path": str(lexical), "resolved": str(resolved), "project": str(project_resolved)},
        )
    os.close(open_dir(resolved, create=True))
    return resolved
