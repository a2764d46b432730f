"""Orchestrator runs under the temporal engine (docs/scale-out.md; issue 21): a dispatched worker run is a
child workflow on its worker pool's task queue, and the session's Task WAL records, stored events and
nodes are the local engine's for the same scripted session (ids and timestamps aside)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from temporalio.client import Client

from agent_core import AgentRuntime, RunStatus
from agent_core._storage.postgres.task_wal import PgTaskWal
from tests.engine.test_temporal_engine import _env, engine_config, worker
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.orchestrator import (
    Router,
    create_args,
    events,
    pools,
    roomy,
    step,
    wal_lines,
)
from tests.fixtures.runtime import open_runtime, rows
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal

DONE = '{"status": "completed", "summary": "worker finished"}'
CONFIG = roomy(
    pools(
        (
            "default",
            [
                {"agent_definition_id": "default_worker_agent", "worker_id": "w1"},
                {"agent_definition_id": "default_worker_agent", "worker_id": "w2"},
            ],
        )
    )
)
ID = re.compile(r"\b(?:run|agent|node|sess|session|evt|event|task_wal|tw|art|perm)_[0-9A-Za-z_]+")
TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


def claim_and_complete(step_id: str, prefix: str) -> list[Any]:
    update = {"task_id": "t1", "step_id": step_id, "status": "completed", "result_summary": f"{step_id} ok"}
    return [
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": step_id}, f"{prefix}_claim")),
        tool_calls(("agent.task_update_step", update, f"{prefix}_upd")),
        text(DONE),
    ]


def dispatch(call_id: str, **args: Any) -> tuple[str, dict[str, Any], str]:
    return ("agent.dispatch_worker", {"task_id": "t1", "instruction": "work", **args}, call_id)


def two_dispatches(fake: FakeProvider) -> None:
    """Task with two steps; w1 does s1, then w2 does s2; the Orchestrator completes the Task."""
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c_create")),
        tool_calls(dispatch("c_d1", instruction="job:a take s1", worker_agent_id="w1")),
        tool_calls(dispatch("c_d2", instruction="job:b take s2", worker_agent_id="w2")),
        tool_calls(("agent.task_complete", {"task_id": "t1", "result_summary": "both done"}, "c_done")),
        text("all done"),
    ).job("a", *claim_and_complete("s1", "a")).job("b", *claim_and_complete("s2", "b"))


class Normal:
    """Replaces ids and timestamps by their first-appearance index (the two sessions' ids differ)."""

    def __init__(self, root: str) -> None:
        self.ids: dict[str, str] = {}
        self.root = root

    def __call__(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v) for v in value]
        if isinstance(value, str):
            value = TS.sub("<ts>", value.replace(self.root, "<root>"))
            return ID.sub(lambda m: self.ids.setdefault(m.group(0), f"<id{len(self.ids)}>"), value)
        return value


def session_record(env: SoongEnv, session_id: str) -> dict[str, Any]:
    """The session as stored: Task WAL records, event types per run, nodes and run outcomes."""
    norm = Normal(str(env.project.parent))
    norm(session_id)
    wal = [
        {k: v for k, v in r.items() if k not in ("created_at",)}
        for r in wal_lines(env, session_id, "t1-work")
    ]
    stored = events(env, session_id)
    runs = rows(
        env,
        "SELECT run_id, status, end_reason FROM runs WHERE session_id = ? ORDER BY created_at",
        session_id,
    )
    order = {r["run_id"]: i for i, r in enumerate(runs)}
    per_run: dict[int, list[str]] = {}
    for event in stored:
        per_run.setdefault(order.get(event["run_id"], -1), []).append(event["event_type"])
    nodes = rows(
        env, f'SELECT role, node_type, run_id, content_json FROM "nodes_{session_id}" ORDER BY node_seq'
    )
    return {
        "wal": norm(wal),
        "events": per_run,
        "nodes": [
            (n["role"], n["node_type"], order.get(n["run_id"], -1), norm(json.loads(n["content_json"])))
            for n in nodes
        ],
        "runs": [(r["status"], r["end_reason"]) for r in runs],
    }


