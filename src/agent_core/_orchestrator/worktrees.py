"""Git worktree isolation of dispatched workers (docs/multi-agent.md#worktree-isolation,
``[agents] worker_isolation = "worktree"``).

Contract:

- :func:`create_worktree` runs ``git worktree add -b <branch>`` under ``<project>/.soong-agent/worktrees/``
  (the directory is resolved, symlinks included, and must stay inside ``<project>``). The branch is
  ``soong/<task_id>/<step_id>`` when the dispatch names exactly one step, otherwise a provisional
  ``soong/<task_id>/<dispatch id>`` renamed by :func:`finish_worktree` once the run claimed a step. An
  existing branch of that name (a re-dispatched step) gets a ``-2``, ``-3``, ... suffix.
- A project that is not inside a git work tree, or a repository without a commit, is a ``config_error``
  naming ``agents.worker_isolation``.
- :func:`finish_worktree` commits whatever the worker left in its worktree on its branch (merging is left
  to the Orchestrator's tools or the user) and reports the branch and the files changed since the base
  commit. The worker controls the worktree's files, including its ``.git`` file and ``.gitattributes``, so
  every git command names the git directory the runtime created (:attr:`Worktree.git_dir`) and runs
  hardened (:mod:`agent_core._git`: no hooks, filters, fsmonitor or other configured programs); a replaced
  ``.git`` file is written back (``git_file_restored`` in the facts); a dispatch step retried in another process (temporal engine) finds its worktree again with
  :func:`reopen_worktree`. :func:`task_worktrees` / :func:`remove_worktree` let Task cleanup remove the worktrees of
  terminal Tasks (``git worktree remove --force``); branches are kept.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent_core._git import GitError, GitRepo, common_git_dir, discover_repo, linked_git_dir, run_git
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode, InternalError, StorageError
from agent_core.tools._paths import project_side_dir, resolve_dir
from agent_core.types._results import CleanupFailure, CleanupItem, CleanupResult

__all__ = [
    "BRANCH_PREFIX",
    "WORKTREES_DIR",
    "GitError",
    "Worktree",
    "cleanup_task_worktrees",
    "create_worktree",
    "discard_worktree",
    "finish_worktree",
    "remove_worktree",
    "reopen_worktree",
    "step_branch",
    "task_worktrees",
    "worktree_record",
]

WORKTREES_DIR = Path(".soong-agent") / "worktrees"
BRANCH_PREFIX = "soong"
_IDENTITY = ("-c", "user.name=soong-agent", "-c", "user.email=soong-agent@localhost")


@dataclass(kw_only=True, slots=True)
class Worktree:
    """One worker's worktree: where it lives, its branch and the commit it started from."""

    task_id: str
    path: Path
    """The worktree's top directory."""
    workdir: Path
    """The worker's project directory inside the worktree (the same sub-path as the project in its repo)."""
    branch: str
    base_commit: str
    git_dir: Path
    """The git directory the runtime created for it (``<common>/worktrees/<id>``); every git command on the
    worktree names it, whatever the worktree's ``.git`` file says by then."""
    project: Path
    """The runtime's project (git is never looked up below it)."""
    changed_files: list[str] = field(default_factory=list)
    error: str | None = None
    """Why the worker's changes could not be committed (they stay in the worktree)."""
    git_file_restored: bool = False
    """The worker had replaced the worktree's ``.git`` file; :func:`finish_worktree` wrote it back."""

    @property
    def repo(self) -> GitRepo:
        return GitRepo(git_dir=self.git_dir, work_tree=self.path, project=self.project)

    def facts(self) -> dict[str, object]:
        out: dict[str, object] = {
            "branch": self.branch,
            "path": str(self.path),
            "base_commit": self.base_commit,
            "changed_files": list(self.changed_files),
        }
        if self.error is not None:
            out["error"] = self.error
        if self.git_file_restored:
            out["git_file_restored"] = True
        return out


def _config_error(project: Path, why: str) -> ConfigError:
    return ConfigError(
        ErrorCode.config_error,
        f'agents.worker_isolation = "worktree" needs a git repository with a commit: {project} {why} '
        '(run `git init` and commit, or set agents.worker_isolation = "shared")',
        details={"config_key": "agents.worker_isolation", "project": str(project)},
    )


