"""Autonomous workers (docs/multi-agent.md#autonomous-workers, issue 22): with two autonomous workers and four
ready steps every step is claimed exactly once and completed, with no ``agent.dispatch_worker`` call; a pool
without ``autonomous`` still never polls."""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from agent_core.types.model import ModelEvent, ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.fixtures.orchestrator import create_args, events, finish, first_text, roomy, step, wal_lines
from tests.fixtures.runtime import open_runtime

DONE = '{"status": "completed", "summary": "autonomous step done"}'
STEPS = ("s1", "s2", "s3", "s4")


def wait_then(predicate: Callable[[], bool], then: Turn) -> Turn:
    """An Orchestrator turn that stays open until ``predicate`` holds (the workers finished)."""

    async def turn(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        while not predicate():
            await asyncio.sleep(0.02)
        async for event in then(fake, request):
            yield event

    return turn


def completed_steps(project: Path) -> set[str]:
    import json

    out: set[str] = set()
    for path in (project / ".soong-agent" / "tasks").glob("*/t1-work.wal.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record["event_type"] == "task_step_completed":
                out.add(record["step_id"])
    return out


class Model:
    """Orchestrator: create the Task, then wait; each worker run claims and completes its one step."""

    def __init__(self, fake: FakeProvider, orchestrator: list[Turn]) -> None:
        self.orchestrator = deque(orchestrator)
        self.workers: dict[str, deque[Turn]] = {}
        self.worker_steps: dict[str, str] = {}
        self.active = 0
        self.max_active = 0
        self.orchestrator_tool_names: list[str] = []
        fake.route(self)

    def __call__(self, request: ModelRequest) -> Turn | None:
        meta = request.metadata
        run_id = str(meta.get("run_id"))
        if meta.get("purpose") == "worker":
            if run_id not in self.workers:
                match = re.search(r"Claim step (\S+) of Task (\S+) ", first_text(request))
                assert match, first_text(request)
                step_id = match.group(1)
                self.worker_steps[run_id] = step_id
                self.workers[run_id] = deque(self._job(run_id, step_id))
            queue = self.workers[run_id]
            return queue.popleft() if queue else text(DONE)
        return self.orchestrator.popleft() if self.orchestrator else None

    def _job(self, run_id: str, step_id: str) -> list[Turn]:
        claim = tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": step_id}, f"{run_id}_c"))
        update = tool_calls(
            (
                "agent.task_update_step",
                {"task_id": "t1", "step_id": step_id, "status": "completed", "result_summary": "ok"},
                f"{run_id}_u",
            )
        )

        async def counted(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                await asyncio.sleep(0.05)  # both workers are busy at once
                async for event in claim(fake, request):
                    yield event
            finally:
                self.active -= 1

        return [counted, update, text(DONE)]


def autonomous_config(autonomous: bool = True) -> dict[str, Any]:
    workers = [
        {"worker_id": "a1", "agent_definition_id": "default_worker_agent"},
        {"worker_id": "a2", "agent_definition_id": "default_worker_agent"},
    ]
    return roomy(
        {"agents": {"worker_pools": [{"pool_id": "default", "autonomous": autonomous, "workers": workers}]}}
    )


async def test_two_autonomous_workers_claim_four_steps_once_each(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    project = soong_env.project
    model = Model(
        fake,
        [
            tool_calls(("agent.task_create", create_args("t1", *(step(s) for s in STEPS)), "c_create")),
            wait_then(
                lambda: completed_steps(project) == set(STEPS),
                tool_calls(("agent.task_complete", {"task_id": "t1", "result_summary": "done"}, "c_done")),
            ),
            text("finished"),
        ],
    )
    async with open_runtime(soong_env, fake, config=autonomous_config()) as rt:
        run = await rt.start("plan four steps", mode="orchestrator")
        assert (await finish(run, timeout=30)).value == "completed"
    lines = wal_lines(soong_env, run.session_id, "t1-work")
    claimed = [r["step_id"] for r in lines if r["event_type"] == "task_step_claimed"]
    assert sorted(claimed) == list(STEPS), "every step claimed exactly once"
    assert completed_steps(project) == set(STEPS)
    assert lines[-1]["event_type"] == "task_completed"
    assert sorted(model.worker_steps.values()) == list(STEPS)  # one run per step
    # no dispatch call: the Orchestrator only created and completed the Task
    for request in fake.requests:
        if request.metadata.get("agent_type") == "orchestrator":
            for message in request.messages:
                for block in message.content:
                    assert getattr(block, "name", None) != "agent.dispatch_worker"
    dispatched = events(soong_env, run.session_id, "worker_dispatched")
    assert len(dispatched) == 4
    assert {e["payload"]["selection_reason"] for e in dispatched} == {"autonomous"}
    assert {e["payload"]["worker_agent_id"] for e in dispatched} == {"a1", "a2"}
    assert model.max_active == 2, "the two workers worked in parallel"
    assert not events(soong_env, run.session_id, "worker_dispatch_failed")


async def test_pool_without_autonomous_never_claims_by_itself(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    model = Model(
        fake,
        [
            tool_calls(("agent.task_create", create_args("t1", *(step(s) for s in STEPS)), "c_create")),
            text("created"),
        ],
    )
    async with open_runtime(soong_env, fake, config=autonomous_config(autonomous=False)) as rt:
        run = await rt.start("plan", mode="orchestrator")
        assert (await finish(run)).value == "completed"
    assert not model.workers
    lines = wal_lines(soong_env, run.session_id, "t1-work")
    assert not [r for r in lines if r["event_type"] == "task_step_claimed"]


async def test_steps_that_become_ready_later_are_taken_too(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    project = soong_env.project
    steps = [step("s1"), step("s2"), step("s3", "s1"), step("s4", "s2", "s3")]
    Model(
        fake,
        [
            tool_calls(("agent.task_create", create_args("t1", *steps), "c_create")),
            wait_then(
                lambda: completed_steps(project) == set(STEPS),
                tool_calls(("agent.task_complete", {"task_id": "t1", "result_summary": "done"}, "c_done")),
            ),
            text("finished"),
        ],
    )
    async with open_runtime(soong_env, fake, config=autonomous_config()) as rt:
        run = await rt.start("plan a chain", mode="orchestrator")
        assert (await finish(run, timeout=30)).value == "completed"
    lines = wal_lines(soong_env, run.session_id, "t1-work")
    claimed = [r["step_id"] for r in lines if r["event_type"] == "task_step_claimed"]
    assert sorted(claimed) == list(STEPS)
    assert claimed.index("s3") > claimed.index("s1") and claimed.index("s4") > claimed.index("s3")
    assert lines[-1]["event_type"] == "task_completed"
