"""Task board injection, Task events, restore on resume and Task inspection through the runtime
(docs/task-board.md#restore-and-replay, docs/task-board.md#events, docs/task-board.md#the-board-summary;
docs/context.md; docs/runs.md; cases K1, K44, K47, K48 runtime halves)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_core.types.content import text_of
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import (
    Router,
    Stubborn,
    create_args,
    error_code,
    events,
    finish,
    result_json,
    result_of,
    roomy,
    step,
    tasks_dir,
    wal_lines,
    watch,
)
from tests.fixtures.runtime import collect, open_runtime


def board_of(request: ModelRequest) -> str | None:
    """The ``<task_board>`` message text of a request (must be the last message), else ``None``."""
    boards = [m for m in request.messages if text_of(m.content).startswith("<task_board>")]
    if not boards:
        return None
    assert boards[-1] is request.messages[-1]
    assert boards[-1].role == "user"
    assert boards[-1].metadata.get("synthetic") is True and boards[-1].metadata.get("source") == "task_board"
    return text_of(boards[-1].content)


async def test_task_create_through_the_loop(soong_env: SoongEnv) -> None:
    """Case K1."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(
            (
                "agent.task_create",
                {**create_args("t1", step("s1"), step("s2", "s1")), "wal_name": "work"},
                "c1",
            ),
            ("agent.task_create", {**create_args("t2", step("x")), "wal_name": "other.wal.jsonl"}, "c2"),
        ),
        tool_calls(("agent.task_get", {"task_id": "t1"}, "get")),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    directory = tasks_dir(soong_env, run.session_id)
    assert sorted(p.name for p in directory.iterdir()) == ["other.wal.jsonl", "work.wal.jsonl"]
    lines = wal_lines(soong_env, run.session_id, "work")
    first = lines[0]
    assert first["event_type"] == "task_created" and first["wal_seq"] == 1
    snapshot = first["payload"]["task"]
    assert snapshot["status"] == "pending" and [s["status"] for s in snapshot["steps"]] == [
        "pending",
        "pending",
    ]
    assert snapshot["wal_path"] == str(directory / "work.wal.jsonl")
    assert {
        "task_id",
        "wal_path",
        "title",
        "summary",
        "status",
        "root_step_ids",
        "steps",
        "created_by_agent_id",
        "created_by_run_id",
        "created_at",
        "updated_at",
    } <= set(snapshot)
    fields = {
        "wal_seq",
        "session_id",
        "event_id",
        "event_type",
        "actor_agent_id",
        "actor_run_id",
        "task_id",
        "step_id",
        "payload",
        "created_at",
    }
    for index, line in enumerate(lines, start=1):
        assert set(line) == fields and line["wal_seq"] == index
        assert (line["actor_agent_id"], line["actor_run_id"]) == (run.agent_id, run.run_id)
        assert line["session_id"] == run.session_id and line["created_at"].endswith("Z")
    created = result_json(result_of(router, "c1"))
    assert created["wal_path"] == str(directory / "work.wal.jsonl")
    assert created["wal_event_ids"] == [line["event_id"] for line in lines]
    assert created["task"]["status"] == "running"
    assert result_json(result_of(router, "get"))["wal_path"] == str(directory / "work.wal.jsonl")


