"""Compaction for every agent kind, and the hidden compact definition (docs/compaction.md#the-compact-fork;
cases M3, M11, M12)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core import AgentDefinition, RunStatus
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.content import ToolResultBlock, text_of
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import Router, create_args, finish, pools, step, worker
from tests.fixtures.runtime import collect, open_runtime, rows, wait_for
from tests.integration.compaction_support import SUMMARY_MARK, compact_turn, is_compact, words

# threshold = max(40000 - 39000, (40000 - 1024) // 2) = 19488: a 25000-token turn on top of any agent's
# static prompt crosses it while everything still fits the window.
LARGE = {
    "model": {"context_window": 40000},
    "compact": {"reserve_tokens": 39000, "keep_recent_tokens": 3000},
}
DONE = '{"status": "completed", "summary": "worker finished"}'


def _compactions(env: SoongEnv, sid: str) -> list[dict[str, Any]]:
    found = rows(env, f"SELECT * FROM \"nodes_{sid}\" WHERE node_type = 'compaction' ORDER BY node_seq")
    return [dict(r) for r in found]


def _compact_forks(env: SoongEnv) -> list[dict[str, Any]]:
    found = rows(env, "SELECT * FROM agents WHERE json_extract(metadata_json, '$.purpose') = 'compact'")
    return [{**dict(r), "metadata": json.loads(r["metadata_json"])} for r in found]


async def test_orchestrator_and_worker_runs_get_compact_forks(soong_env: SoongEnv) -> None:
    """Case M12."""
    fake = FakeProvider()
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c_create")),
        tool_calls(("agent.dispatch_worker", {"task_id": "t1", "instruction": "job:big"}, "c_dispatch")),
        text(words(25000)),
        text("second answer"),
    )
    router.job(
        "big",
        tool_calls(("agent.task_get", {"task_id": "t1"}, "w_get"), lead_text=words(25000)),
        text(DONE),
    )
    fake.route(lambda request: compact_turn() if is_compact(request) else router(request))
    config = {**LARGE, **pools(("default", [worker("w1")]))}
    async with open_runtime(soong_env, fake, config=config) as rt:
        first = await rt.start("plan and dispatch", mode="orchestrator")
        assert (await finish(first)) == RunStatus.completed, first.error
        second = await rt.start("and now?", session_id=first.session_id, mode="orchestrator")
        assert (await finish(second)) == RunStatus.completed, second.error
        sid = first.session_id
        await wait_for(lambda: len(_compactions(soong_env, sid)) == 2)
    forks = _compact_forks(soong_env)
    worker_agent = next(
        r["agent_id"]
        for r in rows(soong_env, "SELECT agent_id, metadata_json FROM agents WHERE session_id = ?", sid)
        if json.loads(r["metadata_json"] or "{}").get("purpose") == "worker"
    )
    assert sorted(f["parent_agent_id"] for f in forks) == sorted([first.agent_id, worker_agent])
    assert all(f["agent_type"] == "fork" and f["metadata"]["mode"] == "auto" for f in forks)
    owners = sorted(c["agent_id"] for c in _compactions(soong_env, sid))
    assert owners == sorted([first.agent_id, worker_agent])
    requests = [r for r in fake.requests if is_compact(r)]
    assert len(requests) == 2 and all(r.tools == [] for r in requests)
    contents = rows(soong_env, f'SELECT content_json FROM "nodes_{sid}"')
    assert not any("agent.fork_agent" in r["content_json"] for r in contents)
    assert SUMMARY_MARK in _compactions(soong_env, sid)[0]["content_json"]


async def test_sub_agent_child_run_gets_a_compact_fork(soong_env: SoongEnv) -> None:
    """Case M12."""
    fake = FakeProvider()

    def route(request: Any) -> Any:
        if is_compact(request):
            return compact_turn()
        if request.metadata.get("agent_type") == "sub":
            done = any(m.role == "tool" for m in request.messages)
            if done:
                return text('{"status": "completed", "summary": "child done"}')
            return tool_calls(("code.list_dir", {"path": "."}, "child_ls"), lead_text=words(25000))
        return None

    fake.route(route)
    fake.script(
        tool_calls(("agent.create_sub_agent", {"task": "look around"}, "c_sub")),
        text("parent done"),
    )
    async with open_runtime(soong_env, fake, config=LARGE) as rt:
        run = await rt.start("delegate")
        await collect(run)
        assert run.status == RunStatus.completed, run.error
        await wait_for(lambda: bool(_compact_forks(soong_env)))
        await wait_for(lambda: bool(_compactions(soong_env, run.session_id)))
    (fork,) = _compact_forks(soong_env)
    child = rows(
        soong_env, "SELECT agent_id, agent_type FROM agents WHERE agent_id = ?", fork["parent_agent_id"]
    )
    assert child[0]["agent_type"] == "sub" and fork["parent_agent_id"] != run.agent_id
    (comp,) = _compactions(soong_env, run.session_id)
    assert comp["agent_id"] == fork["parent_agent_id"]
    root_active = rows(soong_env, "SELECT active_node_id FROM sessions")[0]["active_node_id"]
    assert root_active != comp["node_id"]  # a child's compaction never moves the session's active node


async def test_compact_definition_is_hidden_and_cannot_be_overridden(
    soong_env: SoongEnv,
) -> None:
    """Cases M3, M11."""
    fake = FakeProvider(tool_calls(("agent.list_agent_definitions", {}, "c_list")), text("listed"))
    async with open_runtime(soong_env, fake) as rt:
        for definition in (
            AgentDefinition(
                agent_definition_id="default_compact_agent", name="x", description="x", source="code"
            ),
            AgentDefinition(
                agent_definition_id="my_compact",
                name="x",
                description="x",
                overrides="builtin:default_compact_agent",
                source="code",
            ),
        ):
            with pytest.raises(AgentCoreError) as info:
                rt.register_agent_definition(definition)
            assert info.value.code == ErrorCode.invalid_agent_override
        run = await rt.start("which agents exist?")
        await collect(run)
    result = next(b for m in fake.requests[1].messages for b in m.content if isinstance(b, ToolResultBlock))
    listing = json.dumps([b.model_dump(mode="json") for b in result.content])
    assert not result.is_error and "default_sub_agent" in listing
    assert "default_compact_agent" not in listing and "default_compact_agent" not in text_of(result.content)
