"""Dispatched worker runs under the temporal engine end as on the local engine (docs/scale-out.md; issue 21):
a dispatch whose ``timeout_ms`` passes ends the worker run ``aborted`` (error code ``timeout``) and fails
its claimed step with ``worker_timeout``; a worker run charges the Orchestrator run's ``[limits]`` budget
(it starts from the Orchestrator's consumption and its own consumption counts for the Orchestrator
afterwards). The session's Task WAL records, stored events, nodes and run outcomes are the local engine's
for the same scripted session (ids and timestamps aside)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from agent_core import RunStatus
from tests.engine.test_temporal_engine import _env, engine_config, worker
from tests.engine.test_temporal_orchestrator import CONFIG, DONE, dispatch, session_record
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.orchestrator import Router, create_args, step
from tests.fixtures.runtime import open_runtime, rows

pytestmark = pytest.mark.temporal

TIMEOUT_MS = 20_000
"""The dispatch's timeout: the worker run claims its step long before (also on a loaded machine)."""
Script = Callable[[FakeProvider], None]


def timed_out_dispatch(fake: FakeProvider) -> None:
    """w1 claims s1, then its model call hangs until the dispatch times out."""
    claim = tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "a_claim"))
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(
            dispatch("c_d1", instruction="job:a take s1", worker_agent_id="w1", timeout_ms=TIMEOUT_MS)
        ),
        text("the worker timed out"),
    ).job("a", claim, hang(asyncio.Event(), lead_text="working"))


def shared_budget(fake: FakeProvider) -> None:
    """``limits.max_tool_calls = 4``: the Orchestrator's two calls and the worker's two spend it, so the
    worker's third model call is its final answer without tools, and so is the Orchestrator's next one.
    With budgets of their own both would go on (the worker to a normal end, the Orchestrator to
    ``task_complete``)."""
    update = {"task_id": "t1", "step_id": "s1", "status": "completed", "result_summary": "s1 ok"}
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(dispatch("c_d1", instruction="job:a take s1", worker_agent_id="w1")),
        text("the budget is spent"),
    ).job(
        "a",
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "a_claim")),
        tool_calls(("agent.task_update_step", update, "a_upd")),
        text(DONE),
    )


async def session_on(env: SoongEnv, script: Script, config: dict[str, Any], temporal: bool) -> Any:
    """The scripted Orchestrator session on the local engine, or on the temporal one (a worker runtime
    executes the runs); its run handle after it ended."""
    fake = FakeProvider()
    script(fake)
    if not temporal:
        async with open_runtime(env, fake, config=config) as rt:
            run = await rt.start("go", mode="orchestrator")
            await asyncio.wait_for(run.wait(), 120)
        return run, fake
    async with worker(env, fake, lambda _rt: None):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await rt.start("go", mode="orchestrator")
            await asyncio.wait_for(run.wait(), 240)
    return run, fake


async def both_engines(
    tmp_path: Any,
    temporal_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    script: Script,
    config: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], SoongEnv, Any]:
    local_env = _env(tmp_path / "local", monkeypatch)
    local_run, _ = await session_on(local_env, script, config, temporal=False)
    expected = session_record(local_env, local_run.session_id)
    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**config, **engine_config(temporal_server))
    run, _fake = await session_on(env, script, config, temporal=True)
    assert run.status == local_run.status, (run.error, local_run.error)
    got = session_record(env, run.session_id)
    assert got["runs"] == expected["runs"]
    assert [r["event_type"] for r in got["wal"]] == [r["event_type"] for r in expected["wal"]]
    assert got["wal"] == expected["wal"]
    assert got["events"] == expected["events"]
    for a, b in zip(got["nodes"], expected["nodes"], strict=True):
        assert a == b, json.dumps([a, b], indent=1)
    return expected, got, env, run


@pytest.mark.timeout(900)
async def test_a_timed_out_dispatch_ends_the_worker_run_as_on_the_local_engine(
    tmp_path: Any, temporal_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {**CONFIG, "agents": {**CONFIG.get("agents", {}), "child_cancel_timeout_ms": 120_000}}
    expected, _, env, run = await both_engines(
        tmp_path, temporal_server, monkeypatch, timed_out_dispatch, config
    )
    assert expected["runs"][1][0] == "aborted", expected["runs"]
    last = expected["wal"][-1]
    assert (last["event_type"], last["payload"]["result_summary"]) == ("task_step_failed", "worker_timeout")
    child = rows(env, "SELECT error_json FROM runs WHERE run_id != ?", run.run_id)[0]
    assert json.loads(child["error_json"])["code"] == "timeout"
    assert dispatch_error(env, run.session_id)["code"] == "timeout"


def dispatch_error(env: SoongEnv, session_id: str) -> dict[str, Any]:
    """The error of the dispatch's tool result."""
    result = rows(
        env, f'SELECT content_json FROM "nodes_{session_id}" WHERE role = ? ORDER BY node_seq', "tool"
    )
    dispatched = [b for r in result for b in json.loads(r["content_json"]) if b["tool_call_id"] == "c_d1"]
    assert dispatched[0]["is_error"], dispatched
    error: dict[str, Any] = dispatched[0]["error"]
    return error


@pytest.mark.timeout(900)
async def test_a_worker_run_shares_the_orchestrator_runs_limits_budget(
    tmp_path: Any, temporal_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = {**CONFIG, "limits": {"max_tool_calls": 4}}
    expected, _, _, run = await both_engines(tmp_path, temporal_server, monkeypatch, shared_budget, config)
    assert run.status == RunStatus.completed
    assert expected["runs"] == [("completed", "limit_reached")] * 2, expected["runs"]


def instant_timeout(fake: FakeProvider) -> None:
    """The dispatch times out after 1 ms: before the worker run's first step, or during one."""
    claim = tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "a_claim"))
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(dispatch("c_d1", instruction="job:a take s1", worker_agent_id="w1", timeout_ms=1)),
        text("the worker timed out"),
    ).job("a", claim, hang(asyncio.Event(), lead_text="working"))


