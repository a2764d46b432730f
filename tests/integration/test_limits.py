"""``[limits]`` and loop detection through the public API (docs/runs.md#limits).

Every limit is reached once (a sub-agent spending its parent's budget included); the final answer call
carries no tools and the runtime note; end reasons, statuses and ``error.details.limit`` are those of
docs/runs.md#limits.
"""

from __future__ import annotations

import asyncio
from typing import Any

from agent_core import AgentRuntime, EndReason, RunStatus, RuntimeEvent, ToolDefinition
from agent_core.types.content import TextBlock, ToolResultBlock
from agent_core.types.enums import EventType
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, fail, text, tool_calls
from tests.fixtures.multi_agent import ChildRouter, child_done, routed_fake
from tests.fixtures.runtime import collect, open_runtime, rows

ECHO = ToolDefinition(
    name="demo.echo",
    description="Echo x.",
    input_schema={"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]},
    permission="readonly",
)


def echo_tool(rt: AgentRuntime, calls: list[dict[str, Any]], delay: float = 0.0) -> None:
    async def handler(args: dict[str, Any], ctx: object) -> str:
        calls.append(args)
        if delay:
            await asyncio.sleep(delay)
        return f"echo {args['x']}"

    rt.register_tool(ECHO, handler)


def last_text(request: ModelRequest) -> str:
    return "\n".join(b.text for m in request.messages[-1:] for b in m.content if isinstance(b, TextBlock))


def all_text(request: ModelRequest) -> str:
    return "\n".join(b.text for m in request.messages for b in m.content if isinstance(b, TextBlock))


def assert_final_call(request: ModelRequest, limit_word: str) -> None:
    assert request.tools == [] and request.tool_choice == "none"
    note = last_text(request)
    assert "<system_note>Runtime note:" in note and limit_word in note and "final answer" in note


def terminal(events: list[RuntimeEvent]) -> RuntimeEvent:
    return events[-1]


async def test_max_total_tokens_final_answer_without_tools(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    fake = FakeProvider(
        tool_calls(("demo.echo", {"x": "1"})),  # 15 tokens
        tool_calls(("demo.echo", {"x": "2"})),  # 30 tokens: the budget is spent
        text("final answer"),
    )
    async with open_runtime(soong_env, fake, config={"limits": {"max_total_tokens": 30}}) as rt:
        echo_tool(rt, calls)
        run = await rt.start("work")
        events = await collect(run)
    assert len(fake.requests) == 3 and len(calls) == 2
    assert fake.requests[1].tools and fake.requests[1].tool_choice == "auto"
    assert_final_call(fake.requests[2], "max_total_tokens")
    assert run.status == RunStatus.completed and run.end_reason == EndReason.limit_reached
    assert run.error is not None and run.error.details["limit"] == "max_total_tokens"
    assert run.error.details["value"] == 30 and run.error.details["used"] == 30
    done = terminal(events)
    assert done.event_type == EventType.run_completed and done.data["end_reason"] == "limit_reached"
    assert done.data["error"]["details"]["limit"] == "max_total_tokens"
    assert done.data["usage"]["total_tokens"] == 30 + 22 and done.data["usage"]["cost_usd"] is None
    row = rows(soong_env, "SELECT status, end_reason, error_json FROM runs WHERE run_id = ?", run.run_id)[0]
    assert (row["status"], row["end_reason"]) == ("completed", "limit_reached")
    assert '"limit":"max_total_tokens"' in row["error_json"]


async def test_max_tool_calls_skips_the_turn_that_would_exceed(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    fake = FakeProvider(
        tool_calls(("demo.echo", {"x": "1"}, "call_a")),
        tool_calls(("demo.echo", {"x": "2"}, "call_b"), ("demo.echo", {"x": "3"}, "call_c")),
        text("stopping here"),
    )
    async with open_runtime(soong_env, fake, config={"limits": {"max_tool_calls": 2}}) as rt:
        echo_tool(rt, calls)
        run = await rt.start("work")
        events = await collect(run)
    assert calls == [{"x": "1"}]  # the second turn (1 + 2 > 2) never runs
    final = fake.requests[2]
    assert_final_call(final, "max_tool_calls")
    skipped = [b for m in final.messages for b in m.content if isinstance(b, ToolResultBlock)][1:]
    assert [b.tool_call_id for b in skipped] == ["call_b", "call_c"]
    assert all(b.is_error and b.error and b.error.details["limit"] == "max_tool_calls" for b in skipped)
    failed = [e for e in events if e.event_type == EventType.tool_failed]
    assert [e.tool_call_id for e in failed] == ["call_b", "call_c"]
    assert run.status == RunStatus.completed and run.end_reason == EndReason.limit_reached
    assert run.error is not None and run.error.details["limit"] == "max_tool_calls"


async def test_max_tool_calls_reached_exactly_then_final_call(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    fake = FakeProvider(tool_calls(("demo.echo", {"x": "1"})), text("answer"))
    async with open_runtime(soong_env, fake, config={"limits": {"max_tool_calls": 1}}) as rt:
        echo_tool(rt, calls)
        run = await rt.start("work")
        await collect(run)
    assert len(calls) == 1
    assert_final_call(fake.requests[1], "max_tool_calls")
    assert run.end_reason == EndReason.limit_reached and run.status == RunStatus.completed


async def test_max_wall_time_ms(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    fake = FakeProvider(tool_calls(("demo.echo", {"x": "slow"})), text("out of time"))
    async with open_runtime(soong_env, fake, config={"limits": {"max_wall_time_ms": 150}}) as rt:
        echo_tool(rt, calls, delay=0.3)
        run = await rt.start("work")
        await collect(run)
    assert len(fake.requests) == 2
    assert_final_call(fake.requests[1], "max_wall_time_ms")
    assert run.end_reason == EndReason.limit_reached and run.status == RunStatus.completed
    assert run.error is not None and run.error.details["limit"] == "max_wall_time_ms"
    assert run.error.details["used"] >= 150


async def test_max_cost_usd_and_cost_in_usage(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    fake = FakeProvider(
        tool_calls(("demo.echo", {"x": "1"})),  # 10 in / 5 out = $1.10
        tool_calls(("demo.echo", {"x": "2"})),  # $2.20 >= $2
        text("cheap answer"),  # 10 in / 12 out = $1.24
    )
    config = {
        "model": {"price_input_per_mtok": 100_000.0, "price_output_per_mtok": 20_000.0},
        "limits": {"max_cost_usd": 2.0},
    }
    async with open_runtime(soong_env, fake, config=config) as rt:
        echo_tool(rt, calls)
        run = await rt.start("work")
        events = await collect(run)
        replay = await rt.replay_session(run.session_id)
    assert_final_call(fake.requests[2], "max_cost_usd")
    assert run.end_reason == EndReason.limit_reached and run.error is not None
    assert run.error.details["limit"] == "max_cost_usd"
    usage = terminal(events).data["usage"]
    assert abs(usage["cost_usd"] - 3.44) < 1e-9
    assert replay.runs[0].usage is not None and abs(replay.runs[0].usage["cost_usd"] - 3.44) < 1e-9
    assert replay.usage is not None and abs((replay.usage.cost_usd or 0) - 3.44) < 1e-9
    assert replay.usage.input_tokens == 30 and replay.usage.output_tokens == 22


async def test_final_call_that_still_calls_tools_fails(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    fake = FakeProvider(
        tool_calls(("demo.echo", {"x": "1"})),
        tool_calls(("demo.echo", {"x": "2"}, "call_ignored")),
    )
    async with open_runtime(soong_env, fake, config={"limits": {"max_tool_calls": 1}}) as rt:
        echo_tool(rt, calls)
        run = await rt.start("work")
        events = await collect(run)
    assert len(calls) == 1 and len(fake.requests) == 2
    assert run.status == RunStatus.failed and run.end_reason == EndReason.limit_reached
    assert run.error is not None and run.error.details["limit"] == "max_tool_calls"
    assert terminal(events).event_type == EventType.loop_failed
    # the ignored call still has exactly one result
    assert (
        rows(
            soong_env,
            f"SELECT count(*) AS n FROM \"nodes_{run.session_id}\" WHERE role = 'tool' AND content_json LIKE ?",
            "%call_ignored%",
        )[0]["n"]
        == 1
    )


async def test_failed_final_call_ends_failed_with_the_limit(soong_env: SoongEnv) -> None:
    fake = FakeProvider(tool_calls(("demo.echo", {"x": "1"})), fail("provider_error"))
    async with open_runtime(soong_env, fake, config={"limits": {"max_total_tokens": 10}}) as rt:
        echo_tool(rt, [])
        run = await rt.start("work")
        await collect(run)
    assert run.status == RunStatus.failed and run.end_reason == EndReason.limit_reached
    assert run.error is not None and run.error.details["limit"] == "max_total_tokens"
    assert run.error.details["final_call_error"]["code"] == "provider_error"


async def test_limits_max_turns_and_legacy_runtime_key(soong_env: SoongEnv) -> None:
    fake = FakeProvider(*(tool_calls(("demo.echo", {"x": str(i)})) for i in range(2)))
    async with open_runtime(soong_env, fake, config={"limits": {"max_turns": 2}}) as rt:
        echo_tool(rt, [])
        run = await rt.start("work")
        started = (await collect(run))[0]
    assert started.data["max_turns"] == 2
    assert run.end_reason == EndReason.max_turns and len(fake.requests) == 2
    legacy = FakeProvider(tool_calls(("demo.echo", {"x": "a"})))
    async with open_runtime(soong_env, legacy, config={"runtime": {"max_turns": 1}}) as rt:
        echo_tool(rt, [])
        run = await rt.start("work")
        await collect(run)
    assert run.end_reason == EndReason.max_turns and len(legacy.requests) == 1


async def test_sub_agent_spends_the_parents_budget(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    router = ChildRouter().add(
        "MARK-SPEND",
        tool_calls(("demo.echo", {"x": "c1"})),  # tree: 15 (parent) + 15
        tool_calls(("demo.echo", {"x": "c2"})),  # tree: 45 >= 40
        child_done("child stopped at the limit"),
    )
    fake = routed_fake(
        router,
        tool_calls(("agent.create_sub_agent", {"task": "MARK-SPEND burn tokens"}, "call_sub")),
        text("parent final"),
    )
    async with open_runtime(soong_env, fake, config={"limits": {"max_total_tokens": 40}}) as rt:
        echo_tool(rt, calls)
        run = await rt.start("delegate")
        await collect(run)
        tree = (await rt.replay_run(run.run_id)).usage
        session = (await rt.replay_session(run.session_id)).usage
        own = (await rt.replay_session(run.session_id)).runs[0].usage
    assert tree is not None and session is not None and own is not None
    assert tree.runs == 2 and tree == session  # the run's usage includes its sub-agent's
    assert tree.total_tokens > own["total_tokens"] == 15 + 22
    child_requests = router.requests["MARK-SPEND"]
    assert len(child_requests) == 3 and len(calls) == 2
    assert child_requests[1].tools and child_requests[1].tool_choice == "auto"
    assert_final_call(child_requests[2], "max_total_tokens")
    child = rows(
        soong_env,
        "SELECT status, end_reason, error_json FROM runs WHERE session_id = ? AND run_id != ?",
        run.session_id,
        run.run_id,
    )
    assert [(c["status"], c["end_reason"]) for c in child] == [("completed", "limit_reached")]
    parent_requests = [r for r in fake.requests if r.metadata.get("agent_type") == "main"]
    assert len(parent_requests) == 2  # the parent does not get another tool turn: its budget is spent
    assert_final_call(parent_requests[1], "max_total_tokens")
    assert run.status == RunStatus.completed and run.end_reason == EndReason.limit_reached
    assert run.error is not None and run.error.details["limit"] == "max_total_tokens"
    assert run.error.details["used"] >= 40


async def test_loop_detection_after_exactly_the_configured_repeats(soong_env: SoongEnv) -> None:
    calls: list[dict[str, Any]] = []
    same = ("demo.echo", {"x": "same"})
    fake = FakeProvider(
        tool_calls(("demo.echo", {"x": "other"})),
        tool_calls(same),
        tool_calls(same),
        tool_calls(same),  # 3rd repetition: the runtime note
        tool_calls(same),  # 4th: loop_detected
        text("I was going in circles"),
    )
    async with open_runtime(soong_env, fake, config={"limits": {"repeat_tool_call_limit": 3}}) as rt:
        echo_tool(rt, calls)
        run = await rt.start("work")
        await collect(run)
    assert len(calls) == 5 and len(fake.requests) == 6
    notes = ["times in a row" in last_text(r) for r in fake.requests]
    assert notes == [False, False, False, False, True, False]
    assert "3 times in a row" in last_text(fake.requests[4])
    assert fake.requests[4].tools  # after the note the model still has its tools
    assert_final_call(fake.requests[5], "same arguments")
    assert run.status == RunStatus.completed and run.end_reason == EndReason.loop_detected
    assert run.error is not None and run.error.details["limit"] == "repeat_tool_call_limit"
    assert run.error.details["tool_name"] == "demo.echo" and run.error.details["used"] == 4


async def test_different_results_are_not_a_loop(soong_env: SoongEnv) -> None:
    counter = iter(range(100))

    async def handler(args: dict[str, Any], ctx: object) -> str:
        return f"tick {next(counter)}"

    fake = FakeProvider(*(tool_calls(("demo.echo", {"x": "poll"})) for _ in range(4)), text("done"))
    async with open_runtime(soong_env, fake, config={"limits": {"repeat_tool_call_limit": 2}}) as rt:
        rt.register_tool(ECHO, handler)
        run = await rt.start("poll")
        await collect(run)
    assert run.end_reason == EndReason.completed and len(fake.requests) == 5
    assert not any("Runtime note" in all_text(r) for r in fake.requests)
