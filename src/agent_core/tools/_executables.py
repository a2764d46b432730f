"""Where an executable named by a command comes from (issue 31 item 4).

Contract:

* A name with a ``/`` (``./build.sh``, ``bin/tool``, ``/usr/bin/git``) names its file explicitly: it is
  joined to the command's cwd and normalised, never looked up.
* A bare name (``git``) is looked up only in the **absolute** ``PATH`` entries that lie **outside** the
  excluded directories (the project): an empty entry, ``.``, ``bin`` or ``node_modules/.bin`` would make
  the lookup depend on the directory the process runs in, and an entry inside the project would run a file
  the repository ships (Go refuses such results too: ``exec.ErrDot``). Skipped entries are remembered, so
  a name found only there fails with ``file_not_found`` saying where it was and how to run it on purpose
  (name its path).
* The result is always an absolute path; callers show it in the permission prompt and the audit and
  execute exactly that file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from agent_core.errors import AgentCoreError, ErrorCode, FileOperationError, InvalidArgumentError
from agent_core.tools._paths import is_within, resolve_dir


def _is_executable_file(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _excluded(entry: str, exclude: Iterable[Path]) -> bool:
    """``entry`` (absolute, normalised) or its resolved form lies inside one of ``exclude``."""
    lexical = Path(entry)
    try:
        resolved = resolve_dir(lexical)
    except AgentCoreError:
        return True  # unresolvable (symlink loop, over-long): never searched
    return any(is_within(lexical, root) or is_within(resolved, root) for root in exclude)


def trusted_path_entries(path_value: str, *, exclude: Sequence[Path] = ()) -> list[str]:
    """The absolute ``PATH`` entries of ``path_value`` outside ``exclude`` (normalised, in order)."""
    roots = [resolve_dir(Path(p)) for p in exclude]
    entries: list[str] = []
    for raw in path_value.split(os.pathsep):
        if not raw or not os.path.isabs(raw):
            continue
        entry = os.path.normpath(raw)
        if entry not in entries and not _excluded(entry, roots):
            entries.append(entry)
    return entries


def trusted_which(name: str, *, path_value: str | None = None, exclude: Sequence[Path] = ()) -> str | None:
    """``name`` found in the trusted entries of ``path_value`` (default: this process's ``PATH``), or
    ``None``. ``name`` must be bare (no ``/``)."""
    if not name or "/" in name or "\x00" in name:
        return None
    value = os.environ.get("PATH", os.defpath) if path_value is None else path_value
    for entry in trusted_path_entries(value, exclude=exclude):
        candidate = os.path.join(entry, name)
        if _is_executable_file(candidate):
            return candidate
    return None


def _skipped_matches(name: str, path_value: str, cwd: Path, exclude: Sequence[Path]) -> list[str]:
    """Where an untrusted ``PATH`` entry (relative, empty or inside ``exclude``) holds ``name``."""
    trusted = set(trusted_path_entries(path_value, exclude=exclude))
    found: list[str] = []
    for raw in path_value.split(os.pathsep):
        entry = os.path.normpath(os.path.join(os.fspath(cwd), raw or "."))
        if os.path.isabs(raw) and os.path.normpath(raw) in trusted:
            continue
        candidate = os.path.join(entry, name)
        if _is_executable_file(candidate) and candidate not in found:
            found.append(candidate)
    return found


def resolve_executable(name: str, *, cwd: Path, env: Mapping[str, str], exclude: Sequence[Path] = ()) -> Path:
    """The absolute path ``argv[0]`` runs (see the module docstring): ``name`` with a ``/`` against
    ``cwd``, a bare name through the trusted entries of ``env["PATH"]`` (``os.defpath`` when PATH is not
    passed). Not found / not an executable file → ``file_not_found``."""
    if not name or "\x00" in name:
        raise InvalidArgumentError(
            ErrorCode.validation_error, "argv[0] must be a non-empty string without NUL"
        )
    if "/" in name:
        candidate = os.path.normpath(os.path.join(os.fspath(cwd), name))
        if _is_executable_file(candidate):
            return Path(candidate)
        raise FileOperationError(
            ErrorCode.file_not_found, f"executable {name!r} not found", details={"executable": name}
        )
    path_value = env.get("PATH", os.defpath)
    found = trusted_which(name, path_value=path_value, exclude=exclude)
    if found is not None:
        return Path(found)
    skipped = _skipped_matches(name, path_value, cwd, exclude)
    message = f"executable {name!r} not found on the allowlisted PATH"
    details: dict[str, object] = {"executable": name}
    if skipped:
        hint = os.path.relpath(skipped[0], cwd)
        hint = hint if hint.startswith("../") else "./" + hint
        message += (
            f" (only at {skipped[0]}, through a relative PATH entry or one inside the project, which are "
            f"never searched; to run that file, name its path: argv[0] = {hint!r})"
        )
        details["skipped"] = skipped
    raise FileOperationError(ErrorCode.file_not_found, message, details=details)
