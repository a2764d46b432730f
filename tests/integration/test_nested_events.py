"""``RunHandle.events(include_children=True)``: descendants' live events on the parent's stream, tagged with
``run_id``, ``agent_id``, ``parent_run_id`` and ``parent_tool_call_id`` (docs/events.md#the-live-stream)."""

from __future__ import annotations

from agent_core import RunStatus
from agent_core.types.enums import EventType
from agent_core.types.runtime import NestedRuntimeEvent
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import text, tool_calls
from tests.fixtures.multi_agent import ChildRouter, child_done, routed_fake
from tests.fixtures.runtime import collect, open_runtime, types


async def test_parent_stream_includes_tagged_child_events(soong_env: SoongEnv) -> None:
    router = ChildRouter().add("MARK-NEST", child_done("nested ok"))
    fake = routed_fake(
        router,
        tool_calls(("agent.create_sub_agent", {"task": "MARK-NEST go"}, "call_sub")),
        text("parent done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("delegate")
        events = [e async for e in run.events(include_children=True)]
    assert run.status == RunStatus.completed
    nested = [e for e in events if isinstance(e, NestedRuntimeEvent)]
    own = [e for e in events if not isinstance(e, NestedRuntimeEvent)]
    assert nested and all(e.run_id == run.run_id for e in own)
    child_run_ids = {e.run_id for e in nested}
    assert len(child_run_ids) == 1 and run.run_id not in child_run_ids
    assert all(e.parent_run_id == run.run_id and e.parent_tool_call_id == "call_sub" for e in nested)
    assert all(e.agent_id and e.agent_id != run.agent_id for e in nested)
    child_types = types(nested)  # type: ignore[arg-type]
    assert child_types[0] == "loop_started" and child_types[-1] == "run_completed"
    assert "message_delta" in child_types and "context_built" not in child_types  # user-visible only
    # live order: the child's events sit between the parent's agent-tool start and its result
    names = [(e.event_type, isinstance(e, NestedRuntimeEvent)) for e in events]
    started = names.index((EventType.tool_started, False))
    done = next(i for i, n in enumerate(names) if n == (EventType.tool_completed, False))
    nested_positions = [i for i, (_, is_nested) in enumerate(names) if is_nested]
    assert started < nested_positions[0] and nested_positions[-1] < done
    assert types(own)[-1] == "run_completed"  # type: ignore[arg-type]


async def test_default_stream_has_no_child_events(soong_env: SoongEnv) -> None:
    router = ChildRouter().add("MARK-QUIET", child_done("quiet"))
    fake = routed_fake(
        router,
        tool_calls(("agent.create_sub_agent", {"task": "MARK-QUIET go"}, "call_sub")),
        text("parent done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("delegate")
        events = await collect(run)
    assert {e.run_id for e in events} == {run.run_id}
    assert not any(isinstance(e, NestedRuntimeEvent) for e in events)