async def local_session(env: SoongEnv, script: Callable[[FakeProvider], None]) -> tuple[str, Any]:
    fake = FakeProvider()
    script(fake)
    async with open_runtime(env, fake, config=CONFIG) as rt:
        run = await rt.start("go", mode="orchestrator")
        await asyncio.wait_for(run.wait(), 60)
    return run.session_id, run


async def test_an_orchestrator_session_with_a_pool_matches_the_local_engine(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    local_session_id, local_run = await local_session(local_env, two_dispatches)
    assert local_run.status == RunStatus.completed, local_run.error
    expected = session_record(local_env, local_session_id)

    env = _env(tmp_path / "temporal", monkeypatch)
    engine = engine_config(temporal_server)
    env.write_config(**CONFIG, **engine)
    fake = FakeProvider()
    two_dispatches(fake)
    async with worker(env, fake, lambda _rt: None):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await rt.start("go", mode="orchestrator")
            await asyncio.wait_for(run.wait(), 120)
            assert run.status == RunStatus.completed, run.error
    got = session_record(env, run.session_id)
    # each worker run was a child workflow of the Orchestrator run's, on the pool's task queue
    queue = engine["engine"]["temporal"]["task_queue"]
    client = await Client.connect(temporal_server.address)
    children = [r["run_id"] for r in rows(env, "SELECT run_id FROM runs WHERE run_id != ?", run.run_id)]
    assert len(children) == 2
    for child in children:
        described = await client.get_workflow_handle(f"soong-run-{child}").describe()
        assert described.task_queue == f"{queue}.pool.default"
        assert described.parent_id == f"soong-run-{run.run_id}"
    assert got["runs"] == expected["runs"]
    assert expected["runs"] == [("completed", "completed")] * 3
    assert got["wal"] == expected["wal"]
    assert got["events"] == expected["events"]
    for a, b in zip(got["nodes"], expected["nodes"], strict=True):
        assert a == b, json.dumps([a, b], indent=1)


def cancelled_dispatch(fake: FakeProvider, gate: asyncio.Event) -> None:
    """w1 claims s1, then its model call hangs (the Orchestrator run is cancelled there)."""
    claim = tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "a_claim"))
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(dispatch("c_d1", instruction="job:a take s1", worker_agent_id="w1")),
        text("not reached"),
    ).job("a", claim, hang(gate, lead_text="working"))


async def cancel_when_hanging(rt: AgentRuntime, fake: FakeProvider) -> Any:
    run = await rt.start("go", mode="orchestrator")
    for _ in range(1200):  # the worker run's model stream is inside its hang
        if fake.hanging:
            break
        await asyncio.sleep(0.05)
    assert fake.hanging == 1
    result = await run.cancel()
    await asyncio.wait_for(run.wait(), 60)
    assert result.cancelled, result
    return run


async def test_cancelling_the_orchestrator_run_cancels_its_worker_child_workflow(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    fake = FakeProvider()
    cancelled_dispatch(fake, asyncio.Event())
    async with open_runtime(local_env, fake, config=CONFIG) as rt:
        local_run = await cancel_when_hanging(rt, fake)
    expected = session_record(local_env, local_run.session_id)

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**CONFIG, **engine_config(temporal_server))
    fake = FakeProvider()
    cancelled_dispatch(fake, asyncio.Event())
    async with worker(env, fake, lambda _rt: None):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await cancel_when_hanging(rt, fake)
    assert run.status == local_run.status == RunStatus.cancelled
    got = session_record(env, run.session_id)
    assert got["runs"] == expected["runs"]
    assert [r["event_type"] for r in got["wal"]] == [r["event_type"] for r in expected["wal"]]
    assert got["wal"] == expected["wal"]
    assert got["events"] == expected["events"]
    for a, b in zip(got["nodes"], expected["nodes"], strict=True):
        assert a == b, json.dumps([a, b], indent=1)


