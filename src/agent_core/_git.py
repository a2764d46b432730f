"""Every git command the runtime runs goes through :func:`run_git` (issue 31 item 1).

A repository is content the model (or whoever shipped the clone) may have written: a ``.git`` file saying
``gitdir: elsewhere``, a git directory whose config defines a clean filter, ``core.fsmonitor`` or
``core.hooksPath``, a ``.gitattributes`` selecting that filter. git runs such things as ordinary
commands, outside every permission prompt and sandbox. So:

* **Pinned repository.** Each command names its git directory and work tree explicitly (``--git-dir`` /
  ``--work-tree`` of a :class:`GitRepo`): for a worker's worktree the git directory the runtime itself
  created (:func:`linked_git_dir` finds it in the main repository, never through the worktree's ``.git``
  file); for the main repository the one :func:`discover_repo` found in the project.
* **No configured execution.** Global and system config are not read (``GIT_CONFIG_GLOBAL`` = the empty
  ``/dev/null``, ``GIT_CONFIG_NOSYSTEM=1``); :data:`HARDENING` overrides every key that makes git run a
  program or contact a remote (hooks, fsmonitor, pager, editor, ssh, credential helpers, signing, auto gc,
  every transport), and every filter / diff / merge driver defined in the repository's own config is
  blanked (a driver without a command runs nothing). Overrides travel as ``GIT_CONFIG_COUNT`` /
  ``GIT_CONFIG_KEY_n`` / ``GIT_CONFIG_VALUE_n`` (no quoting of odd driver names), which git also passes to
  the git processes it starts.
* **Trusted executable and environment.** ``git`` is resolved in the absolute ``PATH`` entries outside the
  project (:mod:`agent_core.tools._executables`); the environment holds only ``PATH`` (those entries),
  ``HOME``, ``TMPDIR``, ``LANG``, ``LC_ALL`` and the variables above; no terminal prompt, no pager.

Failures raise :class:`GitError` with git's output (a timeout kills git and raises too).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agent_core.tools._executables import trusted_path_entries, trusted_which
from agent_core.tools._paths import is_within, resolve_dir

GIT_TIMEOUT_S = 60.0
_PASSED_ENV = ("HOME", "TMPDIR", "LANG", "LC_ALL")

HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.untrackedCache", "false"),
    ("core.pager", "cat"),
    ("core.editor", "false"),
    ("sequence.editor", "false"),
    ("core.askPass", ""),
    ("core.sshCommand", "false"),
    ("core.gitProxy", ""),
    ("core.alternateRefsCommand", ""),
    ("credential.helper", ""),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("log.showSignature", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("protocol.allow", "never"),
    *((f"protocol.{name}.allow", "never") for name in ("file", "git", "ssh", "http", "https", "ext")),
)
"""Config overrides of every git command (see the module docstring)."""

_DRIVER_KEY = re.compile(
    r"^(?:filter\.(?P<filter>.+)\.(?:clean|smudge|process|required)"
    r"|diff\.(?P<diff>.+)\.(?:textconv|command)"
    r"|merge\.(?P<merge>.+)\.driver)$",
    re.DOTALL,
)


class GitError(Exception):
    """A git command failed (or git could not be started): its arguments, exit code and output."""

    def __init__(self, args: Sequence[str], code: int, output: str) -> None:
        super().__init__(f"git {' '.join(args)} exited with {code}: {output.strip()[:500]}")
        self.output = output


@dataclass(frozen=True, slots=True)
class GitRepo:
    """A pinned repository: the git directory and work tree every command names explicitly."""

    git_dir: Path
    work_tree: Path
    project: Path
    """The directory whose files are never executed (git itself is not looked up below it)."""


def git_env(project: Path, overrides: Sequence[tuple[str, str]] = HARDENING) -> dict[str, str]:
    """The environment of one git command (see the module docstring)."""
    env = {k: v for k, v in os.environ.items() if k in _PASSED_ENV}
    env["PATH"] = os.pathsep.join(
        trusted_path_entries(os.environ.get("PATH", os.defpath), exclude=(project,))
    )
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_ATTR_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_OPTIONAL_LOCKS="0",
        GIT_PAGER="cat",
        GIT_CONFIG_COUNT=str(len(overrides)),
    )
    for index, (key, value) in enumerate(overrides):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    return env


def _git_binary(project: Path) -> str:
    found = trusted_which("git", exclude=(project,))
    if found is None:
        raise GitError(("--version",), -1, "git not found in an absolute PATH entry outside the project")
    return found


async def _exec(args: Sequence[str], *, cwd: Path, env: dict[str, str], project: Path) -> str:
    """Runs ``git <args>``; its stdout+stderr, or :class:`GitError`."""
    try:
        proc = await asyncio.create_subprocess_exec(
            _git_binary(project),
            "--no-pager",
            *args,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
        )
    except OSError as exc:
        raise GitError(args, -1, f"cannot run git: {exc}") from exc
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), GIT_TIMEOUT_S)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    text = out.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        raise GitError(args, proc.returncode or -1, text)
    return text


def _pinned(repo: GitRepo) -> list[str]:
    return [f"--git-dir={repo.git_dir}", f"--work-tree={repo.work_tree}"]


def driver_overrides(config_list: str) -> list[tuple[str, str]]:
    """Blank values for every filter / diff / merge driver command in ``git config --null --list``
    output (and ``required = false`` for filters, so a blanked filter is not an error)."""
    overrides: list[tuple[str, str]] = []
    for record in config_list.split("\0"):
        key = record.split("\n", 1)[0]
        match = _DRIVER_KEY.match(key)
        if match is None:
            continue
        if match.group("filter") is not None:
            name = match.group("filter")
            entries = [(f"filter.{name}.{v}", "") for v in ("clean", "smudge", "process")]
            entries.append((f"filter.{name}.required", "false"))
        elif match.group("diff") is not None:
            entries = [(f"diff.{match.group('diff')}.{v}", "") for v in ("textconv", "command")]
        else:
            entries = [(f"merge.{match.group('merge')}.driver", "")]
        overrides.extend(e for e in entries if e not in overrides)
    return overrides


async def run_git(repo: GitRepo, *args: str) -> str:
    """Runs ``git --git-dir=<repo.git_dir> --work-tree=<repo.work_tree> <args>`` hardened (see the module
    docstring); returns its output."""
    listing = await _exec(
        [*_pinned(repo), "config", "--null", "--list"],
        cwd=repo.work_tree,
        env=git_env(repo.project),
        project=repo.project,
    )
    env = git_env(repo.project, (*HARDENING, *driver_overrides(listing)))
    return await _exec([*_pinned(repo), *args], cwd=repo.work_tree, env=env, project=repo.project)


async def discover_repo(project: Path) -> GitRepo:
    """The repository ``project`` lies in (git's own discovery, hardened): its absolute git directory and
    top-level work tree. Raises :class:`GitError` when ``project`` is not inside a work tree."""
    project = resolve_dir(project)
    out = await _exec(
        ["rev-parse", "--absolute-git-dir", "--show-toplevel"],
        cwd=project,
        env=git_env(project),
        project=project,
    )
    lines = out.splitlines()
    if len(lines) < 2 or not lines[0] or not lines[1]:
        raise GitError(("rev-parse",), -1, f"unexpected output: {out!r}")
    return GitRepo(
        git_dir=resolve_dir(Path(lines[0])), work_tree=resolve_dir(Path(lines[1])), project=project
    )


async def common_git_dir(repo: GitRepo) -> Path:
    """The repository's common git directory (the main ``.git``, also for a linked worktree)."""
    out = (await run_git(repo, "rev-parse", "--git-common-dir")).strip()
    path = Path(out)
    return resolve_dir(path if path.is_absolute() else repo.git_dir / path)


def linked_git_dir(common: Path, worktree: Path) -> Path | None:
    """The git directory the main repository keeps for the linked ``worktree`` (``<common>/worktrees/<id>``
    whose ``gitdir`` file names ``<worktree>/.git``), read from the main repository only; ``None`` when
    there is none."""
    root = common / "worktrees"
    target = resolve_dir(worktree) / ".git"
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return None
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            with open(os.path.join(entry.path, "gitdir"), encoding="utf-8") as fh:
                named = fh.read().strip()
        except (OSError, UnicodeDecodeError):
            continue
        if named and Path(os.path.normpath(named)) == target:
            found = resolve_dir(Path(entry.path))
            return found if is_within(found, common) else None
    return None
