"""What a teammate shares with its lead and what it does not (issue 36 item 2): it spends the lead's
``[limits]`` budget, asks through the same permission gate, and with ``isolation="worktree"`` writes only
into its own git worktree, committed on ``soong/team/<name>``."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from agent_core import EndReason, PermissionDecision, PermissionRequest, RunStatus, ToolDefinition
from agent_core.testing import CallTool, ModelReply, ModelRequest, open_runtime
from tests.integration.team_support import Cast, settled, team_runtime, until


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(cwd), "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True).stdout


async def test_teammates_spend_the_leads_limits_budget(tmp_path: Path) -> None:
    noops: list[str] = []
    spent = asyncio.Event()

    def noop(_args: dict[str, Any], ctx: Any) -> str:
        noops.append(ctx.session_id)
        if len(noops) == 2:
            spent.set()
        return "ok"

    async def lead_waits(request: ModelRequest) -> ModelReply:
        await spent.wait()  # alice spent two of the three tool calls meanwhile
        return ModelReply(tool_calls=[CallTool("test.noop", {})])

    cast = Cast(
        lead=[
            lambda r: ModelReply(
                tool_calls=[CallTool("agent.team_spawn", {"name": "alice", "task": "work"})]
            ),
            lead_waits,
            lambda r: "out of budget",
        ],
        alice=[
            lambda r: ModelReply(tool_calls=[CallTool("test.noop", {}), CallTool("test.noop", {})]),
            lambda r: "done",
        ],
    )
    async with team_runtime(tmp_path, cast, limits={"max_tool_calls": 3}) as rt:
        rt.register_tool(
            ToolDefinition(
                name="test.noop", description="noop", input_schema={"type": "object"}, permission="readonly"
            ),
            noop,
        )
        run = await rt.start("start alice")
        assert await run.wait() == RunStatus.completed
        assert run.end_reason == EndReason.limit_reached and run.error is not None
        # 1 spawn by the lead + 2 calls by alice spent the budget: the lead's next call would be the 4th
        assert run.error.details["limit"] == "max_tool_calls" and run.error.details["used"] == 4
        (alice,) = await rt.team(run.session_id)
        assert noops == [alice.session_id] * 2  # the lead's own third call was refused


async def test_a_worktree_teammate_writes_only_its_branch_and_asks_the_same_gate(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    git(project, "init", "-q", "-b", "main")
    (project / "shared.txt").write_text("original\n", encoding="utf-8")
    git(project, "add", "shared.txt")
    git(project, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "base")
    asked: list[PermissionRequest] = []

    async def gate(request: PermissionRequest) -> PermissionDecision:
        asked.append(request)
        return PermissionDecision(decision="allow_once")

    write = {"path": "shared.txt", "content": "by alice\n", "overwrite": True}
    cast = Cast(
        lead=[
            lambda r: ModelReply(
                tool_calls=[
                    CallTool("agent.team_spawn", {"name": "alice", "task": "edit", "isolation": "worktree"})
                ]
            ),
            lambda r: "alice is editing",
        ],
        alice=[lambda r: ModelReply(tool_calls=[CallTool("code.write_file", write)]), lambda r: "edited"],
    )
    config = {"agents": {"max_teammates_per_session": 2}}
    async with open_runtime(
        cast.model, project_dir=project, home_dir=tmp_path / "home", config=config, permission_callback=gate
    ) as rt:
        run = await rt.start("start alice")
        await run.wait()
        await until(lambda: len(cast.requests("alice")) == 2)
        await settled(rt, run.session_id)
        (alice,) = await rt.team(run.session_id)
    assert alice.isolation == "worktree" and alice.branch == "soong/team/alice"
    assert (project / "shared.txt").read_text() == "original\n"  # the lead's checkout is untouched
    assert git(project, "show", "soong/team/alice:shared.txt") == "by alice\n"  # committed on its branch
    (request,) = asked  # the teammate's write asked the runtime's (the lead's) permission callback
    assert request.session_id == alice.session_id and request.tool_name == "code.write_file"
    assert str(project / ".soong-agent" / "worktrees") in request.cwd
