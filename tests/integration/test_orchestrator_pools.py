"""Worker pools and orchestrator start (docs/multi-agent.md#worker-pools,
docs/multi-agent.md#agentlist_workers, docs/multi-agent.md; cases J1–J4, J11–J13, J22; docs/runs.md)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_core import AgentCoreError
from agent_core._orchestrator.pools import worker_agent_id
from tests.fixtures.env import REMOVE, SoongEnv
from tests.fixtures.fake_provider import FakeProvider, hang, text, tool_calls
from tests.fixtures.orchestrator import (
    Router,
    create_args,
    error_code,
    events,
    finish,
    helper_definition,
    pools,
    result_json,
    result_of,
    roomy,
    step,
    two_workers,
    worker,
)
from tests.fixtures.runtime import open_runtime, rows, wait_for


def _counts(env: SoongEnv) -> tuple[int, int]:
    runs = rows(env, "SELECT COUNT(*) AS n FROM runs")[0]["n"]
    sessions = rows(env, "SELECT COUNT(*) AS n FROM sessions")[0]["n"]
    return runs, sessions


@pytest.mark.parametrize(
    "agents",
    [
        {"worker_pools": REMOVE},
        {"worker_pools": []},
        {"worker_pools": [{"pool_id": "default", "workers": [{"agent_definition_id": "nope_agent"}]}]},
        {
            "worker_pools": [
                {"pool_id": "default", "workers": [{"agent_definition_id": "default_compact_agent"}]}
            ]
        },
        {"worker_pools": [{"pool_id": "default", "workers": []}]},
        {
            "worker_pools": [
                {
                    "pool_id": "p",
                    "workers": [{"agent_definition_id": "default_worker_agent", "allowed_tools": ["x.y"]}],
                }
            ]
        },
    ],
    ids=["absent", "empty", "unknown-definition", "internal-definition", "no-workers", "unknown-tool"],
)
async def test_orchestrator_needs_a_valid_pool(soong_env: SoongEnv, agents: dict[str, Any]) -> None:
    """Case J1."""
    fake = FakeProvider(text("normal mode still works"))
    async with open_runtime(soong_env, fake, config=roomy({"agents": agents})) as rt:
        with pytest.raises(AgentCoreError) as info:
            await rt.start("do task", mode="orchestrator")
        assert info.value.code == "config_error"
        assert _counts(soong_env) == (0, 0)
        assert fake.requests == []
        run = await rt.start("hello", mode="normal")
        assert (await finish(run)).value == "completed"
    assert _counts(soong_env) == (1, 1)


async def test_orchestrator_root_agent(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider(text("ok"))) as rt:
        run = await rt.start("do task", mode="orchestrator")
        assert (await finish(run)).value == "completed"
    agents = rows(soong_env, "SELECT * FROM agents WHERE session_id = ?", run.session_id)
    assert len(agents) == 1
    assert agents[0]["agent_type"] == "orchestrator"
    assert json.loads(agents[0]["metadata_json"])["name"] == "Orchestrator"
    assert agents[0]["agent_id"] == run.agent_id


def test_cli_orchestrator_without_pool_exits_nonzero(soong_env: SoongEnv) -> None:
    """Case J1."""
    from tests.fixtures.cli import run_cli

    # a registered provider (never contacted): the pool check must be what fails
    model = {"provider": "ollama", "base_url": "http://127.0.0.1:9"}
    soong_env.write_config(agents={"worker_pools": REMOVE}, model=model)
    result = run_cli(["run", "--orchestrator", "do task"], cwd=soong_env.project, timeout=30)
    assert result.exit_code != 0, result
    assert "worker pool" in result.stderr, result
    assert _counts(soong_env)[0] == 0


async def test_invalid_pool_is_reported_and_excluded(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    router = Router(fake).orch(tool_calls(("agent.list_workers", {}, "c_list")), text("done"))
    config = pools(
        ("broken", [worker("b1", definition="missing_definition")]),
        ("good", [worker("g1")]),
    )
    async with open_runtime(soong_env, fake, config=roomy(config)) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    listed = result_json(result_of(router, "c_list"))["workers"]
    assert [(w["worker_pool_id"], w["worker_agent_id"]) for w in listed] == [("good", "g1")]
    errors = [e for e in events(soong_env, run.session_id, "error") if e["run_id"] == run.run_id]
    assert len(errors) == 1
    assert errors[0]["payload"]["code"] == "config_error"
    assert errors[0]["payload"]["details"]["pool_id"] == "broken"


async def test_list_workers(soong_env: SoongEnv) -> None:
    """Cases J2, J4, J11."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(
            ("agent.list_workers", {}, "c_all"), ("agent.list_workers", {"worker_pool_id": "nope"}, "c_bad")
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config=roomy(two_workers())) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    listed = result_json(result_of(router, "c_all"))["workers"]
    assert [w["worker_agent_id"] for w in listed] == ["w1", "w2"]
    for item in listed:
        assert set(item) == {
            "worker_agent_id",
            "agent_definition_id",
            "name",
            "description",
            "worker_pool_id",
            "status",
            "suggested_tools",
            "tags",
        }
        assert item["status"] == "idle"
        assert item["agent_definition_id"] == "default_worker_agent"
        assert item["worker_pool_id"] == "default"
        assert "recent_results" not in item
        for tool in item["suggested_tools"]:
            assert set(tool) <= {"name", "available", "unavailable_reason"}
    assert error_code(result_of(router, "c_bad")) == "validation_error"
    # only configured workers exist: listing creates no agent rows
    agents = rows(soong_env, "SELECT agent_type FROM agents WHERE session_id = ?", run.session_id)
    assert [a["agent_type"] for a in agents] == ["orchestrator"]


