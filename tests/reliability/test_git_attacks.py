"""Git-driven code execution (issue 31 item 1): a worker confined to its worktree must not make the runtime
run code on the host through the git commands that commit its work.

git01: the worker writes a git directory ``evil/`` whose config defines a clean filter, fsmonitor and hooks,
a ``.gitattributes`` selecting the filter, and replaces the worktree's ``.git`` file with ``gitdir: evil``.
git02: the repository's own config (as if written earlier) defines a clean filter, ``core.fsmonitor``,
``core.hooksPath`` with a post-commit hook and a textconv driver; the worker only adds a ``.gitattributes``.
Both through the public runtime (an Orchestrator dispatching a worker with ``worker_isolation =
"worktree"``, every permission answered ``allow_once``); nothing may run, the worker's work is committed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import (
    WORKER_TOOLS,
    Router,
    create_args,
    finish,
    result_json,
    result_of,
    roomy,
    step,
    two_workers,
    worker_result,
)
from tests.fixtures.runtime import open_runtime
from tests.fixtures.tool_pipeline import PermissionRecorder

TOOLS = [*WORKER_TOOLS, "code.write_file"]
DONE = '{"status": "completed", "summary": "worker finished"}'


def git(cwd: Path, *args: str) -> str:
    env = {
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(cwd),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True)
    return done.stdout


def init_repo(project: Path) -> None:
    git(project, "init", "-q", "-b", "main")
    (project / "shared.txt").write_text("original\n", encoding="utf-8")
    git(project, "add", "shared.txt")
    git(project, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "base")


def marker_command(marker: Path) -> str:
    return f"touch {marker}; cat"


def write(path: str, content: str, call_id: str) -> Any:
    return tool_calls(("code.write_file", {"path": path, "content": content, "overwrite": True}, call_id))


def worker_job(*writes: tuple[str, str]) -> list[Any]:
    turns: list[Any] = [tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "claim"))]
    for index, (path, content) in enumerate(writes):
        turns.append(write(path, content, f"w{index}"))
    turns += [
        tool_calls(
            (
                "agent.task_update_step",
                {"task_id": "t1", "step_id": "s1", "status": "completed", "result_summary": "done"},
                "upd",
            )
        ),
        text(DONE),
    ]
    return turns


async def run_worker(env: SoongEnv, writes: list[tuple[str, str]]) -> tuple[Router, dict[str, Any]]:
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(
            (
                "agent.dispatch_worker",
                {"task_id": "t1", "instruction": "job:a", "allowed_step_ids": ["s1"], "allowed_tools": TOOLS},
                "d1",
            )
        ),
        text("done"),
    )
    router.job("a", *worker_job(*writes))
    allow = PermissionRecorder.always("allow_once")
    config = roomy(two_workers(worker_isolation="worktree"))
    async with open_runtime(env, fake, config=config, permission_callback=allow) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    for index in range(len(writes)):
        block = worker_result(router, f"w{index}")
        assert not block.is_error, block.model_dump()
    return router, result_json(result_of(router, "d1"))


async def test_git01_worker_swaps_the_worktree_gitdir_for_its_own(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    init_repo(soong_env.project)
    marker = tmp_path / "PWNED-git01"
    hook_marker = tmp_path / "PWNED-git01-hook"
    evil_config = (
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
        f"\tfsmonitor = {tmp_path}/fsmonitor.sh\n\thooksPath = hooks\n"
        f'[filter "x"]\n\tclean = {marker_command(marker)}\n\tsmudge = cat\n\trequired = true\n'
    )
    (tmp_path / "fsmonitor.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    (tmp_path / "fsmonitor.sh").chmod(0o755)
    writes = [
        ("evil/HEAD", "ref: refs/heads/main\n"),
        ("evil/config", evil_config),
        ("evil/objects/info/keep", ""),
        ("evil/refs/heads/keep", ""),
        ("evil/hooks/post-commit", f"#!/bin/sh\ntouch {hook_marker}\n"),
        (".gitattributes", "* filter=x\n"),
        ("work.txt", "the worker's work\n"),
        (".git", "gitdir: evil\n"),
    ]
    _, result = await run_worker(soong_env, writes)
    tree = result["worktree"]
    assert not marker.exists(), "git ran the worker's clean filter (or fsmonitor) on the host"
    assert not hook_marker.exists(), "git ran the worker's hook on the host"
    assert "error" not in tree, tree
    assert tree["git_file_restored"] is True
    assert "work.txt" in tree["changed_files"]
    path = Path(tree["path"])
    assert (path / ".git").read_text().startswith("gitdir: ") and "evil" not in (path / ".git").read_text()
    # the commit is on the runtime's branch in the real repository, with the worker's content unfiltered
    assert git(soong_env.project, "cat-file", "-p", f"{tree['branch']}:work.txt") == "the worker's work\n"
    assert not marker.exists()


async def test_git02_repository_config_cannot_run_code_at_finish(soong_env: SoongEnv, tmp_path: Path) -> None:
    init_repo(soong_env.project)
    (soong_env.project / ".gitattributes").write_text("*.txt filter=x diff=t\n*.dat filter=y\n")
    git(soong_env.project, "add", ".gitattributes")
    git(soong_env.project, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "attrs")
    marker = tmp_path / "PWNED-git02"
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    for name in ("post-commit", "pre-commit", "prepare-commit-msg", "post-checkout", "post-index-change"):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (hooks / name).chmod(0o755)
    monitor = tmp_path / "fsmonitor.sh"
    monitor.write_text(f"#!/bin/sh\necho fsmonitor >> {marker}\n")
    monitor.chmod(0o755)
    repo_config = soong_env.project / ".git" / "config"
    repo_config.write_text(
        repo_config.read_text()
        + f"[core]\n\tfsmonitor = {monitor}\n\thooksPath = {hooks}\n"
        + f'[filter "x"]\n\tclean = echo clean >> {marker}; cat\n\tsmudge = echo smudge >> {marker}; cat\n'
        + f'[filter "y"]\n\tprocess = echo process >> {marker}\n\trequired = true\n'
        + f'[diff "t"]\n\ttextconv = echo textconv >> {marker}; cat\n'
        + "[commit]\n\tgpgSign = true\n[gpg]\n"
        + f"\tprogram = {hooks}/post-commit\n"
    )
    writes = [("work.txt", "filtered?\n"), ("blob.dat", "data\n")]
    _, result = await run_worker(soong_env, writes)
    tree = result["worktree"]
    assert not marker.exists(), f"git ran repository-configured programs: {marker.read_text()!r}"
    assert "error" not in tree, tree
    assert sorted(tree["changed_files"]) == ["blob.dat", "work.txt"]
    assert git(soong_env.project, "cat-file", "-p", f"{tree['branch']}:work.txt") == "filtered?\n"