def _v(value: Any) -> Any:
    return getattr(value, "value", value)


def replay_record(result: Any, root: str, wal: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`session_record` from ``replay_session`` (any storage backend): runs, event types per run,
    nodes and the Task WAL records ``wal``, ids and timestamps normalised."""
    norm = Normal(root)
    norm(result.session_id)
    ids = [r.run_id for r in result.runs] + [c.child_run_id for c in result.children]
    order = {run_id: i for i, run_id in enumerate(ids)}
    per_run: dict[int, list[str]] = {}
    for event in result.events:
        per_run.setdefault(order.get(event.run_id or "", -1), []).append(_v(event.event_type))
    return {
        "runs": [(_v(r.status), _v(r.end_reason)) for r in result.runs]
        + [(c.status, c.result_summary) for c in result.children],
        "events": per_run,
        "nodes": [
            (
                _v(n.role),
                _v(n.node_type),
                order.get(n.run_id or "", -1),
                norm([b.model_dump(mode="json") for b in n.content]),
            )
            for n in result.nodes
        ],
        "wal": norm([{k: v for k, v in r.items() if k != "created_at"} for r in wal]),
    }


async def test_on_postgres_two_workers_share_the_task_board_of_an_orchestrator_session(
    tmp_path: Any,
    temporal_server: TemporalServer,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    """Two worker runtimes (each its own Task registry, as two processes have) execute one Orchestrator
    session on PostgreSQL — one the Orchestrator run's steps (main queue), the other the dispatched worker
    runs' (the pool's queue): each catches up with the Task WAL records the other appended."""
    local_env = _env(tmp_path / "local", monkeypatch)
    fake = FakeProvider()
    two_dispatches(fake)
    async with open_runtime(local_env, fake, config=CONFIG) as rt:
        local = await rt.start("go", mode="orchestrator")
        await asyncio.wait_for(local.wait(), 60)
        replay = await rt.replay_session(local.session_id)
    wal = wal_lines(local_env, local.session_id, "t1-work")
    expected = replay_record(replay, str(local_env.project.parent), wal)

    env = _env(tmp_path / "pg", monkeypatch)
    request.getfixturevalue("postgres_dsn")  # a fresh schema, its DSN in $SOONG_TEST_PG_DSN
    storage = {"backend": "postgres", "postgres": {"dsn_env": "SOONG_TEST_PG_DSN"}}
    engine = engine_config(temporal_server)
    env.write_config(storage=storage, **CONFIG, **engine)
    fake = FakeProvider()
    two_dispatches(fake)  # one script for both: the Orchestrator's steps on one, the workers' on the other
    queue = engine["engine"]["temporal"]["task_queue"]
    orchestrating = worker(env, fake, lambda _rt: None, queues=[queue])
    async with orchestrating, worker(env, fake, lambda _rt: None, queues=[f"{queue}.pool.default"]):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await rt.start("go", mode="orchestrator")
            await asyncio.wait_for(run.wait(), 120)
            assert run.status == RunStatus.completed, run.error
            replay = await rt.replay_session(run.session_id)
    path = env.project / ".soong-agent" / "tasks" / run.session_id / "t1-work.wal.jsonl"
    table = PgTaskWal(dsn_env="SOONG_TEST_PG_DSN")
    try:
        wal = table.read_timeline(path)
    finally:
        table.close()
    got = replay_record(replay, str(env.project.parent), wal)
    assert got["runs"] == expected["runs"]
    assert expected["runs"] == [("completed", "completed")] + [("completed", "worker finished")] * 2
    assert got["wal"] == expected["wal"]
    # the pool's worker did not create the Task: it restored it from the WAL table (a run-less event)
    assert got["events"].pop(-1) == ["task_wal_replayed"]
    assert got["events"] == expected["events"]
    for a, b in zip(got["nodes"], expected["nodes"], strict=True):
        assert a == b, json.dumps([a, b], indent=1)
