"""Sub and fork agents through the public API (docs/multi-agent.md; cases area I).

The fake stream helper routes child requests by a marker in their ``<delegated_task>`` text
(:class:`tests.fixtures.multi_agent.ChildRouter`); main-agent turns come from the script.

Traceability: the case ids (``I5``, ``D9``) of docs/testing.md#case-catalogue are in the test docstrings.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from agent_core import AgentCoreError, AgentDefinition, ErrorCode, RunStatus, RuntimeEvent, ToolDefinition
from agent_core.types.content import JsonBlock, ToolCallBlock
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import fail, text, tool_calls
from tests.fixtures.multi_agent import (
    ChildRouter,
    child_done,
    child_json,
    instructions_text,
    message_text,
    request_text,
    routed_fake,
    system_text,
    tool_results,
)
from tests.fixtures.runtime import collect, open_runtime, rows, types
from tests.fixtures.tool_pipeline import PermissionRecorder

CHILD_BLACKLIST = {
    "agent.create_sub_agent",
    "agent.fork_agent",
    "agent.dispatch_worker",
    "agent.list_agent_definitions",
    "agent.list_workers",
    "agent.plan_template",
    "internal.recall_memory",
}


def result_data(request: Any, call_id: str) -> tuple[bool, dict[str, Any], Any]:
    """(is_error, JSON content, error) of the tool result for ``call_id`` in ``request``."""
    block = next(b for b in tool_results(request) if b.tool_call_id == call_id)
    data = next(b.data for b in block.content if isinstance(b, JsonBlock))
    assert isinstance(data, dict)
    return block.is_error, data, block.error


def child_rows(env: SoongEnv, session_id: str) -> list[Any]:
    return rows(
        env,
        "SELECT * FROM agents WHERE session_id = ? AND parent_agent_id IS NOT NULL ORDER BY created_at",
        session_id,
    )


def child_run_rows(env: SoongEnv, session_id: str) -> list[Any]:
    return rows(
        env,
        "SELECT r.* FROM runs r JOIN agents a ON a.agent_id = r.agent_id "
        "WHERE r.session_id = ? AND a.parent_agent_id IS NOT NULL",
        session_id,
    )


async def test_create_sub_agent_default(soong_env: SoongEnv) -> None:
    """Cases I7, I18, I20, I29."""
    router = ChildRouter().add("MARK-SUB", child_done("sub finished", findings=["f1"]))
    fake = routed_fake(
        router,
        text("first answer EARLIER-PARENT-TEXT"),
        tool_calls(
            (
                "agent.create_sub_agent",
                {"task": "MARK-SUB do x", "context": "CTX-TEXT", "constraints": ["be brief", "no writes"]},
                "call_sub",
            )
        ),
        text("all done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        first = await rt.start("EARLIER-USER-TEXT")
        await collect(first)
        run = await rt.start("delegate please", session_id=first.session_id)
        events = await collect(run)
        assert run.status == RunStatus.completed, run.error
    names = types(events)
    assert (
        names.index("child_agent_created")
        < names.index("child_agent_completed")
        < names.index("run_completed")
    )
    created = next(e for e in events if e.event_type == EventType.child_agent_created)
    assert created.run_id == run.run_id and created.agent_id == run.agent_id
    assert created.data["agent_definition_id"] == "default_sub_agent"
    assert created.data["definition_source"] == "builtin"
    assert (created.data["agent_type"], created.data["purpose"]) == ("sub", "sub")
    assert created.data["tool_call_id"] == "call_sub"
    # the parent's next request: the structured result only
    is_error, data, _ = result_data(fake.requests[-1], "call_sub")
    assert not is_error
    assert set(data) == {"child_agent_id", "child_run_id", "stream_id", "agent_definition_id", "result"}
    assert data["stream_id"] == data["child_run_id"] == created.data["child_run_id"]
    assert data["agent_definition_id"] == "default_sub_agent"
    result = data["result"]
    assert set(result) == {
        "status",
        "summary",
        "findings",
        "artifacts",
        "step_id",
        "proposed_actions",
        "metadata",
    }
    assert (result["status"], result["summary"], result["findings"], result["step_id"]) == (
        "completed",
        "sub finished",
        ["f1"],
        None,
    )
    assert result["metadata"]["agent_definition_id"] == "default_sub_agent"
    assert result["metadata"]["end_reason"] == "completed" and result["metadata"]["turn_count"] == 1
    # the child's first request: its parent's tools and system prompt (issue 33: the prefix the provider
    # has cached), then the delegated task as a user block (no parent history) and the child's own
    # instructions as system updates: its definition body, role, tool catalog and runtime state
    child_req = router.first("MARK-SUB")
    parent_req = next(
        r
        for r in fake.requests
        if r.metadata["agent_type"] == "main"
        and r.messages[-1].role == "user"
        and "delegate" in message_text(r.messages[-1])
    )
    assert child_req.tools == parent_req.tools and child_req.system == parent_req.system
    assert child_req.metadata["prompt_cache_key"] == parent_req.metadata["prompt_cache_key"]
    assert [m.role for m in child_req.messages] == ["user"] * len(child_req.messages)
    first_text = child_req.messages[0].content[0].text  # type: ignore[union-attr]
    assert first_text.startswith("<delegated_task>") and first_text.endswith("</delegated_task>")
    for part in ("MARK-SUB do x", "CTX-TEXT", "- be brief", "- no writes"):
        assert part in first_text
    everything = request_text(child_req)
    assert "EARLIER-USER-TEXT" not in everything and "EARLIER-PARENT-TEXT" not in everything
    updates = {m.metadata["block_id"]: message_text(m) for m in child_req.messages[1:]}
    assert all(m.metadata["source"] == "system_update" for m in child_req.messages[1:])
    assert updates["agent_definition:default_sub_agent"].count("# Default Sub-Agent") == 1
    assert "agent_role: sub" in updates["runtime.role"] and "agent_role: sub" in updates["runtime_state"]
    system = instructions_text(child_req)
    assert "MARK-SUB" not in system and "CTX-TEXT" not in system
    assert not [
        b
        for r in fake.requests
        if r.metadata["agent_type"] == "main"
        for b in r.system
        if b.block_id.startswith("agent_definition:")
    ]
    description = "General-purpose helper for one self-contained task"
    assert description not in everything
    # persisted rows
    sid = run.session_id
    (agent,) = child_rows(soong_env, sid)
    root = rows(soong_env, "SELECT root_agent_id FROM sessions WHERE session_id = ?", sid)[0]["root_agent_id"]
    assert agent["agent_id"] == data["child_agent_id"] and agent["session_id"] == sid
    assert (agent["agent_type"], agent["parent_agent_id"], agent["created_by_run_id"]) == (
        "sub",
        root,
        run.run_id,
    )
    assert agent["status"] == "completed" and agent["fork_from_node_id"] is None
    meta = json.loads(agent["metadata_json"])
    assert meta["purpose"] == "sub" and meta["agent_definition_id"] == "default_sub_agent"
    assert meta["definition_source"] == "builtin"
    assert json.loads(agent["result_json"])["summary"] == "sub finished"
    (child_run,) = child_run_rows(soong_env, sid)
    run_meta = json.loads(child_run["metadata_json"])
    assert run_meta["parent_run_id"] == run.run_id and run_meta["parent_agent_id"] == root
    assert run_meta["tool_call_id"] == "call_sub" and run_meta["model"]["name"] == "test-model"
    assert child_run["status"] == "completed"
    nodes = rows(
        soong_env, f'SELECT * FROM "nodes_{sid}" WHERE run_id = ? ORDER BY node_seq', child_run["run_id"]
    )
    assert nodes[0]["parent_id"] is None and nodes[0]["role"] == "user"
    assert child_run["start_node_id"] == nodes[0]["node_id"]
    node_meta = json.loads(nodes[0]["metadata_json"])
    assert node_meta["synthetic"] is True and node_meta["source"] == "agent_tool"
    assert (node_meta["parent_run_id"], node_meta["tool_call_id"]) == (run.run_id, "call_sub")
    # the parent-side record is the ordinary tool-result node with the child ids
    tool_node = rows(soong_env, f"SELECT metadata_json FROM \"nodes_{sid}\" WHERE role = 'tool'")[0]
    tool_meta = json.loads(tool_node["metadata_json"])
    assert (
        tool_meta["child_run_id"] == data["child_run_id"] and tool_meta["stream_id"] == data["child_run_id"]
    )
    # child runs never move the session's active node
    active = rows(soong_env, "SELECT active_node_id FROM sessions WHERE session_id = ?", sid)[0]
    final = rows(
        soong_env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE run_id = ? AND role = 'assistant'", run.run_id
    )
    assert active["active_node_id"] == final[-1]["node_id"]


async def test_inline_instructions_and_model_args_rejected(
    soong_env: SoongEnv,
) -> None:
    """Cases I7, I17."""
    bad_args = [
        ("agent.create_sub_agent", {"task": "x", "system_prompt": "evil"}, "c1"),
        ("agent.create_sub_agent", {"task": "x", "instructions": "evil"}, "c2"),
        ("agent.create_sub_agent", {"task": "x", "system": "evil"}, "c3"),
        ("agent.fork_agent", {"task": "x", "system_prompt": "evil"}, "c4"),
        ("agent.fork_agent", {"task": "x", "instructions": "evil"}, "c5"),
        ("agent.create_sub_agent", {"task": "x", "model": "big"}, "c6"),
        ("agent.create_sub_agent", {"task": "x", "model_profile": "small"}, "c7"),
        ("agent.fork_agent", {"task": "x", "model_profile": {"name": "big"}}, "c8"),
        ("agent.create_sub_agent", {"task": "   "}, "c9"),
        ("agent.create_sub_agent", {"task": "x", "agent_definition_id": "nope"}, "c10"),
        ("agent.create_sub_agent", {"task": "x", "agent_definition_id": "default_compact_agent"}, "c11"),
        ("agent.fork_agent", {"task": "x", "agent_definition_id": "default_compact_agent"}, "c12"),
    ]
    fake = routed_fake(ChildRouter(), tool_calls(*bad_args), text("ok"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("try")
        await collect(run)
        assert run.status == RunStatus.completed
    assert len(fake.requests) == 2  # no child model request
    results = {b.tool_call_id: b for b in tool_results(fake.requests[-1])}
    for _name, _args, call_id in bad_args:
        assert results[call_id].is_error and results[call_id].error is not None
        assert results[call_id].error.code == ErrorCode.validation_error, call_id
    assert child_rows(soong_env, run.session_id) == []
    assert len(rows(soong_env, "SELECT run_id FROM runs")) == 1


async def test_allowed_tools_narrow_the_child(soong_env: SoongEnv) -> None:
    """Cases I8, I21, D12."""
    soong_env.write_home(
        "agents/writer.md",
        "# Writer\nWRITER-BODY",
        {"id": "writer", "name": "Writer", "description": "d", "suggested_tools": ["code.write_file"]},
    )
    router = ChildRouter().add(
        "MARK-NARROW",
        tool_calls(("code.write_file", {"path": "x.txt", "content": "x"}, "w1"), ("nope.tool", {}, "w2")),
        child_done("could not write"),
    )
    fake = routed_fake(
        router,
        tool_calls(
            (
                "agent.create_sub_agent",
                {"task": "MARK-NARROW", "agent_definition_id": "writer", "allowed_tools": ["code.read_file"]},
                "call_n",
            )
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake, permission_callback=PermissionRecorder.never()) as rt:
        run = await rt.start("go")
        await collect(run)
        assert run.status == RunStatus.completed
    first, second = router.requests["MARK-NARROW"]
    assert [t.name for t in first.tools] == ["code.read_file"]
    for call_id in ("w1", "w2"):
        block = next(b for b in tool_results(second) if b.tool_call_id == call_id)
        assert block.is_error and block.error is not None and block.error.code == ErrorCode.tool_not_available
    assert not (soong_env.project / "x.txt").exists()
    is_error, data, _ = result_data(fake.requests[-1], "call_n")
    assert not is_error and data["result"]["status"] == "completed"
    child_run = data["child_run_id"]
    failed = rows(
        soong_env,
        f"SELECT payload_json FROM \"events_{run.session_id}\" WHERE run_id = ? AND event_type = 'tool_failed'",
        child_run,
    )
    reasons = {json.loads(r["payload_json"])["reason"] for r in failed}
    assert reasons == {"tool_not_available"} and len(failed) == 2
    meta = json.loads(rows(soong_env, "SELECT metadata_json FROM runs WHERE run_id = ?", child_run)[0][0])
    assert meta["effective_tools"] == ["code.read_file"] and meta["allowed_tools"] == ["code.read_file"]


async def test_invalid_allowed_tools_start_nothing(soong_env: SoongEnv) -> None:
    """Case I9."""
    bad = [
        ["code.nope"],
        ["no.such_tool"],
        ["agent.create_sub_agent"],
        ["agent.plan_template"],
        ["agent.fork_agent"],
        ["agent.task_create"],
        ["internal.recall_memory"],
        ["code.read_file", "code.run_command"],  # disabled by config
    ]
    calls: list[tuple[str, dict[str, Any], str]] = []
    for i, allowed in enumerate(bad):
        calls.append(("agent.create_sub_agent", {"task": "x", "allowed_tools": allowed}, f"s{i}"))
        calls.append(("agent.fork_agent", {"task": "x", "allowed_tools": allowed}, f"f{i}"))
    fake = routed_fake(ChildRouter(), tool_calls(*calls), text("ok"))
    config = {"tools": {"disabled": ["code.run_command"]}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("try")
        await collect(run)
    results = {b.tool_call_id: b for b in tool_results(fake.requests[-1])}
    assert len(results) == len(calls)
    for _, _, call_id in calls:
        error = results[call_id].error
        assert results[call_id].is_error and error is not None and error.code == ErrorCode.validation_error
    disabled = results["s7"].error
    assert disabled is not None
    assert {"tool": "code.run_command", "reason": "disabled_by_config"} in disabled.details["unavailable"]
    assert results["s0"].error is not None and results["s0"].error.details["unknown_tools"] == ["code.nope"]
    assert len(fake.requests) == 2
    assert child_rows(soong_env, run.session_id) == [] and len(rows(soong_env, "SELECT 1 FROM runs")) == 1


async def test_child_permission_request_context(soong_env: SoongEnv) -> None:
    """Case I10."""
    router = ChildRouter().add(
        "MARK-WRITE",
        tool_calls(("code.write_file", {"path": "out.txt", "content": "hello"}, "w1")),
        child_done("wrote it"),
    )
    fake = routed_fake(
        router, tool_calls(("agent.create_sub_agent", {"task": "MARK-WRITE"}, "call_w")), text("done")
    )
    recorder = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, permission_callback=recorder) as rt:
        run = await rt.start("go")
        events = await collect(run)
    created = next(e for e in events if e.event_type == EventType.child_agent_created).data
    (request,) = recorder.requests
    assert request.tool_name == "code.write_file" and request.agent_role == "sub"
    assert (request.agent_id, request.run_id) == (created["child_agent_id"], created["child_run_id"])
    assert (request.parent_agent_id, request.parent_run_id) == (run.agent_id, run.run_id)
    assert (soong_env.project / "out.txt").read_text() == "hello"


async def test_child_does_not_inherit_parent_tools(
    soong_env: SoongEnv,
) -> None:
    """Cases I24, I28."""
    router = ChildRouter().add("MARK-SUB", child_done()).add("MARK-FORK", child_done())
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-SUB"}, "c1"),
            ("agent.fork_agent", {"task": "MARK-FORK"}, "c2"),
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.echo",
                description="Echo.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            lambda args, ctx: "echo",
        )
        run = await rt.start("go")
        await collect(run)
    parent_tools = {t.name for t in fake.requests[0].tools}
    assert {"agent.create_sub_agent", "agent.fork_agent", "agent.list_agent_definitions"} <= parent_tools
    # internal.ask_user is not offered to children by default (a parent may grant it in allowed_tools)
    parent_only = CHILD_BLACKLIST | {"internal.ask_user"}
    expected = {n for n in parent_tools if not n.startswith("agent.") and n not in parent_only}
    # children send their parent's tool definitions (the parent's prompt prefix, issue 33); what they may
    # call is their own effective set, which their tool catalog names and the pipeline enforces
    for marker, agent_type in (("MARK-SUB", "sub"), ("MARK-FORK", "fork")):
        child = router.first(marker)
        assert {t.name for t in child.tools} == parent_tools
        (meta,) = [
            json.loads(row["metadata_json"])
            for row in rows(soong_env, "SELECT metadata_json FROM runs")
            if json.loads(row["metadata_json"]).get("agent_type") == agent_type
        ]
        effective = set(meta["effective_tools"])
        assert not effective & CHILD_BLACKLIST and not {n for n in effective if n.startswith("agent.")}
        assert {"code.read_file", "code.write_file", "demo.echo"} <= effective
        assert effective == expected
        catalog = next(
            message_text(m) for m in child.messages if m.metadata.get("block_id") == "runtime.tool_catalog"
        )
        assert "agent.fork_agent" not in catalog and "demo.echo" in catalog
    # a child narrowed by allowed_tools is shown only those (its own prompt)


async def test_child_calls_to_parent_only_tools_are_not_available(
    soong_env: SoongEnv,
) -> None:
    """Cases I15, I27."""
    forbidden = [
        ("agent.list_agent_definitions", {}, "x1"),
        ("agent.fork_agent", {"task": "t"}, "x2"),
        ("agent.create_sub_agent", {"task": "t"}, "x3"),
        ("agent.task_create", {"task_id": "t"}, "x4"),
        ("agent.task_get", {"task_id": "t"}, "x5"),
        ("agent.dispatch_worker", {"task_id": "t", "instruction": "i"}, "x6"),
    ]
    router = (
        ChildRouter()
        .add("MARK-SUB", tool_calls(*forbidden), child_done())
        .add("MARK-FORK", tool_calls(*forbidden), child_done())
    )
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-SUB"}, "c1"),
            ("agent.fork_agent", {"task": "MARK-FORK"}, "c2"),
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        await collect(run)
        assert run.status == RunStatus.completed
    for marker in ("MARK-SUB", "MARK-FORK"):
        second = router.requests[marker][1]
        for _name, _args, call_id in forbidden:
            block = next(b for b in tool_results(second) if b.tool_call_id == call_id)
            assert block.error is not None and block.error.code == ErrorCode.tool_not_available, (
                marker,
                call_id,
            )
    assert len(child_rows(soong_env, run.session_id)) == 2  # no grandchildren


async def test_main_agent_has_no_worker_tools(soong_env: SoongEnv) -> None:
    fake = routed_fake(
        ChildRouter(),
        tool_calls(
            ("agent.list_workers", {}, "w1"),
            ("agent.dispatch_worker", {"task_id": "t", "instruction": "i"}, "w2"),
        ),
        text("ok"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        await collect(run)
    names = {t.name for t in fake.requests[0].tools}
    assert "agent.list_workers" not in names and "agent.dispatch_worker" not in names
    for block in tool_results(fake.requests[-1]):
        assert block.error is not None and block.error.code == ErrorCode.tool_not_available


async def test_orchestrator_creates_sub_agents_but_cannot_fork(soong_env: SoongEnv) -> None:
    """Case I7."""
    router = ChildRouter().add("MARK-ORCH", child_done("helper done"))
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-ORCH"}, "c1"),
            ("agent.fork_agent", {"task": "MARK-ORCH"}, "c2"),
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("plan", mode="orchestrator")
        await collect(run)
        assert run.status == RunStatus.completed
    orch_tools = {t.name for t in fake.requests[0].tools}
    assert "agent.create_sub_agent" in orch_tools and "agent.fork_agent" not in orch_tools
    ok, data, _ = result_data(fake.requests[-1], "c1")
    assert not ok and data["agent_definition_id"] == "default_sub_agent"
    fork = next(b for b in tool_results(fake.requests[-1]) if b.tool_call_id == "c2")
    assert fork.error is not None and fork.error.code == ErrorCode.tool_not_available
    (agent,) = child_rows(soong_env, run.session_id)
    assert json.loads(agent["metadata_json"])["agent_definition_id"] == "default_sub_agent"
    assert len(router.requests["MARK-ORCH"]) == 1


async def test_model_profile_resolution(soong_env: SoongEnv) -> None:
    """Case I25."""
    soong_env.write_home(
        "agents/small.md",
        "# Small\nbody",
        {"id": "small-def", "name": "S", "description": "d", "model_profile": "small"},
    )
    soong_env.write_home(
        "agents/warm.md",
        "# Warm\nbody",
        {"id": "warm-def", "name": "W", "description": "d", "model_profile": {"temperature": 0.7}},
    )
    router = (
        ChildRouter()
        .add("MARK-SMALL", child_done())
        .add("MARK-WARM", child_done())
        .add("MARK-POLICY", child_done())
    )
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-SMALL", "agent_definition_id": "small-def"}, "c1"),
            ("agent.create_sub_agent", {"task": "MARK-WARM", "agent_definition_id": "warm-def"}, "c2"),
        ),
        text("next"),
        tool_calls(
            ("agent.create_sub_agent", {"task": "MARK-POLICY", "agent_definition_id": "small-def"}, "c3")
        ),
        text("done"),
    )
    config = {"model_overrides": {"small": {"name": "small-model"}}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("go")
        await collect(run)
        launcher = rt._features().agents.launcher

        def policy(definition: AgentDefinition, role: Any) -> dict[str, Any]:
            return {"name": "policy-model"}

        launcher.model_policy = policy
        run2 = await rt.start("again", session_id=run.session_id)
        await collect(run2)
    small, warm, forced = router.first("MARK-SMALL"), router.first("MARK-WARM"), router.first("MARK-POLICY")
    assert (small.model, small.temperature, small.max_output_tokens) == ("small-model", 0.0, 1024)
    assert (warm.model, warm.temperature) == ("test-model", 0.7)
    assert forced.model == "policy-model"
    models = {
        json.loads(r["metadata_json"])["tool_call_id"]: json.loads(r["metadata_json"])["model"]
        for r in child_run_rows(soong_env, run.session_id)
    }
    assert models["c1"]["name"] == "small-model" and models["c1"]["profile"] == "small"
    assert models["c2"]["temperature"] == 0.7 and models["c3"]["name"] == "policy-model"
    after = next(r for r in fake.requests if any(b.tool_call_id == "c1" for b in tool_results(r)))
    _, data, _ = result_data(after, "c1")
    assert data["result"]["metadata"]["model"]["name"] == "small-model"


async def _child_stream(
    run: Any, until_parent_end: bool = True
) -> tuple[list[RuntimeEvent], list[RuntimeEvent]]:
    """Consumes the parent stream; subscribes to the child stream as soon as ``child_agent_created`` arrives."""
    parent_events: list[RuntimeEvent] = []
    child_events: list[RuntimeEvent] = []
    tasks: list[asyncio.Task[None]] = []

    async def drain(iterator: Any) -> None:
        async for event in iterator:
            child_events.append(event)

    async for event in run.events():
        parent_events.append(event)
        if event.event_type == EventType.child_agent_created:
            tasks.append(asyncio.ensure_future(drain(run.child_events(event.data["child_run_id"]))))
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    return parent_events, child_events


async def test_child_stream_and_inspect(soong_env: SoongEnv) -> None:
    """Case I26."""
    router = ChildRouter().add(
        "MARK-STREAM",
        tool_calls(("demo.secret", {}, "s1"), lead_text="CHILD-THINKING"),
        text(child_json("stream done"), chunks=4),
    )
    fake = routed_fake(
        router, tool_calls(("agent.create_sub_agent", {"task": "MARK-STREAM"}, "c1")), text("done")
    )
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(
            ToolDefinition(
                name="demo.secret",
                description="Returns a payload with a sensitive key.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            lambda args, ctx: {"api_key": "k-123456", "value": 1},
        )
        run = await rt.start("go")
        parent_events, child_events = await _child_stream(run)
        assert run.status == RunStatus.completed
        child_run_id = next(e for e in parent_events if e.event_type == EventType.child_agent_created).data[
            "child_run_id"
        ]
        # the child stream: its own loop from loop_started to run_completed, with deltas
        child_names = types(child_events)
        assert child_names[0] == "loop_started" and child_names[-1] == "run_completed"
        assert {
            "message_created",
            "message_delta",
            "tool_started",
            "tool_completed",
            "loop_completed",
        } <= set(child_names)
        assert all(e.run_id == child_run_id for e in child_events)
        # the parent stream: only summary events of the child
        parent_child_types = {e.event_type.value for e in parent_events if e.run_id != run.run_id}
        assert parent_child_types == set()
        assert not any("CHILD-THINKING" in json.dumps(e.data) for e in parent_events)
        assert "child_agent_created" in types(parent_events) and "child_agent_completed" in types(
            parent_events
        )
        # a terminal child's stream ends immediately; unknown ids are rejected
        assert [e async for e in run.child_events(child_run_id)] == []
        with pytest.raises(AgentCoreError) as err:
            run.child_events(run.run_id)
        assert err.value.code == ErrorCode.validation_error
        # inspect_child: separate collections, RunInfo and the ChildAgentResult, redacted by default
        info = await run.inspect_child(child_run_id)
        assert info.run.run_id == child_run_id and info.run.parent_run_id == run.run_id
        assert info.run.agent_type == "sub" and info.run.purpose == "sub"
        assert (
            info.agent.agent_definition_id == "default_sub_agent"
            and info.agent.parent_agent_id == run.agent_id
        )
        assert info.nodes and all(n.run_id == child_run_id for n in info.nodes)
        assert info.events and all(e.run_id == child_run_id for e in info.events)
        assert info.result is not None and info.result.summary == "stream done"
        assert info.redacted
        assert '"api_key":"[REDACTED]"' in json.dumps(
            [n.model_dump(mode="json") for n in info.nodes], separators=(",", ":")
        )
        sensitive = await run.inspect_child(child_run_id, include_sensitive=True)
        assert '"api_key":"k-123456"' in json.dumps(
            [n.model_dump(mode="json") for n in sensitive.nodes], separators=(",", ":")
        )
        with pytest.raises(AgentCoreError) as err2:
            await run.inspect_child("run_20200101_000000_000000000000")
        assert err2.value.code == ErrorCode.validation_error
    # the parent's prompt never saw the child's transcript
    assert "CHILD-THINKING" not in request_text(fake.requests[-1]) and "k-123456" not in request_text(
        fake.requests[-1]
    )


async def test_replay_session_has_child_summaries_not_transcripts(soong_env: SoongEnv) -> None:
    router = ChildRouter().add(
        "MARK-R",
        tool_calls(("code.list_dir", {"path": "."}, "l1"), lead_text="CHILD-TRANSCRIPT"),
        child_done("replayed"),
    )
    fake = routed_fake(router, tool_calls(("agent.create_sub_agent", {"task": "MARK-R"}, "c1")), text("done"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        await collect(run)
        replay = await rt.replay_session(run.session_id)
    assert all(n.agent_id == run.agent_id for n in replay.nodes)
    assert "CHILD-TRANSCRIPT" not in replay.model_dump_json()
    names = {e.event_type.value for e in replay.events}
    assert {"child_agent_created", "child_agent_completed"} <= names
    assert "loop_started" in names and all(e.agent_id in (run.agent_id, None) for e in replay.events)
    (child,) = replay.children
    assert (child.agent_type, child.purpose, child.status, child.result_summary) == (
        "sub",
        "sub",
        "completed",
        "replayed",
    )


async def test_fork_inherits_the_active_path_only(soong_env: SoongEnv) -> None:
    """Case I27."""
    router = ChildRouter().add("MARK-FORK", child_done("forked"))
    fake = routed_fake(
        router,
        text("ROOT-ANSWER"),
        text("SIBLING-ANSWER"),
        fail(after_text="PARTIAL-FAILED-TEXT"),
        tool_calls(("code.list_dir", {"path": "."}, "l0")),
        tool_calls(
            ("agent.fork_agent", {"task": "MARK-FORK explore"}, "call_f"),
            ("code.list_dir", {"path": "."}, "l1"),
            lead_text="LEAD-TEXT",
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        root = await rt.start("ROOT-QUESTION")
        await collect(root)
        sibling = await rt.start("SIBLING-QUESTION", session_id=root.session_id)
        await collect(sibling)
        sid = root.session_id
        root_answer = rows(
            soong_env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE role = 'assistant' ORDER BY node_seq"
        )[0]
        await rt.switch_node(sid, root_answer["node_id"])
        failed = await rt.start("FAILED-QUESTION", session_id=sid)
        await collect(failed)
        assert failed.status == RunStatus.failed
        run = await rt.start("FORK-PARENT-QUESTION", session_id=sid)
        await collect(run)
        assert run.status == RunStatus.completed, run.error
    fork_req = router.first("MARK-FORK")
    everything = request_text(fork_req)
    for present in ("ROOT-QUESTION", "ROOT-ANSWER", "FAILED-QUESTION", "FORK-PARENT-QUESTION", "LEAD-TEXT"):
        assert present in everything, present
    for absent in ("SIBLING-QUESTION", "SIBLING-ANSWER", "PARTIAL-FAILED-TEXT"):
        assert absent not in everything, absent
    assert not [
        b
        for m in fork_req.messages
        for b in m.content
        if isinstance(b, ToolCallBlock) and b.tool_call_id in ("call_f", "l1")
    ]
    # the fork's request starts with its parent's last request (tools, system prompt, conversation) and
    # gets its own role, tools, definition and runtime state as system updates after its delegated task
    parent_req = fake.requests[-3]
    assert fork_req.tools == parent_req.tools and fork_req.system == parent_req.system
    assert fork_req.messages[: len(parent_req.messages)] == parent_req.messages
    delegated = next(i for i, m in enumerate(fork_req.messages) if "<delegated_task>" in message_text(m))
    updates = fork_req.messages[delegated + 1 :]
    assert {m.metadata["block_id"] for m in updates} >= {
        "runtime.role",
        "runtime.tool_catalog",
        "agent_definition:default_fork_agent",
        "runtime_state",
    }
    assert all(m.role == "user" and m.metadata["source"] == "system_update" for m in updates)
    noted = "\n".join(message_text(m) for m in updates)
    assert "# Default Fork Agent" in noted and "agent_role: fork" in noted
    assert "agent_role: main" in system_text(fork_req)  # the parent's block, replaced by the update
    assert fork_req.metadata["prompt_cache_key"] == parent_req.metadata["prompt_cache_key"]
    # fork_from_node_id is the assistant node that issued the call; the first fork node hangs below it
    (agent,) = child_rows(soong_env, sid)
    assert agent["agent_type"] == "fork" and json.loads(agent["metadata_json"])["purpose"] == "fork"
    caller = rows(
        soong_env,
        f"SELECT node_id, content_json FROM \"nodes_{sid}\" WHERE run_id = ? AND role = 'assistant' ORDER BY node_seq",
        run.run_id,
    )
    calling = next(r for r in caller if "call_f" in r["content_json"])
    assert agent["fork_from_node_id"] == calling["node_id"]
    first = rows(
        soong_env,
        f'SELECT parent_id, agent_id FROM "nodes_{sid}" WHERE agent_id = ? ORDER BY node_seq',
        agent["agent_id"],
    )[0]
    assert first["parent_id"] == calling["node_id"]
    assert not any(
        "<delegated_task>" in json.dumps(m.model_dump(mode="json")) for m in fake.requests[-1].messages
    )


async def test_fork_override_body_and_empty_body_fallback(soong_env: SoongEnv) -> None:
    """Cases I5, I19."""
    soong_env.write_home(
        "agents/fork.md",
        "# Forky\nFORK-OVERRIDE",
        {
            "id": "default_fork_agent",
            "name": "F",
            "description": "d",
            "overrides": "builtin:default_fork_agent",
        },
    )
    soong_env.write_home("agents/empty.md", "", {"id": "empty-body", "name": "E", "description": "d"})
    router = ChildRouter().add("MARK-FORK", child_done()).add("MARK-EMPTY", child_done())
    fake = routed_fake(
        router,
        tool_calls(
            ("agent.fork_agent", {"task": "MARK-FORK"}, "c1"),
            (  # narrowed by allowed_tools: its own prompt, the definition block in its system prompt
                "agent.create_sub_agent",
                {
                    "task": "MARK-EMPTY",
                    "agent_definition_id": "empty-body",
                    "allowed_tools": ["code.read_file"],
                },
                "c2",
            ),
        ),
        text("done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("go")
        await collect(run)
    fork_req = router.first("MARK-FORK")
    fork_definition = "\n".join(
        message_text(m) for m in fork_req.messages if m.metadata.get("source") == "system_update"
    )  # a fork gets its definition after its parent's prompt (issue 33)
    assert "FORK-OVERRIDE" in fork_definition and "# Default Fork Agent" not in fork_definition
    assert "FORK-OVERRIDE" not in system_text(fork_req)
    empty_blocks = {b.block_id: b for b in router.first("MARK-EMPTY").system}
    block = empty_blocks["agent_definition:empty-body"]
    assert (
        block.content.startswith("# Default Sub-Agent")
        and block.metadata["body_origin"] == "default_fallback"
    )
    assert block.metadata["template_id"] == "agent.default_sub_agent"