async def _main_repo(project: Path) -> GitRepo:
    """The repository the project lies in, with at least one commit (else ``config_error``)."""
    try:
        repo = await discover_repo(project)
    except GitError as exc:
        raise _config_error(project, "is not inside a git work tree") from exc
    try:
        await run_git(repo, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except GitError as exc:
        raise _config_error(project, "is in a repository without any commit") from exc
    return repo


async def _branch_exists(repo: GitRepo, branch: str) -> bool:
    try:
        await run_git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except GitError:
        return False
    return True


async def _free_branch(repo: GitRepo, base: str) -> str:
    name, n = base, 1
    while await _branch_exists(repo, name):
        n += 1
        name = f"{base}-{n}"
    return name


def _is_branch_of(branch: str, base: str) -> bool:
    return branch == base or (branch.startswith(base + "-") and branch[len(base) + 1 :].isdigit())


def step_branch(task_id: str, step_id: str) -> str:
    return f"{BRANCH_PREFIX}/{task_id}/{step_id}"


async def create_worktree(project: Path, task_id: str, step_id: str | None) -> Worktree:
    """A new worktree and branch for one dispatch of ``task_id`` (``step_id`` when it is known)."""
    project = resolve_dir(project)
    repo = await _main_repo(project)
    # resolved inside <project> (a .soong-agent symlink pointing elsewhere is a path_conflict), then created
    root = project_side_dir(
        project / WORKTREES_DIR,
        project,
        purpose="worker worktree directory",
        config_key="agents.worker_isolation",
    )
    token = secrets.token_hex(4)
    path = root / f"{task_id}__{step_id or 'dispatch'}__{token}"
    branch = await _free_branch(repo, step_branch(task_id, step_id or f"dispatch-{token}"))
    base = (await run_git(repo, "rev-parse", "HEAD")).strip()
    try:
        await run_git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), base)
        git_dir = linked_git_dir(await common_git_dir(repo), path)
    except GitError as exc:
        raise InternalError(
            ErrorCode.internal_error, f"cannot create the worker worktree: {exc}", details={"path": str(path)}
        ) from exc
    if git_dir is None:
        raise InternalError(
            ErrorCode.internal_error,
            f"cannot find the git directory of the new worker worktree {path}",
            details={"path": str(path)},
        )
    rel = project.relative_to(repo.work_tree)
    return Worktree(
        task_id=task_id,
        path=path,
        workdir=path / rel,
        branch=branch,
        base_commit=base,
        git_dir=git_dir,
        project=project,
    )


def worktree_record(worktree: Worktree) -> dict[str, str]:
    """What :func:`reopen_worktree` needs, for the worker run's row (a dispatch step retried elsewhere)."""
    return {
        "path": str(worktree.path),
        "workdir": str(worktree.workdir),
        "branch": worktree.branch,
        "base_commit": worktree.base_commit,
        "git_dir": str(worktree.git_dir),
        "project": str(worktree.project),
    }


async def reopen_worktree(task_id: str, record: dict[str, str]) -> Worktree:
    """The worktree a previous attempt of a dispatch created (:func:`worktree_record`), on the branch it
    has now (a finish of that attempt may have renamed it already). A record without ``git_dir`` (written
    before it was kept) finds it in the main repository of the project the worktree lies in."""
    path = Path(record["path"])
    project = Path(record["project"]) if record.get("project") else path.parents[len(WORKTREES_DIR.parts)]
    git_dir = Path(record["git_dir"]) if record.get("git_dir") else None
    if git_dir is None and path.exists():
        with contextlib.suppress(GitError, AgentCoreError):
            git_dir = linked_git_dir(await common_git_dir(await discover_repo(project)), path)
    worktree = Worktree(
        task_id=task_id,
        path=path,
        workdir=Path(record["workdir"]),
        branch=record["branch"],
        base_commit=record["base_commit"],
        git_dir=git_dir if git_dir is not None else path / ".git",
        project=project,
    )
    if path.exists() and git_dir is not None:
        with contextlib.suppress(GitError):
            head = (await run_git(worktree.repo, "rev-parse", "--abbrev-ref", "HEAD")).strip()
            worktree.branch = head or worktree.branch
    return worktree


