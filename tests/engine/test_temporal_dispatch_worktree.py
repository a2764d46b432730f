"""A retried dispatch step commits the worker's git worktree (docs/scale-out.md,
docs/multi-agent.md#worktree-isolation; issue 21).

With ``agents.worker_isolation = "worktree"`` one ``soong-agent worker`` process executes the Orchestrator
run and the worker run it dispatched. It is SIGKILLed during the worker run's first tool call, after a
replacement started: the replacement continues the worker run (which then writes a file in its worktree)
and the Orchestrator's dispatch step, retried there, attaches to it. When the worker run ended, the retried
step commits the worktree on the step's branch and reports it in the dispatch result, as the local engine
(and an uncrashed dispatch) does.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentRuntime, RunStatus
from agent_core.testing import ScriptedOpenAIServer, ScriptedRequest
from agent_core.types.permissions import PermissionDecision, PermissionRequest
from tests.engine._temporal_harness import (
    TOOL,
    Script,
    replace_worker,
    scripted_server,
    start_worker,
    tool_log,
    wait_for,
    worker_env,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

CONTENT = "written by the worker\n"


class WritingScript(Script):
    """The orchestrator crash test's session, the worker also writing ``out.txt`` (its third turn)."""

    def orchestrator(self, req: ScriptedRequest, turn: int) -> list[str]:
        if turn == 1:
            args = {
                "task_id": "t1",
                "instruction": "job:s1 do it",
                "worker_agent_id": "w1",
                "allowed_tools": [
                    "agent.task_get",
                    "agent.task_claim_step",
                    "agent.task_update_step",
                    "code.write_file",
                    TOOL,
                ],
            }
            return self.call(req, "o_dispatch", "dispatch_worker", args)
        return super().orchestrator(req, turn)

    def worker(self, req: ScriptedRequest, turn: int) -> list[str]:
        if turn == 2:
            args = {"path": "out.txt", "content": CONTENT, "overwrite": True}
            return self.call(req, "w_write", "write_file", args)
        return super().worker(req, turn)


@pytest.fixture
def scripted() -> Iterator[tuple[ScriptedOpenAIServer, WritingScript]]:
    script = WritingScript()
    with scripted_server(script) as server:
        yield server, script


def git(cwd: Path, *args: str) -> str:
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(cwd), "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env, check=True).stdout


def dispatch_result(env: SoongEnv, session_id: str) -> dict[str, Any]:
    for node in rows(
        env, f'SELECT content_json FROM "nodes_{session_id}" WHERE role = ? ORDER BY node_seq', "tool"
    ):
        for block in json.loads(node["content_json"]):
            if block.get("tool_call_id") == "o_dispatch":
                assert not block.get("is_error"), block
                data: dict[str, Any] = next(c["data"] for c in block["content"] if c.get("type") == "json")
                return data
    raise AssertionError("no result of the dispatch")


@pytest.mark.timeout(900)
async def test_a_retried_dispatch_step_commits_the_workers_worktree(
    soong_env: SoongEnv,
    temporal_server: TemporalServer,
    scripted: tuple[ScriptedOpenAIServer, WritingScript],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, _script = scripted
    project = soong_env.project
    git(project, "init", "-q", "-b", "main")
    (project / "out.txt").write_text("original\n", encoding="utf-8")
    git(project, "add", "out.txt")
    git(project, "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-q", "-m", "base")
    # pool "default" has worker w1
    extra_env = worker_env(soong_env, temporal_server, server.base_url, monkeypatch)
    config = dict(soong_env.config)
    config["model"] = {**config["model"], "context_window": 200_000}
    config["agents"] = {
        **config.get("agents", {}),
        "default_child_timeout_ms": 300_000,
        "worker_isolation": "worktree",
    }
    config["permissions"] = {"rules": [{"tool": "code.write_file", "decision": "allow"}]}
    soong_env.write_config(**config)

    async def allow(_request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(decision="allow_once")

    worker = start_worker(soong_env, extra_env)
    try:
        async with AgentRuntime(project_dir=project, permission_callback=allow) as rt:
            hold = soong_env.home / "release.hold1"
            hold.touch()  # the worker run's first tool call waits here
            run = await rt.start("do the task", mode="orchestrator")
            await wait_for(lambda: "start 1" in " ".join(tool_log(soong_env)), 120, "the tool")
            worker, _before_kill = replace_worker(soong_env, worker, extra_env, interrupted=1)
            hold.unlink()
            status = await asyncio.wait_for(run.wait(), 240)
            assert status == RunStatus.completed, run.error
    finally:
        worker.stop()
    starts = [line for line in tool_log(soong_env) if line.startswith("start 1")]
    assert len(starts) == 2, starts  # the worker run continued on the replacement
    result = dispatch_result(soong_env, run.session_id)
    assert result["claimed_step_id"] == "s1" and result["step_status"] == "completed", result
    tree = result["worktree"]
    assert tree["branch"] == "soong/t1/s1" and tree["changed_files"] == ["out.txt"], tree
    assert "error" not in tree, tree
    assert git(project, "show", "soong/t1/s1:out.txt") == CONTENT
    assert (project / "out.txt").read_text(encoding="utf-8") == "original\n"