async def test_structural_pool_errors_fail_startup(soong_env: SoongEnv) -> None:
    """Cases J3, J12."""
    duplicate = pools(("default", [worker("w1"), worker("w1")]))
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, FakeProvider(), config=duplicate):
            pass
    assert info.value.code == "config_error"
    counted = pools(("default", [worker("w1", count=3)]))
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, FakeProvider(), config=counted):
            pass
    assert info.value.code == "config_error"
    # the same explicit worker_id in two different pools is fine
    fake = FakeProvider()
    router = Router(fake).orch(tool_calls(("agent.list_workers", {}, "c")), text("ok"))
    # the orchestrator's prompt with every default tool outgrew the baseline's 8192-token window
    async with open_runtime(
        soong_env, fake, config=roomy(pools(("a", [worker("w1")]), ("b", [worker("w1")])))
    ) as rt:
        await finish(await rt.start("go", mode="orchestrator"))
    listed = result_json(result_of(router, "c"))["workers"]
    assert [(w["worker_pool_id"], w["worker_agent_id"]) for w in listed] == [("a", "w1"), ("b", "w1")]


async def _listed_ids(env: SoongEnv, config: dict[str, Any]) -> list[str]:
    fake = FakeProvider()
    router = Router(fake).orch(tool_calls(("agent.list_workers", {}, "c")), text("ok"))
    async with open_runtime(env, fake, config=roomy(config)) as rt:
        await finish(await rt.start("go", mode="orchestrator"))
    return [w["worker_agent_id"] for w in result_json(result_of(router, "c"))["workers"]]


async def test_generated_worker_ids_are_stable(soong_env: SoongEnv) -> None:
    """Case J13."""
    helper_definition(soong_env)
    same = pools(("default", [worker(), worker()]))
    first = await _listed_ids(soong_env, same)
    assert first == ["default_w1_default_worker_agent", "default_w2_default_worker_agent"]
    assert await _listed_ids(soong_env, same) == first
    mixed = pools(("default", [worker(), worker(definition="helper_worker")]))
    before = await _listed_ids(soong_env, mixed)
    swapped = pools(("default", [worker(definition="helper_worker"), worker()]))
    after = await _listed_ids(soong_env, swapped)
    assert before == ["default_w1_default_worker_agent", "default_w2_helper_worker"]
    assert after == ["default_w1_helper_worker", "default_w2_default_worker_agent"]
    assert set(before) != set(after)


def test_worker_agent_ids_are_deterministic_per_session_pool_and_worker() -> None:
    a = worker_agent_id("sess_1", "default", "w1")
    assert a == worker_agent_id("sess_1", "default", "w1")
    assert a.startswith("agent_")
    others = {worker_agent_id("sess_2", "default", "w1"), worker_agent_id("sess_1", "p", "w1")}
    others.add(worker_agent_id("sess_1", "default", "w2"))
    assert a not in others and len(others) == 3