@pytest.mark.timeout(600)
async def test_a_dispatch_timing_out_at_once_ends_its_worker_run_aborted(
    tmp_path: Any, temporal_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Wherever the timeout meets the worker run (its child workflow cancelled before its first step
    began, or during a step), the run ends ``aborted`` with error code ``timeout`` and the Orchestrator
    run goes on."""
    env = _env(tmp_path, monkeypatch)
    config = {**CONFIG, "agents": {**CONFIG.get("agents", {}), "child_cancel_timeout_ms": 120_000}}
    env.write_config(**config, **engine_config(temporal_server))
    run, _fake = await session_on(env, instant_timeout, config, temporal=True)
    assert run.status == RunStatus.completed, run.error
    child = rows(env, "SELECT status, error_json FROM runs WHERE run_id != ?", run.run_id)[0]
    assert child["status"] == "aborted", child
    if child["error_json"] is not None:  # a run cancelled before its loop stores none (as locally)
        assert json.loads(child["error_json"])["code"] == "timeout", child
    assert dispatch_error(env, run.session_id)["code"] == "timeout"
    assert events_of(env, run.session_id, "child_agent_cancelled"), "the cancel watcher saw the run end"


def events_of(env: SoongEnv, session_id: str, event_type: str) -> list[dict[str, Any]]:
    return rows(env, f'SELECT * FROM "events_{session_id}" WHERE event_type = ?', event_type)


def crashing_worker(fake: FakeProvider) -> None:
    """w1 claims s1, then its model call hangs (until its child workflow is terminated)."""
    claim = tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s1"}, "a_claim"))
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(dispatch("c_d1", instruction="job:a take s1", worker_agent_id="w1")),
        text("the worker crashed"),
    ).job("a", claim, hang(asyncio.Event(), lead_text="working"))


@pytest.mark.timeout(600)
async def test_a_terminated_worker_workflow_ends_its_run_failed_and_the_dispatch_goes_on(
    tmp_path: Any, temporal_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker run's child workflow terminated at the Temporal level (it never ends its run itself): the
    dispatching step ends the run ``failed`` with ``internal_error``, as a local worker run that crashed,
    and the worker-run-end fallback fails its claimed step; the Orchestrator run goes on (before, the
    dispatch waited for the run until its timeout)."""
    from temporalio.client import Client

    env = _env(tmp_path, monkeypatch)
    config = {**CONFIG, "agents": {**CONFIG.get("agents", {}), "default_child_timeout_ms": 600_000}}
    env.write_config(**config, **engine_config(temporal_server))
    fake = FakeProvider()
    crashing_worker(fake)
    child_sql = "SELECT run_id, status, end_reason, error_json FROM runs WHERE run_id != ?"
    async with worker(env, fake, lambda _rt: None):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await rt.start("go", mode="orchestrator")
            for _ in range(2400):  # until the worker run hangs in its model call after its claim
                if fake.hanging:
                    break
                await asyncio.sleep(0.1)
            assert fake.hanging, "the worker run never reached its model call"
            child_id = rows(env, child_sql, run.run_id)[0]["run_id"]
            client = await Client.connect(temporal_server.address)
            await client.get_workflow_handle(f"soong-run-{child_id}").terminate("test: worker lost")
            await asyncio.wait_for(run.wait(), 240)
    assert run.status == RunStatus.completed, run.error
    child = rows(env, child_sql, run.run_id)[0]
    assert (child["status"], child["end_reason"]) == ("failed", "failed"), dict(child)
    error = json.loads(child["error_json"])
    assert (error["code"], error["details"]["workflow_status"]) == ("internal_error", "TERMINATED"), error
    wal = session_record(env, run.session_id)["wal"]
    last = wal[-1]
    assert last["event_type"] == "task_step_failed", [w["event_type"] for w in wal]
    assert last["payload"]["result_summary"] == "worker_finished_without_terminal_step_status", last
    assert events_of(env, run.session_id, "child_agent_failed"), "the dispatch saw the run fail"
