"""Worktree isolation of dispatched workers (docs/multi-agent.md#worktree-isolation, issue 22): two workers
dispatched in parallel on one Task edit the same file in their own worktrees and branches without conflict; a
non-git project fails dispatch with a clear ``config_error``; Task cleanup removes the worktrees and
keeps the branches."""

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
    error_code,
    events,
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
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(cwd), "GIT_TERMINAL_PROMPT": "0"}
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True)
    return done.stdout


def init_repo(project: Path) -> None:
    git(project, "init", "-q", "-b", "main")
    (project / "shared.txt").write_text("original\n", encoding="utf-8")
    git(project, "add", "shared.txt")
    git(project, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "base")


def edit_job(step_id: str, content: str) -> list[Any]:
    prefix = f"{step_id}_"
    return [
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": step_id}, f"{prefix}claim")),
        tool_calls(
            (
                "code.write_file",
                {"path": "shared.txt", "content": content, "overwrite": True},
                f"{prefix}write",
            )
        ),
        tool_calls(
            (
                "agent.task_update_step",
                {"task_id": "t1", "step_id": step_id, "status": "completed", "result_summary": "edited"},
                f"{prefix}upd",
            )
        ),
        text(DONE),
    ]


def dispatch(call_id: str, **args: Any) -> tuple[str, dict[str, Any], str]:
    return ("agent.dispatch_worker", {"task_id": "t1", "instruction": "work", **args}, call_id)


async def test_parallel_workers_edit_the_same_file_in_their_own_worktrees(soong_env: SoongEnv) -> None:
    init_repo(soong_env.project)
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c_create")),
        tool_calls(
            dispatch("d1", instruction="job:a", allowed_step_ids=["s1"], allowed_tools=TOOLS),
            dispatch("d2", instruction="job:b", allowed_tools=TOOLS),
        ),
        tool_calls(("agent.task_complete", {"task_id": "t1", "result_summary": "both edits"}, "c_done")),
        text("done"),
    )
    router.job("a", *edit_job("s1", "from worker one\n"))
    router.job("b", *edit_job("s2", "from worker two\n"))
    config = roomy(two_workers(worker_isolation="worktree"))
    allow = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, config=config, permission_callback=allow) as rt:
        run = await rt.start("go", mode="orchestrator")
        assert (await finish(run)).value == "completed"
        first, second = result_json(result_of(router, "d1")), result_json(result_of(router, "d2"))
        assert not worker_result(router, "s1_write").is_error, worker_result(router, "s1_write").model_dump()
        assert not worker_result(router, "s2_write").is_error
        # both ran at once
        starts = [e for e in events(soong_env, run.session_id, "loop_started") if e["run_id"] != run.run_id]
        assert len(starts) == 2
        # the main checkout is untouched; each branch carries its own edit of the same file
        assert (soong_env.project / "shared.txt").read_text(encoding="utf-8") == "original\n"
        trees = {}
        for res, step_id, content in (
            (first, "s1", "from worker one\n"),
            (second, "s2", "from worker two\n"),
        ):
            tree = res["worktree"]
            assert res["claimed_step_id"] == step_id and res["step_status"] == "completed"
            assert tree["branch"] == f"soong/t1/{step_id}"
            assert tree["changed_files"] == ["shared.txt"]
            path = Path(tree["path"])
            assert path.parent == (soong_env.project / ".soong-agent" / "worktrees").resolve()
            assert (path / "shared.txt").read_text(encoding="utf-8") == content
            assert git(soong_env.project, "show", f"{tree['branch']}:shared.txt") == content
            trees[step_id] = path
        assert git(soong_env.project, "rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
        # cleanup of the (now terminal) Task removes the worktrees; the branches stay
        dry = await rt.cleanup_project_tasks(soong_env.project, dry_run=True)
        assert sorted(i.path for i in dry.candidates if i.kind == "worktree") == sorted(
            str(p) for p in trees.values()
        )
        assert all(p.exists() for p in trees.values())
        done = await rt.cleanup_project_tasks(soong_env.project, dry_run=False)
        assert sorted(i.path for i in done.deleted if i.kind == "worktree") == sorted(
            str(p) for p in trees.values()
        )
        assert not any(p.exists() for p in trees.values())
    branches = git(soong_env.project, "branch", "--list", "soong/*").split()
    assert branches == ["soong/t1/s1", "soong/t1/s2"]
    assert "worktrees" not in git(soong_env.project, "worktree", "list")


async def test_non_git_project_fails_dispatch_with_config_error(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(dispatch("d1", instruction="job:a")),
        text("done"),
    )
    config = roomy(two_workers(worker_isolation="worktree"))
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    block = result_of(router, "d1")
    assert error_code(block) == "config_error"
    assert block.error is not None
    assert "agents.worker_isolation" in block.error.message and "git" in block.error.message
    assert not router.worker_requests, "no worker run may start"
    assert not (soong_env.project / ".soong-agent" / "worktrees").exists()


async def test_worktree_directory_behind_a_symlink_out_of_the_project_is_refused(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    from agent_core._orchestrator.worktrees import create_worktree
    from agent_core.errors import AgentCoreError

    init_repo(soong_env.project)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (soong_env.project / ".soong-agent").symlink_to(elsewhere, target_is_directory=True)
    try:
        await create_worktree(soong_env.project, "t1", "s1")
    except AgentCoreError as exc:
        assert exc.code.value == "path_conflict" and "agents.worker_isolation" in exc.message
    else:
        raise AssertionError("a worktree directory outside the project must be refused")
    assert list(elsewhere.iterdir()) == []
    assert "soong/" not in git(soong_env.project, "branch", "--list")
