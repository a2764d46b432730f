"""agent.task_create / agent.task_update / Orchestrator step edits, driven through the tool adapter
(docs/testing.md#case-catalogue K; docs/task-board.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_core._tasks import replay_wal
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import AgentRole, EventType, NodeType
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, statuses, step

TS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
def h(tmp_path: Path) -> TaskHarness:
    return TaskHarness(project=tmp_path.resolve(), session_id="sess_tasks", clock=ManualClock())


async def update(h: TaskHarness, *ops: dict[str, object], task_id: str = "t1") -> dict[str, object]:
    return await h.ok(h.orchestrator(), "agent.task_update", task_id=task_id, operations=list(ops))


async def update_err(h: TaskHarness, *ops: dict[str, object], task_id: str = "t1") -> object:
    return await h.err(h.orchestrator(), "agent.task_update", task_id=task_id, operations=list(ops))


# ----------------------------------------------------------------------------------------- create


async def test_create_writes_snapshot_ready_and_running(h: TaskHarness, tmp_path: Path) -> None:
    """Cases K1, K4."""
    result = await create(h, step("s1"), step("s2", "s1"))
    wal = tmp_path.resolve() / ".soong-agent" / "tasks" / "sess_tasks" / "work.wal.jsonl"
    assert wal.is_file() and result["wal_path"] == str(wal)
    lines = h.lines()
    first = lines[0]
    assert first["event_type"] == "task_created" and first["wal_seq"] == 1 and first["step_id"] is None
    snap = first["payload"]["task"]
    assert set(snap) == {
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
    }
    assert snap["status"] == "pending" and snap["wal_path"] == str(wal) and snap["root_step_ids"] == ["s1"]
    assert [s["status"] for s in snap["steps"]] == ["pending", "pending"]
    assert set(snap["steps"][0]) == {
        "step_id",
        "title",
        "summary",
        "status",
        "depends_on_step_ids",
        "required",
        "worker_pool_id",
        "claimed_by_agent_id",
        "claimed_by_run_id",
        "lease_expires_at",
        "result_summary",
        "artifact_ids",
        "updated_at",
    }
    assert [x["event_type"] for x in lines] == ["task_created", "task_step_ready", "task_running"]
    ready = lines[1]
    assert ready["step_id"] == "s1"
    assert ready["payload"] == {"previous_status": "pending", "status": "ready", "depends_on_step_ids": []}
    assert lines[2]["payload"] == {
        "previous_status": "pending",
        "status": "running",
        "reason": "auto_advance",
    }
    assert result["wal_event_ids"] == [x["event_id"] for x in lines]
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")
    assert got["wal_path"] == str(wal) and got["status"] == "running"
    # K4 second half: completing s1 makes s2 ready in the same commit.
    await finish(h, "s1")
    assert h.types()[-2:] == ["task_step_completed", "task_step_ready"]
    assert h.lines()[-1]["step_id"] == "s2"


async def test_every_line_has_exactly_the_common_fields(h: TaskHarness) -> None:
    """Case K1."""
    await create(h, step("a"), step("b", "a"))
    await finish(h, "a")
    await update(h, {"op": "update_task", "title": "new"})
    for seq, line in enumerate(h.lines(), start=1):
        assert list(line) == [
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
        ]
        assert line["wal_seq"] == seq and line["session_id"] == "sess_tasks" and line["task_id"] == "t1"
        assert line["event_id"].startswith("evt_") and TS.match(line["created_at"])
        assert (line["step_id"] is None) == (not line["event_type"].startswith("task_step_"))


async def test_wal_name_with_suffix(h: TaskHarness) -> None:
    """Case K1."""
    result = await create(h, step("a"), wal_name="work.wal.jsonl")
    assert Path(str(result["wal_path"])).name == "work.wal.jsonl"


@pytest.mark.parametrize("name", ["", ".hidden", "a/b", "../x", "/abs", "Work", "a.b", "x" * 65])
async def test_bad_wal_names_create_nothing(h: TaskHarness, name: str) -> None:
    """Case K23."""
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name=name,
        title="T",
        summary="S",
        steps=[step("a")],
    )
    assert exc.code == ErrorCode.validation_error
    assert not h.session_dir.exists() or list(h.session_dir.iterdir()) == []


async def test_path_conflict_and_duplicate_task_id(h: TaskHarness) -> None:
    """Case K2."""
    await create(h, step("a"))
    before = h.wal().read_bytes()
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t2",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a")],
    )
    assert exc.code == ErrorCode.path_conflict and h.wal().read_bytes() == before
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="other",
        title="T",
        summary="S",
        steps=[step("a")],
    )
    assert exc.code == ErrorCode.validation_error
    assert sorted(p.name for p in h.session_dir.iterdir()) == ["work.wal.jsonl"]
    # Reusing the id of a terminal Task succeeds.
    await h.ok(h.orchestrator(), "agent.task_cancel", task_id="t1")
    await create(h, step("a"), wal_name="again")
    listed = await h.ok(h.orchestrator(), "agent.task_list")
    assert [t["task_id"] for t in listed["tasks"]] == ["t1"] and listed["tasks"][0]["wal_path"].endswith(
        "again.wal.jsonl"
    )


async def test_ids_and_duplicates(h: TaskHarness) -> None:
    """Case K23."""
    for bad in ["", "a/b", "..", "A B", "x" * 65, "Up", "a.b"]:
        exc = await h.err(
            h.orchestrator(),
            "agent.task_create",
            task_id=bad,
            wal_name="w",
            title="T",
            summary="S",
            steps=[step("a")],
        )
        assert exc.code == ErrorCode.validation_error
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="w",
        title="T",
        summary="S",
        steps=[step("a"), step("a")],
    )
    assert exc.code == ErrorCode.validation_error
    assert not h.session_dir.exists() or list(h.session_dir.iterdir()) == []
    await create(h, step("collect-logs"), title="Anything Else")
    assert statuses(h) == {"collect-logs": "ready"}
    exc = await update_err(h, {"op": "add_step", "step": step("collect-logs")})
    assert exc.code == ErrorCode.validation_error and len(h.lines()) == 3


async def test_create_cycle_and_unknown_dependency_rejected(h: TaskHarness) -> None:
    """Case K3."""
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a", "b"), step("b", "a")],
    )
    assert exc.code == ErrorCode.dependency_cycle
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a", "a")],
    )
    assert exc.code == ErrorCode.dependency_cycle
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a", "zz")],
    )
    assert exc.code == ErrorCode.validation_error
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a", worker_pool_id="nope")],
    )
    assert exc.code == ErrorCode.validation_error
    assert not h.wal().exists()
    # Forward references and duplicate deps are fine (de-duplicated, order kept).
    await create(h, step("c", "a", "b", "a"), step("a"), step("b"))
    assert h.lines()[0]["payload"]["task"]["steps"][0]["depends_on_step_ids"] == ["a", "b"]


async def test_actor_fields_come_from_the_run(h: TaskHarness) -> None:
    """Case K46."""
    exc = await h.err(
        h.orchestrator(),
        "agent.task_create",
        task_id="t1",
        wal_name="work",
        title="T",
        summary="S",
        steps=[step("a")],
        actor_agent_id="agent_evil",
    )
    assert exc.code == ErrorCode.validation_error and not h.wal().exists()
    await create(h, step("a"))
    worker = await claim(h, "a")
    for line in h.lines():
        expected = (
            ("agent_orch", "run_orch")
            if line["event_type"] != "task_step_claimed"
            else (worker.agent_id, worker.run_id)
        )
        assert (line["actor_agent_id"], line["actor_run_id"]) == expected
    exc = await h.err(
        worker, "agent.task_update_step", task_id="t1", step_id="a", status="running", actor_run_id="run_x"
    )
    assert exc.code == ErrorCode.validation_error


async def test_ready_order_and_same_commit(h: TaskHarness) -> None:
    result = await create(h, step("a"), step("b"), step("c", "a", "b"))
    assert [(x["event_type"], x["step_id"]) for x in h.lines()] == [
        ("task_created", None),
        ("task_step_ready", "a"),
        ("task_step_ready", "b"),
        ("task_running", None),
    ]
    assert result["task"]["status"] == "running"
    await finish(h, "a")
    worker = await claim(h, "b", name="w2")
    done = await h.ok(worker, "agent.task_update_step", task_id="t1", step_id="b", status="completed")
    tail = h.lines()[-2:]
    assert [(x["event_type"], x["step_id"]) for x in tail] == [
        ("task_step_completed", "b"),
        ("task_step_ready", "c"),
    ]
    assert done["wal_event_ids"] == [x["event_id"] for x in tail]


async def test_two_tasks_have_separate_wals(h: TaskHarness) -> None:
    """Case K22."""
    await create(h, step("a"), task_id="t1", wal_name="one")
    await create(h, step("a"), task_id="t2", wal_name="two")
    two_before = h.wal("two").read_bytes()
    await update(h, {"op": "update_task", "title": "renamed"}, task_id="t1")
    assert h.types("one")[-1] == "task_updated" and h.wal("two").read_bytes() == two_before
    listed = await h.ok(h.orchestrator(), "agent.task_list")
    assert sorted(t["task_id"] for t in listed["tasks"]) == ["t1", "t2"]
    assert sorted(p.name for p in h.session_dir.iterdir()) == ["one.wal.jsonl", "two.wal.jsonl"]


async def test_creating_ready_steps_starts_nothing(h: TaskHarness) -> None:
    """Case J17."""
    await create(h, step("a"), step("b"))
    assert h.cancel_requests == [] and h.service.holder_run_ids("t1") == []
    assert statuses(h) == {"a": "ready", "b": "ready"}


# ----------------------------------------------------------------------------------------- task_update


async def test_patch_writes_one_task_updated_with_input_ops(h: TaskHarness) -> None:
    """Case K21."""
    await create(h, step("s1"), step("s2"), step("s3"))
    ops = [
        {"op": "add_step", "step": step("s4")},
        {"op": "add_dependency", "step_id": "s4", "depends_on_step_id": "s1"},
    ]
    result = await update(h, *ops)
    new = h.lines()[5:]
    assert [x["event_type"] for x in new] == ["task_updated"]
    assert new[0]["payload"]["operations"] == ops
    assert new[0]["payload"]["task_summary"] == {
        "task_id": "t1",
        "title": "Task title",
        "status": "running",
        "step_status_counts": {
            "pending": 1,
            "ready": 3,
            "claimed": 0,
            "running": 0,
            "blocked": 0,
            "completed": 0,
            "failed": 0,
            "cancelled": 0,
        },
    }
    assert result["updated_after_dispatch_step_ids"] == []
    assert statuses(h)["s4"] == "pending"


async def test_failing_op_commits_nothing_and_names_index(h: TaskHarness) -> None:
    """Case K21."""
    await create(h, step("s1"), step("s2"))
    before = h.service.active_dags()[0].snapshot()
    lines = len(h.lines())
    exc = await update_err(
        h,
        {"op": "update_task", "title": "x"},
        {"op": "add_step", "step": step("s3")},
        {"op": "delete_step", "step_id": "nope"},
    )
    assert exc.code == ErrorCode.step_not_found and exc.details["op_index"] == 2
    assert len(h.lines()) == lines and h.service.active_dags()[0].snapshot() == before
    # Order matters: add then depend succeeds, the reverse fails with nothing applied.
    exc = await update_err(
        h,
        {"op": "add_dependency", "step_id": "s2", "depends_on_step_id": "x"},
        {"op": "add_step", "step": step("x")},
    )
    assert exc.code == ErrorCode.validation_error and exc.details["op_index"] == 0
    await update(
        h,
        {"op": "add_step", "step": step("x")},
        {"op": "add_dependency", "step_id": "s2", "depends_on_step_id": "x"},
    )
    assert statuses(h)["s2"] == "pending"


async def test_cycles_and_self_dependency(h: TaskHarness) -> None:
    """Case K3."""
    await create(h, step("s1"), step("s2", "s1"))
    lines = len(h.lines())
    exc = await update_err(h, {"op": "add_dependency", "step_id": "s1", "depends_on_step_id": "s2"})
    assert exc.code == ErrorCode.dependency_cycle
    exc = await update_err(h, {"op": "add_dependency", "step_id": "s1", "depends_on_step_id": "s1"})
    assert exc.code == ErrorCode.dependency_cycle
    exc = await update_err(
        h, {"op": "update_step", "step_id": "s1", "fields": {"depends_on_step_ids": ["s2"]}}
    )
    assert exc.code == ErrorCode.dependency_cycle
    exc = await update_err(h, {"op": "add_step", "step": step("s3", "s3")})
    assert exc.code == ErrorCode.dependency_cycle
    assert len(h.lines()) == lines and statuses(h) == {"s1": "ready", "s2": "pending"}


async def test_ops_apply_in_order_for_deletes(h: TaskHarness) -> None:
    """Case K13."""
    await create(h, step("a"), step("c", "a"))
    exc = await update_err(
        h,
        {"op": "delete_step", "step_id": "a"},
        {"op": "remove_dependency", "step_id": "c", "depends_on_step_id": "a"},
    )
    assert exc.code == ErrorCode.step_has_dependents and statuses(h) == {"a": "ready", "c": "pending"}
    await update(
        h,
        {"op": "remove_dependency", "step_id": "c", "depends_on_step_id": "a"},
        {"op": "delete_step", "step_id": "a"},
    )
    assert statuses(h) == {"c": "ready"}
    assert h.types()[-2:] == ["task_updated", "task_step_ready"]


async def test_edge_rules(h: TaskHarness) -> None:
    """Case K21."""
    await create(h, step("a"), step("b", "a"))
    exc = await update_err(h, {"op": "add_dependency", "step_id": "b", "depends_on_step_id": "a"})
    assert exc.code == ErrorCode.validation_error
    exc = await update_err(h, {"op": "remove_dependency", "step_id": "a", "depends_on_step_id": "b"})
    assert exc.code == ErrorCode.validation_error
    exc = await update_err(h, {"op": "update_step", "step_id": "zz", "fields": {"title": "x"}})
    assert exc.code == ErrorCode.step_not_found
    exc = await update_err(h, {"op": "add_step", "step": step("p", worker_pool_id="nope")})
    assert exc.code == ErrorCode.validation_error
    await update(h, {"op": "add_step", "step": step("p"), "worker_pool_id": "other", "required": False})
    dag = h.service.active_dags()[0]
    added = dag.step("p")
    assert added is not None and added.worker_pool_id == "other" and added.required is False


async def test_delete_rules(h: TaskHarness) -> None:
    """Case K30."""
    await create(
        h, *(step(x) for x in ["pend", "rdy", "blk", "fal", "cmp", "clm", "run", "cnl"]), step("gate", "cmp")
    )
    await update(h, {"op": "add_dependency", "step_id": "pend", "depends_on_step_id": "gate"})
    await h.ok(h.orchestrator(), "agent.task_update_step", task_id="t1", step_id="blk", status="blocked")
    await h.ok(h.orchestrator(), "agent.task_update_step", task_id="t1", step_id="fal", status="failed")
    await finish(h, "cmp")
    await claim(h, "clm")
    w = await claim(h, "run")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="run", status="running")
    await update(h, {"op": "cancel_step", "step_id": "cnl"})
    assert statuses(h)["pend"] == "pending" and statuses(h)["gate"] == "ready"
    for target in ["blk", "fal", "cmp", "clm", "run"]:
        exc = await update_err(h, {"op": "delete_step", "step_id": target})
        assert exc.code == ErrorCode.validation_error, target
    await update(
        h,
        {"op": "delete_step", "step_id": "pend"},
        {"op": "delete_step", "step_id": "rdy"},
        {"op": "delete_step", "step_id": "cnl"},
    )
    assert set(statuses(h)) == {"blk", "fal", "cmp", "clm", "run", "gate"}


async def test_cancel_step(h: TaskHarness) -> None:
    """Case K14."""
    await create(h, step("a"), step("b", "a"), step("c"), step("d"), step("e"))
    await claim(h, "c")
    w = await claim(h, "d")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="d", status="running")
    await finish(h, "e")
    n = len(h.lines())
    result = await update(
        h,
        {"op": "cancel_step", "step_id": "a", "reason": "not needed"},
        {"op": "cancel_step", "step_id": "b"},
    )
    new = h.lines()[n:]
    assert [(x["event_type"], x["step_id"]) for x in new] == [
        ("task_updated", None),
        ("task_step_cancelled", "a"),
        ("task_step_cancelled", "b"),
    ]
    assert new[1]["payload"] == {"previous_status": "ready", "reason": "not needed", "result_summary": None}
    assert new[2]["payload"]["previous_status"] == "pending"
    assert result["wal_event_ids"] == [x["event_id"] for x in new]
    for target in ["c", "d", "e"]:
        exc = await update_err(h, {"op": "cancel_step", "step_id": target})
        assert exc.code == ErrorCode.validation_error
    await create(h, step("x"), task_id="t2", wal_name="two")
    exc = await update_err(
        h, {"op": "cancel_step", "step_id": "x"}, {"op": "delete_step", "step_id": "x"}, task_id="t2"
    )
    assert exc.code == ErrorCode.validation_error and statuses(h, "t2") == {"x": "ready"}


async def test_reopen_step(h: TaskHarness) -> None:
    """Case K26."""
    await create(h, step("a"), step("b", "a"), step("c"))
    await finish(h, "a")
    await finish(h, "b", "failed", reason="boom")
    await update(h, {"op": "cancel_step", "step_id": "c"})
    n = len(h.lines())
    await update(h, {"op": "reopen_step", "step_id": "b", "reason": "retry"})
    new = h.lines()[n:]
    assert [x["event_type"] for x in new] == ["task_updated", "task_step_reopened", "task_step_ready"]
    assert new[1]["payload"] == {"previous_status": "failed", "status": "pending", "reason": "retry"}
    dag = h.service.active_dags()[0]
    b = dag.step("b")
    assert b is not None and b.status.value == "ready" and b.claimed_by_run_id is None
    assert b.result_summary is None and b.status_reason is None
    for target in ["c", "a"]:
        exc = await update_err(h, {"op": "reopen_step", "step_id": target})
        assert exc.code == ErrorCode.validation_error


async def test_completed_and_cancelled_steps_are_history(h: TaskHarness) -> None:
    """Case K28."""
    await create(h, step("a"), step("b"), step("z"))
    await finish(h, "a", result_summary="done")
    await update(h, {"op": "cancel_step", "step_id": "b"})
    for target in ["a", "b"]:
        for fields in ({"depends_on_step_ids": ["z"]}, {"worker_pool_id": "other"}, {"required": False}):
            exc = await update_err(h, {"op": "update_step", "step_id": target, "fields": fields})
            assert exc.code == ErrorCode.validation_error
        exc = await update_err(h, {"op": "add_dependency", "step_id": target, "depends_on_step_id": "z"})
        assert exc.code == ErrorCode.validation_error
        await update(h, {"op": "update_step", "step_id": target, "fields": {"title": "T", "summary": "S"}})
    assert statuses(h)["a"] == "completed" and statuses(h)["b"] == "cancelled"
    # Results of a completed step can never change (a41); deleting it is refused (k28).
    n = len(h.lines())
    exc = await h.err(
        h.orchestrator(), "agent.task_update_step", task_id="t1", step_id="a", result_summary="x"
    )
    assert exc.code == ErrorCode.validation_error
    exc = await update_err(h, {"op": "delete_step", "step_id": "a"})
    assert exc.code == ErrorCode.validation_error and len(h.lines()) == n


async def test_ready_demotion_is_implicit_and_replays(h: TaskHarness) -> None:
    """Case K29."""
    await create(h, step("a"), step("b"))
    n = len(h.lines())
    await update(h, {"op": "add_dependency", "step_id": "b", "depends_on_step_id": "a"})
    assert h.types()[n:] == ["task_updated"] and statuses(h) == {"a": "ready", "b": "pending"}
    replayed = replay_wal(h.wal(), session_id="sess_tasks", repair=False).dag
    assert replayed.snapshot() == h.service.active_dags()[0].snapshot()
    # Removing the dependency again advances b explicitly.
    await update(h, {"op": "remove_dependency", "step_id": "b", "depends_on_step_id": "a"})
    assert h.types()[-2:] == ["task_updated", "task_step_ready"]


async def test_editing_a_running_step(h: TaskHarness) -> None:
    """Case K11."""
    await create(h, step("a"), step("b"), step("c", "a"))
    w = await claim(h, "b")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="b", status="running")
    n = len(h.lines())
    result = await update(
        h,
        {
            "op": "update_step",
            "step_id": "b",
            "fields": {"title": "New title", "summary": "New summary", "depends_on_step_ids": ["c"]},
        },
    )
    assert h.types()[n:] == ["task_updated"]
    assert h.lines()[n]["payload"]["updated_after_dispatch_step_ids"] == ["b"]
    assert result["updated_after_dispatch_step_ids"] == ["b"]
    assert statuses(h)["b"] == "running"
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")
    b = next(s for s in got["steps"] if s["step_id"] == "b")
    assert b["status"] == "running" and b["title"] == "New title" and b["updated_after_dispatch"] is True
    assert b["dispatch_snapshot"] == {
        "title": "Title b",
        "summary": "Do b",
        "depends_on_step_ids": [],
        "worker_pool_id": None,
        "required": True,
    }
    assert h.sink_for(w).context_nodes == []  # nothing is pushed to the worker
    # The worker may still finish it even though the new dependency is unmet.
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="b", status="completed")
    assert statuses(h)["b"] == "completed"
    inspect = (await h.service.inspect_views())[0]
    assert inspect.task is not None and inspect.wal_events[-1]["event_type"] == "task_step_completed"


async def test_edit_fields_for_every_editable_status(h: TaskHarness) -> None:
    """Cases K11, K29."""
    await create(h, *(step(x) for x in ["pend", "rdy", "blk", "fal", "clm", "run", "dep"]))
    await update(h, {"op": "add_dependency", "step_id": "pend", "depends_on_step_id": "dep"})
    await h.ok(h.orchestrator(), "agent.task_update_step", task_id="t1", step_id="blk", status="blocked")
    await finish(h, "fal", "failed")
    await claim(h, "clm")
    w = await claim(h, "run")
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="run", status="running")
    before = statuses(h)
    ops = [
        {
            "op": "update_step",
            "step_id": x,
            "fields": {
                "title": "t2",
                "summary": "s2",
                "depends_on_step_ids": [],
                "worker_pool_id": "other",
                "required": False,
            },
        }
        for x in ["rdy", "blk", "fal", "clm", "run"]
    ]
    result = await update(h, *ops)
    assert result["updated_after_dispatch_step_ids"] == ["clm", "run"]
    after = statuses(h)
    assert after == before  # a30: blocked/failed keep their status, nothing auto-reopens
    # k29: a pending step whose dependency is removed is advanced; blocked/failed stay.
    await update(h, {"op": "update_step", "step_id": "pend", "fields": {"depends_on_step_ids": []}})
    assert statuses(h)["pend"] == "ready" and statuses(h)["blk"] == "blocked"


async def test_orchestrator_step_status_rules(h: TaskHarness) -> None:
    await create(h, step("a"), step("b"), step("c"), step("d", "a"), step("e"))
    orch = h.orchestrator()
    exc = await h.err(orch, "agent.task_update_step", task_id="t1", step_id="a", status="ready")
    assert exc.code == ErrorCode.validation_error
    await claim(h, "c")
    for status in ("cancelled", "failed", "blocked", "completed", "running", "pending"):
        exc = await h.err(orch, "agent.task_update_step", task_id="t1", step_id="c", status=status)
        assert exc.code == ErrorCode.validation_error, status
    exc = await h.err(orch, "agent.task_update_step", task_id="t1", step_id="c", result_summary="x")
    assert exc.code == ErrorCode.validation_error
    exc = await h.err(orch, "agent.task_update_step", task_id="t1", step_id="d", status="completed")
    assert exc.code == ErrorCode.validation_error  # only from ready
    done = await h.ok(
        orch,
        "agent.task_update_step",
        task_id="t1",
        step_id="a",
        status="completed",
        result_summary="by hand",
    )
    assert done["step"]["status"] == "completed" and statuses(h)["d"] == "ready"
    await h.ok(orch, "agent.task_update_step", task_id="t1", step_id="b", status="blocked", reason="wait")
    n = len(h.lines())
    await h.ok(orch, "agent.task_update_step", task_id="t1", step_id="b", result_summary="note")
    assert h.types()[n:] == ["task_step_updated"]
    # a43: reopening a blocked step via task_update_step(status="pending").
    await h.ok(orch, "agent.task_update_step", task_id="t1", step_id="b", status="pending")
    assert h.types()[-2:] == ["task_step_reopened", "task_step_ready"]
    await h.ok(orch, "agent.task_update_step", task_id="t1", step_id="e", status="failed", reason="drop")
    exc = await h.err(orch, "agent.task_update_step", task_id="t1", step_id="e", result_summary="x")
    assert exc.code == ErrorCode.validation_error  # failed results are immutable


async def test_task_block_and_reopen(h: TaskHarness) -> None:
    """Cases K31, K32."""
    await create(h, step("a"), step("b", "a"), step("c"))
    w = await claim(h, "a")
    n = len(h.lines())
    await update(h, {"op": "update_task", "status": "blocked", "reason": "waiting"})
    assert h.types()[n:] == ["task_updated"]
    assert h.service.active_dags()[0].status.value == "blocked"
    assert statuses(h) == {"a": "claimed", "b": "pending", "c": "ready"}
    with pytest.raises(AgentCoreError) as info:
        await h.service.check_dispatchable("t1")
    assert info.value.code == ErrorCode.task_not_dispatchable
    other = h.worker("t1", name="w9")
    exc = await h.err(other, "agent.task_claim_step", task_id="t1", step_id="c")
    assert exc.code == ErrorCode.task_not_dispatchable
    query = await h.ok(other, "agent.task_query_steps", task_id="t1")
    assert query["steps"] == []
    # a60: the holder still completes; the Task stays blocked and b is not advanced.
    await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", status="completed")
    assert h.service.active_dags()[0].status.value == "blocked" and statuses(h)["b"] == "pending"
    assert h.types()[-1] == "task_step_completed"
    # a62: invalid status changes.
    exc = await update_err(h, {"op": "update_task", "status": "completed"})
    assert exc.code == ErrorCode.validation_error
    exc = await update_err(h, {"op": "update_task", "status": "blocked"})
    assert exc.code == ErrorCode.validation_error
    # a61 / k32: reopen writes task_updated, task_reopened, then ready and running records.
    n = len(h.lines())
    await update(h, {"op": "update_task", "status": "pending", "reason": "go"})
    new = h.lines()[n:]
    assert [x["event_type"] for x in new] == [
        "task_updated",
        "task_reopened",
        "task_step_ready",
        "task_running",
    ]
    assert new[1]["payload"] == {"previous_status": "blocked", "status": "pending", "reason": "go"}
    assert new[2]["step_id"] == "b" and h.cancel_requests == []
    exc = await update_err(h, {"op": "update_task", "status": "pending"})
    assert exc.code == ErrorCode.validation_error
    # Reopening a terminal Task → task_terminal.
    await h.ok(h.orchestrator(), "agent.task_fail", task_id="t1")
    exc = await update_err(h, {"op": "update_task", "status": "pending"})
    assert exc.code == ErrorCode.task_terminal


async def test_core_never_closes_a_task(h: TaskHarness) -> None:
    """Case K33."""
    await create(h, step("a"), step("b"), step("opt", required=False))
    await finish(h, "a", "failed")
    await finish(h, "b", "failed")
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")
    assert got["status"] == "running" and got["diagnostics"] == {"stalled": False, "completeable": False}
    await update(h, {"op": "cancel_step", "step_id": "opt"})
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")
    assert got["status"] == "running" and got["diagnostics"]["stalled"] is True
    n = len(h.lines())
    await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")
    assert len(h.lines()) == n  # diagnostics never write the WAL
    await update(h, {"op": "reopen_step", "step_id": "a"}, {"op": "reopen_step", "step_id": "b"})
    await finish(h, "a")
    await finish(h, "b")
    got = await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")
    assert got["diagnostics"] == {"stalled": False, "completeable": True} and got["status"] == "running"


async def test_failed_and_cancelled_dependencies_block(h: TaskHarness) -> None:
    """Case K27."""
    await create(h, step("opt", required=False), step("req", "opt"), step("f"), step("g", "f"))
    await update(h, {"op": "cancel_step", "step_id": "opt"})
    await finish(h, "f", "failed")
    assert statuses(h) == {"opt": "cancelled", "req": "pending", "f": "failed", "g": "pending"}
    await update(h, {"op": "reopen_step", "step_id": "f"})
    assert statuses(h)["g"] == "pending"
    await finish(h, "f")
    assert statuses(h)["g"] == "ready"


async def test_write_result_shape(h: TaskHarness) -> None:
    result = await create(h, step("a"))
    assert set(result) == {"task", "changed_steps", "wal_event_ids", "wal_path"}
    assert set(result["task"]) == {
        "task_id",
        "title",
        "status",
        "read_only",
        "step_status_counts",
        "diagnostics",
        "created_at",
        "updated_at",
    }
    assert set(result["task"]["step_status_counts"]) == {
        "pending",
        "ready",
        "claimed",
        "running",
        "blocked",
        "completed",
        "failed",
        "cancelled",
    }
    assert result["changed_steps"][0]["step_id"] == "a"
    w = await claim(h, "a")
    upd = await h.ok(w, "agent.task_update_step", task_id="t1", step_id="a", status="running")
    assert {"task", "changed_steps", "wal_event_ids", "step", "lease_expires_at", "task_id"} <= set(upd)


async def test_task_template(h: TaskHarness) -> None:
    """Case K25."""
    orch = h.orchestrator()
    result = await h.ok(orch, "agent.task_template", goal="ship the login fix")
    assert result["template_id"] == "template.task_dag.default" and len(result["template_version"]) == 12
    ((_call_id, node),) = h.sink_for(orch).context_nodes
    assert node.node_type == NodeType.task_instruction and node.role.value == "user"
    assert node.metadata["template_id"] == "template.task_dag.default"
    assert node.metadata["template_version"] == result["template_version"]
    text = node.content[0].text  # type: ignore[union-attr]
    assert text.startswith("# ") and "ship the login fix" in text
    assert not h.session_dir.exists() and h.service.active_dags() == []
    exc = await h.err(h.worker("t1"), "agent.task_template", goal="x")
    assert exc.code == ErrorCode.permission_denied


async def test_non_orchestrators_are_refused(h: TaskHarness) -> None:
    """Case K49."""
    await create(h, step("a"))
    for role in (AgentRole.main, AgentRole.sub, AgentRole.fork, AgentRole.compact):
        scope = h.scope(role)
        for tool, args in [
            ("agent.task_get", {"task_id": "t1"}),
            ("agent.task_list", {}),
            ("agent.task_update", {"task_id": "t1", "operations": [{"op": "update_task", "title": "x"}]}),
            ("agent.task_claim_step", {"task_id": "t1", "step_id": "a"}),
            (
                "agent.task_create",
                {"task_id": "t9", "wal_name": "x", "title": "t", "summary": "s", "steps": [step("a")]},
            ),
        ]:
            exc = await h.err(scope, tool, **args)
            assert exc.code == ErrorCode.permission_denied, (role, tool)
    worker = h.worker("t1")
    for tool, args in [
        ("agent.task_update", {"task_id": "t1", "operations": [{"op": "update_task", "title": "x"}]}),
        ("agent.task_complete", {"task_id": "t1"}),
        ("agent.task_fail", {"task_id": "t1"}),
        ("agent.task_cancel", {"task_id": "t1"}),
        ("agent.task_list", {}),
    ]:
        exc = await h.err(worker, tool, **args)
        assert exc.code == ErrorCode.permission_denied
    exc = await h.err(h.orchestrator(), "agent.task_claim_step", task_id="t1", step_id="a")
    assert exc.code == ErrorCode.permission_denied
    assert h.types() == ["task_created", "task_step_ready", "task_running"]


async def test_events_mirror_wal_records(h: TaskHarness) -> None:
    orch = h.orchestrator()
    await create(h, step("a"))
    events = h.events(orch)
    lines = h.lines()
    assert [e.event_type.value for e in events] == [x["event_type"] for x in lines]
    for event, line in zip(events, lines, strict=True):
        assert (
            event.payload["wal_event_id"] == line["event_id"] and event.payload["wal_seq"] == line["wal_seq"]
        )
        assert event.payload["task_id"] == "t1" and event.payload["wal_path"] == str(h.wal())
        for key, value in line["payload"].items():
            assert event.payload[key] == value
    assert all(
        e.event_type in {EventType.task_created, EventType.task_step_ready, EventType.task_running}
        for e in events
    )


async def test_no_markdown_or_extra_files(h: TaskHarness, tmp_path: Path) -> None:
    await create(h, step("a"))
    await h.ok(h.orchestrator(), "agent.task_template", goal="x")
    await finish(h, "a")
    await h.ok(h.orchestrator(), "agent.task_complete", task_id="t1")
    files = [p for p in (tmp_path / ".soong-agent").rglob("*") if p.is_file()]
    assert [p.name for p in files] == ["work.wal.jsonl"]
