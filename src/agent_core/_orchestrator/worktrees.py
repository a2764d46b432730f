"""Git worktree isolation of dispatched workers (surfaces.md §6, ``[agents] worker_isolation = "worktree"``).

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
  commit; a dispatch step retried in another process (temporal engine) finds its worktree again with
  :func:`reopen_worktree`. :func:`task_worktrees` / :func:`remove_worktree` let Task cleanup remove the worktrees of
  terminal Tasks (``git worktree remove --force``); branches are kept.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.tools._paths import project_side_dir, resolve_dir
from agent_core.types._results import CleanupFailure, CleanupItem, CleanupResult

WORKTREES_DIR = Path(".soong-agent") / "worktrees"
BRANCH_PREFIX = "soong"
_IDENTITY = ("-c", "user.name=soong-agent", "-c", "user.email=soong-agent@localhost")
_GIT_TIMEOUT_S = 60.0


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
    changed_files: list[str] = field(default_factory=list)
    error: str | None = None
    """Why the worker's changes could not be committed (they stay in the worktree)."""

    def facts(self) -> dict[str, object]:
        out: dict[str, object] = {
            "branch": self.branch,
            "path": str(self.path),
            "base_commit": self.base_commit,
            "changed_files": list(self.changed_files),
        }
        if self.error is not None:
            out["error"] = self.error
        return out


class GitError(Exception):
    def __init__(self, args: Sequence[str], code: int, output: str) -> None:
        super().__init__(f"git {' '.join(args)} exited with {code}: {output.strip()[:500]}")
        self.output = output


def _git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "TMPDIR", "LANG", "LC_ALL")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    return env


async def _git(cwd: Path, *args: str) -> str:
    """Runs one git command; its stdout, or :class:`GitError` with its output."""
    try:
        proc = await asyncio.create_subprocess_exec(
            "git",
            *args,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=_git_env(),
        )
    except OSError as exc:
        raise GitError(args, -1, f"cannot run git: {exc}") from exc
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), _GIT_TIMEOUT_S)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    text = out.decode("utf-8", errors="replace")
    if proc.returncode != 0:
        raise GitError(args, proc.returncode or -1, text)
    return text


def _config_error(project: Path, why: str) -> ConfigError:
    return ConfigError(
        ErrorCode.config_error,
        f'agents.worker_isolation = "worktree" needs a git repository with a commit: {project} {why} '
        '(run `git init` and commit, or set agents.worker_isolation = "shared")',
        details={"config_key": "agents.worker_isolation", "project": str(project)},
    )


async def _repo_root(project: Path) -> Path:
    try:
        top = (await _git(project, "rev-parse", "--show-toplevel")).strip()
    except GitError as exc:
        raise _config_error(project, "is not inside a git work tree") from exc
    try:
        await _git(project, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except GitError as exc:
        raise _config_error(project, "is in a repository without any commit") from exc
    return resolve_dir(Path(top))


async def _branch_exists(repo: Path, branch: str) -> bool:
    try:
        await _git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}")
    except GitError:
        return False
    return True


async def _free_branch(repo: Path, base: str) -> str:
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
    repo = await _repo_root(project)
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
    base = (await _git(repo, "rev-parse", "HEAD")).strip()
    try:
        await _git(repo, "worktree", "add", "--quiet", "-b", branch, str(path), base)
    except GitError as exc:
        raise AgentCoreError(
            ErrorCode.internal_error, f"cannot create the worker worktree: {exc}", details={"path": str(path)}
        ) from exc
    rel = project.relative_to(repo)
    return Worktree(task_id=task_id, path=path, workdir=path / rel, branch=branch, base_commit=base)


def worktree_record(worktree: Worktree) -> dict[str, str]:
    """What :func:`reopen_worktree` needs, for the worker run's row (a dispatch step retried elsewhere)."""
    return {
        "path": str(worktree.path),
        "workdir": str(worktree.workdir),
        "branch": worktree.branch,
        "base_commit": worktree.base_commit,
    }


async def reopen_worktree(task_id: str, record: dict[str, str]) -> Worktree:
    """The worktree a previous attempt of a dispatch created (:func:`worktree_record`), on the branch it
    has now (a finish of that attempt may have renamed it already)."""
    path = Path(record["path"])
    branch = record["branch"]
    if path.exists():
        try:
            branch = (await _git(path, "rev-parse", "--abbrev-ref", "HEAD")).strip() or branch
        except GitError:
            pass
    return Worktree(
        task_id=task_id,
        path=path,
        workdir=Path(record["workdir"]),
        branch=branch,
        base_commit=record["base_commit"],
    )


async def finish_worktree(worktree: Worktree, task_id: str, step_id: str | None) -> Worktree:
    """Commits the worker's changes on its branch, renames a provisional branch after the claimed step
    and records the changed files (relative to the repository root)."""
    path = worktree.path
    if not path.exists():
        return worktree
    if await _git(path, "status", "--porcelain"):
        await _git(path, "add", "-A")
        title = f"soong-agent worker: task {task_id}" + (f", step {step_id}" if step_id else "")
        await _git(path, *_IDENTITY, "commit", "--quiet", "--no-verify", "-m", title)
    if step_id is not None and not _is_branch_of(worktree.branch, step_branch(task_id, step_id)):
        target = await _free_branch(path, step_branch(task_id, step_id))
        await _git(path, "branch", "-m", worktree.branch, target)
        worktree.branch = target
    names = await _git(path, "diff", "--name-only", f"{worktree.base_commit}..HEAD")
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
    repo = await _repo_root(resolve_dir(project))
    await _git(repo, "worktree", "remove", "--force", str(path))


async def discard_worktree(worktree: Worktree) -> None:
    """Removes a worktree whose dispatch never started a run, and its branch (it holds nothing)."""
    outside = worktree.path.parent  # inside the main work tree, outside the one being removed
    try:
        await _git(outside, "worktree", "remove", "--force", str(worktree.path))
        await _git(outside, "branch", "-D", worktree.branch)
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
            payload = AgentCoreError(
                ErrorCode.storage_error, f"cannot remove worktree {path}: {exc}", details={"path": str(path)}
            ).to_payload()
            result.failures.append(CleanupFailure(item=item, error=payload))
            continue
        result.deleted.append(item)
    result.partial_failure = bool(result.failures)
    return result