async def test_default_pool_rule(soong_env: SoongEnv) -> None:
    """Without ``worker_pool_id`` the pool named ``default`` is used, else the first valid pool."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(("agent.dispatch_worker", {"task_id": "t1", "instruction": "job:x"}, "c_d")),
        text("ok"),
    )
    config = pools(("alpha", [worker("a1")]), ("beta", [worker("b1")]))
    async with open_runtime(soong_env, fake, config=roomy(config)) as rt:
        await finish(await rt.start("go", mode="orchestrator"))
    assert result_json(result_of(router, "c_d"))["worker_pool_id"] == "alpha"
    assert result_json(result_of(router, "c_d"))["worker_agent_id"] == "a1"


async def test_role_restricted_agent_tools(soong_env: SoongEnv) -> None:
    """Case J22."""
    fake = FakeProvider()
    router = Router(fake).orch(tool_calls(("agent.fork_agent", {"task": "x"}, "c_fork")), text("ok"))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
        orch_tools = {t.name for t in router.orchestrator_requests[0].tools}
        assert "agent.fork_agent" not in orch_tools
        assert {"agent.list_workers", "agent.dispatch_worker", "agent.create_sub_agent"} <= orch_tools
        assert error_code(result_of(router, "c_fork")) == "tool_not_available"
        fake.script(
            tool_calls(
                ("agent.list_workers", {}, "m_list"),
                ("agent.dispatch_worker", {"task_id": "t", "instruction": "i"}, "m_d"),
            ),
            text("ok"),
        )
        main = await rt.start("go", mode="normal")
        await finish(main)
    main_request = fake.requests[-1]
    main_tools = {t.name for t in fake.requests[-2].tools}
    assert not {"agent.list_workers", "agent.dispatch_worker"} & main_tools
    from tests.fixtures.orchestrator import result_for

    assert error_code(result_for([main_request], "m_list")) == "tool_not_available"
    assert error_code(result_for([main_request], "m_d")) == "tool_not_available"


async def test_busy_workers_show_their_run_and_step(soong_env: SoongEnv) -> None:
    """Cases J2, J4: Both same-type workers can be dispatched explicitly; while w2 runs, listing shows it busy
    with its run and claimed step, and w1 idle without those fields."""
    gate = asyncio.Event()
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2")), "c")),
        tool_calls(
            (
                "agent.dispatch_worker",
                {"task_id": "t1", "instruction": "job:one", "worker_agent_id": "w1"},
                "d1",
            )
        ),
        tool_calls(
            (
                "agent.dispatch_worker",
                {"task_id": "t1", "instruction": "job:two", "worker_agent_id": "w2"},
                "d2",
            )
        ),
        text("done"),
    )
    router.job("one", text("{}"))
    router.job(
        "two",
        tool_calls(("agent.task_claim_step", {"task_id": "t1", "step_id": "s2"}, "claim")),
        hang(gate, then=text("{}")),
    )
    async with open_runtime(soong_env, fake, config=roomy(two_workers())) as rt:
        run = await rt.start("go", mode="orchestrator")
        dispatcher = rt._features().tasks.load().dispatcher
        await wait_for(lambda: any(len(r) >= 2 for r in router.worker_requests.values()), timeout=10)
        busy = {w["worker_agent_id"]: w for w in dispatcher.list_workers(run.session_id, None)["workers"]}
        gate.set()
        await finish(run)
        after = {
            w["worker_agent_id"]: w["status"]
            for w in dispatcher.list_workers(run.session_id, None)["workers"]
        }
    two = result_json(result_of(router, "d2"))
    assert result_json(result_of(router, "d1"))["worker_agent_id"] == "w1" and two["worker_agent_id"] == "w2"
    assert busy["w2"]["status"] == "busy"
    assert busy["w2"]["current_run_id"] == two["child_run_id"] and busy["w2"]["current_step_id"] == "s2"
    assert busy["w1"]["status"] == "idle"
    assert "current_run_id" not in busy["w1"] and "current_step_id" not in busy["w1"]
    assert after == {"w1": "idle", "w2": "idle"}