async def test_task_events_are_debug_only(soong_env: SoongEnv) -> None:
    """Case K47."""
    fake = FakeProvider()
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        text("one"),
        tool_calls(("agent.task_create", create_args("t2", step("s1")), "c2")),
        text("two"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        plain = await rt.start("go", mode="orchestrator")
        plain_events = await collect(plain)
        debug = await rt.start("go", session_id=plain.session_id, mode="orchestrator")
        debug_events = await collect(debug, debug=True)
        replay = await rt.replay_session(plain.session_id)
    assert not [e for e in plain_events if e.event_type.value.startswith("task_")]
    assert not [e for e in plain_events if str(e.data.get("tool_name", "")).startswith("agent.task_")]
    debug_task = [e for e in debug_events if e.event_type.value.startswith("task_")]
    assert [e.event_type.value for e in debug_task] == ["task_created", "task_step_ready", "task_running"]
    for event in debug_task:
        assert event.data["wal_event_id"].startswith("evt_") and event.data["wal_seq"] >= 1
    replayed = [e.event_type.value for e in replay.events if e.event_type.value.startswith("task_")]
    assert replayed.count("task_created") == 2


async def test_board_in_orchestrator_requests(soong_env: SoongEnv) -> None:
    """Case K48."""
    stubborn = Stubborn()
    fake = FakeProvider()
    long = " ".join(["detail"] * 40)
    ready = [step(f"q{i}", summary=f"Ready step {i} {long}") for i in range(8)]
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("blk"), step("run1"), *ready), "c1")),
        tool_calls(
            (
                "agent.task_update_step",
                {"task_id": "t1", "step_id": "blk", "status": "blocked", "reason": "r"},
                "b",
            )
        ),
        tool_calls(
            (
                "agent.dispatch_worker",
                {
                    "task_id": "t1",
                    "instruction": "job:run",
                    "allowed_step_ids": ["run1"],
                    "timeout_ms": 300,
                    "allowed_tools": [Stubborn.NAME],
                },
                "d",
            )
        ),
        text("looking at the board"),
        tool_calls(("agent.task_cancel", {"task_id": "t1"}, "cancel")),
        text("done"),
    )
    router.job(
        "run",
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "run1"}, "w1")),
        tool_calls(
            ("agent.task_update_step", {"task_id": "t1", "step_id": "run1", "status": "running"}, "w2")
        ),
        tool_calls((Stubborn.NAME, {})),
        text("{}"),
    )
    config = roomy({"agents": {"child_cancel_timeout_ms": 200}, "context": {"task_board_token_budget": 260}})
    async with open_runtime(soong_env, fake, config=config) as rt:
        stubborn.register(rt)
        run = await rt.start("go", mode="orchestrator")

        def cancel_requested(event: Any) -> bool:
            return event.data.get("reason") == "task_cancelled"

        try:
            await asyncio.wait_for(watch(run, cancel_requested, stubborn.release.set), 20)
        finally:
            stubborn.release.set()
        await finish(run)
    worker_agent = result_json(result_of(router, "d"))["child_agent_id"]
    first = board_of(router.orchestrator_requests[1])
    assert first is not None and "task_id=t1" in first
    board = board_of(router.orchestrator_requests[3])
    assert board is not None
    blocked_at = board.index("step_id=blk")
    running_at = board.index("step_id=run1 status=running")
    assert blocked_at < running_at
    assert f"claimed_by_agent_id={worker_agent}" in board
    assert "lease_expires_at=20" in board and "worker_pool_id=default" in board
    listed_ready = sum(1 for i in range(8) if f"step_id=q{i} " in board)
    assert listed_ready < 8 and "Trimmed to status counts" in board
    assert "ready: 8" in board
    # the worker's board is scoped to its dispatch Task and in-scope steps
    (worker_run,) = router.worker_requests
    worker_board = board_of(router.worker_requests[worker_run][-1])
    assert worker_board is not None and "step_id=run1" in worker_board and "step_id=q0" not in worker_board