def _names_git_dir(content: bytes, git_dir: Path) -> bool:
    """``content`` of a ``.git`` file is ``gitdir: <git_dir>`` (the path compared resolved)."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return False
    if not text.startswith("gitdir: ") or text.count("\n") > 1:
        return False
    named = text[len("gitdir: ") :].strip()
    try:
        return os.path.isabs(named) and resolve_dir(Path(named)) == git_dir
    except AgentCoreError:
        return False


def _restore_git_file(worktree: Worktree) -> bool:
    """Writes the worktree's ``.git`` file back (``gitdir: <git_dir>``) when the worker replaced it (by a
    file naming another git directory, a directory or a symlink), so a later git command the user runs in
    the worktree uses the runtime's git directory too. Nothing is followed. Returns whether it did."""
    dot_git = worktree.path / ".git"
    try:
        st = os.lstat(dot_git)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISREG(st.st_mode) and st.st_size <= 4096:
        fd = os.open(dot_git, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            current = os.read(fd, 4097)
        finally:
            os.close(fd)
        if _names_git_dir(current, worktree.git_dir):
            return False
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(dot_git)
        else:
            os.unlink(dot_git)
    fd = os.open(dot_git, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, f"gitdir: {worktree.git_dir}\n".encode())
    finally:
        os.close(fd)
    return True


async def finish_worktree(worktree: Worktree, task_id: str, step_id: str | None) -> Worktree:
    """Commits the worker's changes on its branch, renames a provisional branch after the claimed step
    and records the changed files (relative to the repository root). Every git command is pinned to the
    worktree's own git directory and runs no repository-configured program (:mod:`agent_core._git`)."""
    path = worktree.path
    if not path.exists():
        return worktree
    try:
        worktree.git_file_restored = _restore_git_file(worktree)
    except OSError as exc:
        raise GitError(("worktree", "repair"), -1, f"cannot restore {path / '.git'}: {exc}") from exc
    repo = worktree.repo
    if await run_git(repo, "status", "--porcelain", "--ignore-submodules=all"):
        await run_git(repo, "add", "-A")
        title = f"soong-agent worker: task {task_id}" + (f", step {step_id}" if step_id else "")
        await run_git(repo, *_IDENTITY, "commit", "--quiet", "--no-verify", "-m", title)
    if step_id is not None and not _is_branch_of(worktree.branch, step_branch(task_id, step_id)):
        target = await _free_branch(repo, step_branch(task_id, step_id))
        await run_git(repo, "branch", "-m", worktree.branch, target)
        worktree.branch = target
    names = await run_git(
        repo, "diff", "--no-ext-diff", "--no-textconv", "--name-only", f"{worktree.base_commit}..HEAD"
    )
    worktree.changed_files = [line for line in names.splitlines() if line]
    return worktree


def task_worktrees(project: Path, task_ids: Iterable[str]) -> list[Path]:
    """Existing worktree directories of the given Tasks."""
    root = resolve_dir(project) / WORKTREES_DIR
    if not root.is_dir():
        return []
    wanted = set(task_ids)
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.split("__", 1)[0] in wanted)


async def remove_worktree(project: Path, path: Path) -> None:
    """``git worktree remove --force`` (the branch is kept)."""
    repo = await _main_repo(resolve_dir(project))
    await run_git(repo, "worktree", "remove", "--force", str(path))


async def discard_worktree(worktree: Worktree) -> None:
    """Removes a worktree whose dispatch never started a run, and its branch (it holds nothing)."""
    try:
        repo = await discover_repo(worktree.project)
        await run_git(repo, "worktree", "remove", "--force", str(worktree.path))
        await run_git(repo, "branch", "-D", worktree.branch)
    except GitError:
        return


async def cleanup_task_worktrees(project: Path, result: CleanupResult) -> CleanupResult:
    """Adds the worktrees of the Tasks whose WALs ``result`` lists (terminal Tasks) to ``result``;
    removes them unless it is a dry run (branches are kept). Failures are reported, never raised."""
    task_ids = {item.id for item in result.candidates if item.kind == "task_wal" and item.id}
    paths = task_worktrees(project, task_ids)
    if not paths:
        return result
    for path in paths:
        item = CleanupItem(
            kind="worktree", id=path.name.split("__", 1)[0], path=str(path), reason="task_worktree"
        )
        result.candidates.append(item)
        if result.dry_run:
            continue
        try:
            await remove_worktree(project, path)
        except (GitError, AgentCoreError) as exc:
            payload = StorageError(
                ErrorCode.storage_error, f"cannot remove worktree {path}: {exc}", details={"path": str(path)}
            ).to_payload()
            result.failures.append(CleanupFailure(item=item, error=payload))
            continue
        result.deleted.append(item)
    result.partial_failure = bool(result.failures)
    return result
