"""Autonomous teammates (issue 36 item 3, S17): with no Orchestrator run live, an idle autonomous teammate
claims the ready steps of its lead's Task board in its worker pool, one run per step, with the board's
claim rules and leases; a board change wakes it; a step it leaves unfinished fails by the run-end
fallback."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agent_core.testing import CallTool, ModelReply, ModelRequest
from tests.integration.team_support import Cast, settled, team_runtime, texts, until

CLAIMED = re.compile(r'<auto_claimed task_id="([^"]+)" step_id="([^"]+)"')
POOLS = {
    "worker_pools": [
        {
            "pool_id": "default",
            "workers": [{"worker_id": "w1", "agent_definition_id": "default_worker_agent"}],
        },
        {"pool_id": "docs", "workers": [{"worker_id": "d1", "agent_definition_id": "default_worker_agent"}]},
    ]
}


def step(step_id: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "step_id": step_id,
        "title": f"Step {step_id}",
        "summary": f"Do {step_id}",
        "depends_on_step_ids": list(deps),
        **extra,
    }


def create(task_id: str, *steps: dict[str, Any]) -> CallTool:
    args = {
        "task_id": task_id,
        "wal_name": f"{task_id}-work",
        "title": f"Task {task_id}",
        "summary": "work",
        "steps": list(steps),
    }
    return CallTool("agent.task_create", args)


def worker(done: list[tuple[str, str]], *, finish: bool = True) -> Any:
    """A teammate that completes every step it claimed (or leaves it, ``finish=False``)."""

    def reply(request: ModelRequest) -> ModelReply | str:
        claimed = next((CLAIMED.search(t) for t in reversed(texts(request)) if CLAIMED.search(t)), None)
        if claimed is None:
            return "ready to help"
        task_id, step_id = claimed.groups()
        if request.messages[-1].role == "tool" or not finish:
            done.append((task_id, step_id))
            return f"finished {step_id}"
        return ModelReply(
            tool_calls=[
                CallTool(
                    "agent.task_update_step",
                    {
                        "task_id": task_id,
                        "step_id": step_id,
                        "status": "completed",
                        "result_summary": f"{step_id} ok",
                    },
                )
            ]
        )

    return reply


def steps_of(view: Any) -> dict[str, dict[str, Any]]:
    return {s["step_id"]: s for s in view.task["steps"]}


async def test_an_autonomous_teammate_claims_ready_steps_without_an_orchestrator_run(tmp_path: Path) -> None:
    done: list[tuple[str, str]] = []
    cast = Cast(
        lead=[
            lambda r: ModelReply(
                tool_calls=[
                    create("t1", step("s1"), step("s2", "s1"), step("s3", worker_pool_id="docs")),
                    CallTool(
                        "agent.team_spawn", {"name": "ada", "task": "help with the board", "autonomous": True}
                    ),
                ]
            ),
            lambda r: "the board is set up; ada will pick the steps",
            lambda r: ModelReply(tool_calls=[create("t3", step("x1"))]),
            lambda r: "one more Task",
        ],
        ada=worker(done),
    )
    async with team_runtime(tmp_path, cast, agents=POOLS) as rt:
        run = await rt.start("plan the work", mode="orchestrator")
        await run.wait()
        await until(lambda: len(done) == 2)
        await settled(rt, run.session_id)
        (ada,) = await rt.team(run.session_id)
        assert ada.autonomous and ada.worker_pool_id == "default" and ada.state == "idle"
        # s1, then s2 once s1 completed (the board change woke it); s3 is another pool's
        assert done == [("t1", "s1"), ("t1", "s2")]
        (view,) = (await rt.replay_session(run.session_id)).tasks
        steps = steps_of(view)
        assert steps["s1"]["status"] == steps["s2"]["status"] == "completed"
        assert steps["s3"]["status"] == "ready"
        claims = [e for e in view.wal_events if e["event_type"] == "task_step_claimed"]
        assert [c["step_id"] for c in claims] == ["s1", "s2"]
        assert {c["actor_agent_id"] for c in claims} == {ada.agent_id}
        # each step was worked in a run of ada's own session that started after the Orchestrator's ended
        ada_runs = (await rt.replay_session(ada.session_id)).runs
        claim_runs = [r for r in ada_runs if r.run_id in {c["actor_run_id"] for c in claims}]
        assert len(claim_runs) == 2 and all(r.status == "completed" for r in claim_runs)
        lead_runs = (await rt.replay_session(run.session_id)).runs
        assert [r.run_id for r in lead_runs] == [run.run_id]  # no Orchestrator run was started for it
        assert "worker_dispatched" not in [
            e.event_type for e in (await rt.replay_session(run.session_id)).events
        ]
        # idle with nothing ready: a new Task on the board wakes it
        more = await rt.start("add a Task", session_id=run.session_id, mode="orchestrator")
        await more.wait()
        await until(lambda: len(done) == 3)
        assert done[-1] == ("t3", "x1")


async def test_a_step_left_unfinished_fails_by_the_run_end_fallback(tmp_path: Path) -> None:
    done: list[tuple[str, str]] = []
    cast = Cast(
        lead=[
            lambda r: ModelReply(
                tool_calls=[
                    create("t2", step("s1")),
                    CallTool("agent.team_spawn", {"name": "ada", "task": "help", "autonomous": True}),
                ]
            ),
            lambda r: "set up",
        ],
        ada=worker(done, finish=False),
    )
    async with team_runtime(tmp_path, cast, agents=POOLS) as rt:
        run = await rt.start("plan", mode="orchestrator")
        await run.wait()
        await until(lambda: len(done) == 1)
        await settled(rt, run.session_id)
        (view,) = (await rt.replay_session(run.session_id)).tasks
        s1 = steps_of(view)["s1"]
        assert (
            s1["status"] == "failed" and s1["status_reason"] == "worker_finished_without_terminal_step_status"
        )
        assert done == [("t2", "s1")]  # a failed step is not claimed again


async def test_autonomy_needs_an_orchestrator_lead_and_residency(tmp_path: Path) -> None:
    cast = Cast(
        lead=[
            lambda r: ModelReply(
                tool_calls=[CallTool("agent.team_spawn", {"name": "ada", "task": "x", "autonomous": True})]
            ),
            lambda r: "tried",
        ]
    )
    async with team_runtime(tmp_path, cast) as rt:
        run = await rt.start("plan")
        await run.wait()
        refused = str(cast.requests("lead")[1].messages[-1].content)
        assert "only an Orchestrator lead has one" in refused
        assert await rt.team(run.session_id) == []