async def test_completed_tasks_and_normal_runs(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t0", step("s1")), "c0")),
        tool_calls(
            ("agent.task_update_step", {"task_id": "t0", "step_id": "s1", "status": "completed"}, "u0")
        ),
        tool_calls(("agent.task_complete", {"task_id": "t0"}, "done0")),
        tool_calls(("agent.task_create", create_args("t1", step("x1")), "c1")),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
        fake.script(text("normal"))
        normal = await rt.start("hello", mode="normal")
        await finish(normal)
    assert not result_of(router, "done0").is_error
    board = board_of(router.orchestrator_requests[-1])
    assert board is not None
    assert "Task t1 [running]" in board and "Task t0 [" not in board
    assert "t0 task_completed" in board  # only among recent changes
    assert board_of(fake.requests[-1]) is None


async def test_restore_on_resume_before_the_first_request(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    Router(fake).orch(tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")), text("created"))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    fake2 = FakeProvider()
    router2 = Router(fake2).orch(tool_calls(("agent.task_get", {"task_id": "t1"}, "get")), text("ok"))
    async with open_runtime(soong_env, fake2, config=roomy()) as rt:
        resumed = await rt.start("again", session_id=run.session_id, mode="orchestrator")
        await finish(resumed)
    board = board_of(router2.orchestrator_requests[0])
    assert board is not None and "step_id=s1 status=ready" in board
    assert result_json(result_of(router2, "get"))["status"] == "running"
    replayed = events(soong_env, run.session_id, "task_wal_replayed")
    assert len(replayed) == 1
    assert replayed[0]["run_id"] is None and replayed[0]["agent_id"] is None
    assert replayed[0]["payload"]["task_id"] == "t1" and replayed[0]["payload"]["records"] == 3
    model_started = events(soong_env, run.session_id, "model_started")
    assert replayed[0]["seq"] < next(e for e in model_started if e["run_id"] == resumed.run_id)["seq"]


async def test_corrupt_wal_is_unavailable_while_replay_works(soong_env: SoongEnv) -> None:
    """Case K44."""
    fake = FakeProvider()
    Router(fake).orch(
        tool_calls(
            ("agent.task_create", create_args("t1", step("s1")), "c1"),
            ("agent.task_create", create_args("t2", step("s1")), "c2"),
        ),
        text("created"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    path = tasks_dir(soong_env, run.session_id) / "t1-work.wal.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[1] = "{this is not json"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def check(views: list[Any]) -> None:
        by_path = {v.wal_path: v for v in views}
        broken = by_path[str(path)]
        assert broken.task is None and broken.error is not None
        assert broken.error.code == "task_wal_unavailable"
        healthy = by_path[str(path.with_name("t2-work.wal.jsonl"))]
        assert healthy.error is None and healthy.task is not None and healthy.status == "running"

    fake2 = FakeProvider()
    router2 = Router(fake2).orch(
        tool_calls(("agent.task_get", {"task_id": "t1"}, "g1"), ("agent.task_get", {"task_id": "t2"}, "g2")),
        text("ok"),
    )
    async with open_runtime(soong_env, fake2, config=roomy()) as rt:
        before = await rt.replay_session(run.session_id)
        check(before.tasks)
        assert [n.node_id for n in before.nodes]  # the conversation still replays
        resumed = await rt.start("again", session_id=run.session_id, mode="orchestrator")
        await finish(resumed)
        after = await rt.replay_session(run.session_id)
    check(after.tasks)
    assert len(after.nodes) > len(before.nodes)
    block = result_of(router2, "g1")
    assert error_code(block) == "task_wal_unavailable"
    assert not result_of(router2, "g2").is_error
    failed = events(soong_env, run.session_id, "task_wal_failed")
    assert len(failed) == 1 and failed[0]["payload"]["phase"] == "replay"
    assert failed[0]["payload"]["wal_path"] == str(path)
    assert json.loads(failed[0]["payload_json"])["error"]["code"] in ("storage_error", "task_wal_unavailable")


async def test_delete_session_keeps_wals_and_cleanup_is_explicit(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    Router(fake).orch(
        tool_calls(
            ("agent.task_create", create_args("ok", step("s1")), "c1"),
            ("agent.task_create", create_args("bad", step("s1")), "c2"),
            ("agent.task_create", create_args("stop", step("s1")), "c3"),
            ("agent.task_create", create_args("live", step("s1")), "c4"),
        ),
        tool_calls(
            ("agent.task_update_step", {"task_id": "ok", "step_id": "s1", "status": "completed"}, "u")
        ),
        tool_calls(
            ("agent.task_complete", {"task_id": "ok"}, "t_ok"),
        ),
        tool_calls(("agent.task_fail", {"task_id": "bad"}, "t_bad")),
        tool_calls(("agent.task_cancel", {"task_id": "stop"}, "t_stop")),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
        directory = tasks_dir(soong_env, run.session_id)
        names = sorted(p.name for p in directory.iterdir())
        assert names == [
            "bad-work.wal.jsonl",
            "live-work.wal.jsonl",
            "ok-work.wal.jsonl",
            "stop-work.wal.jsonl",
        ]
        deleted = await rt.delete_session(run.session_id)
        assert deleted.deleted
        assert sorted(p.name for p in directory.iterdir()) == names
        default = await rt.cleanup_project_tasks(soong_env.project)
        assert default.dry_run and [c.id for c in default.candidates] == ["ok"]
        assert sorted(p.name for p in directory.iterdir()) == names
        everything = await rt.cleanup_project_tasks(
            soong_env.project, dry_run=False, include_failed=True, include_cancelled=True
        )
        assert sorted(c.id for c in everything.deleted) == ["bad", "ok", "stop"]
    assert sorted(p.name for p in directory.iterdir()) == ["live-work.wal.jsonl"]
