"""Teammates through the public API and the testing kit (issue 36 item 2): a lead spawns two resident
teammates; a message, a plan approval (approved and rejected) and a shutdown round trip, each correlated by
request_id; a due schedule and a teammate message reach the lead through the same inbox; limits, names,
non-resident teammates and sessions of their own."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentCoreError, ErrorCode, RunStatus
from agent_core.testing import CallTool, ModelReply, ModelRequest
from agent_core.types.content import JsonBlock, TextBlock, ToolResultBlock
from tests.fixtures.clock import FakeClock
from tests.integration.team_support import (
    REQUEST_ID,
    Cast,
    last_note,
    settled,
    team_runtime,
    texts,
    until,
)


def spawn(name: str, task: str, **extra: Any) -> CallTool:
    return CallTool("agent.team_spawn", {"name": name, "task": task, **extra})


def call(name: str, **args: Any) -> ModelReply:
    return ModelReply(tool_calls=[CallTool(name, args)])


def result_json(request: ModelRequest) -> list[Any]:
    """The last tool turn's results: JSON data, else text."""
    out: list[Any] = []
    for message in reversed(request.messages):
        if message.role != "tool":
            if out:
                break
            continue
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                data = [b.data for b in block.content if isinstance(b, JsonBlock)]
                text = "".join(b.text for b in block.content if isinstance(b, TextBlock))
                out.insert(0, data[0] if data and not text else (text or None))
    return out


async def test_lead_spawns_two_resident_teammates_and_a_message_round_trip(tmp_path: Path) -> None:
    lead_idle = asyncio.Event()

    async def greet_once_the_lead_is_idle(request: ModelRequest) -> ModelReply:
        await lead_idle.wait()
        return call("agent.team_send", to="lead", content="hello from alice")

    cast = Cast(
        lead=[
            lambda r: ModelReply(tool_calls=[spawn("alice", "greet the lead"), spawn("bob", "stand by")]),
            lambda r: "I started alice and bob",
            lambda r: "alice says hello",  # woken by alice's message
        ],
        alice=[greet_once_the_lead_is_idle, lambda r: "greeted"],
        bob=[lambda r: "standing by"],
    )
    async with team_runtime(tmp_path, cast) as rt:
        run = await rt.start("build a team")
        assert await run.wait() == RunStatus.completed
        lead_idle.set()
        await until(lambda: len(cast.requests("lead")) == 3)
        await settled(rt, run.session_id)
        team = await rt.team(run.session_id)
        assert [(m.name, m.state, m.inbox_depth, m.resident) for m in team] == [
            ("alice", "idle", 0, True),
            ("bob", "idle", 0, True),
        ]
        alice, bob = team
        assert (
            alice.session_id != run.session_id != bob.session_id and alice.lead_session_id == run.session_id
        )
        # each teammate read its task from its inbox, sent by "lead"; its prompt has the team block and
        # no agent.team_spawn
        first = cast.requests("alice")[0]
        assert 'from="lead"' in last_note(first) and "greet the lead" in last_note(first)
        assert first.metadata["session_id"] == alice.session_id
        assert "agent.team_send" in {t.name for t in first.tools}
        assert "agent.team_spawn" not in {t.name for t in first.tools}
        assert "agent.team_spawn" in {t.name for t in cast.requests("lead")[0].tools}
        # the lead was woken by alice's message in a run of its own session
        woken = cast.requests("lead")[2]
        assert woken.metadata["session_id"] == run.session_id and woken.metadata["run_id"] != run.run_id
        assert 'kind="message" from="alice"' in last_note(woken) and "hello from alice" in last_note(woken)
        # every teammate is a session of its own: listed, replayable alone
        listed = {s.session_id: s for s in await rt.list_sessions()}
        assert {run.session_id, alice.session_id, bob.session_id} <= set(listed)
        assert listed[alice.session_id].title == "greet the lead"  # the task it read first
        replay = await rt.replay_session(alice.session_id)
        assert {e.session_id for e in replay.events} == {alice.session_id}
        assert "inbox_drained" in [e.event_type for e in replay.events]
        lead_events = [e.event_type for e in (await rt.replay_session(run.session_id)).events]
        assert lead_events.count("teammate_spawned") == 2


async def test_plan_approval_rejected_then_approved_correlated_by_request_id(tmp_path: Path) -> None:
    acted: list[str] = []

    def lead_answers(request: ModelRequest) -> ModelReply | str:
        note = last_note(request)
        found = REQUEST_ID.search(note)
        if found is None:
            return "nothing to answer"
        approve = "plan B" in note
        reason = "looks good" if approve else "too risky"
        return call("agent.team_respond", request_id=found.group(1), approve=approve, reason=reason)

    def act(args: dict[str, Any], ctx: Any) -> str:
        acted.append(ctx.session_id)
        return "acted"

    cast = Cast(
        lead=[
            lambda r: ModelReply(tool_calls=[spawn("alice", "plan, get approval, then act")]),
            lambda r: "alice is planning",
            lead_answers,
            lambda r: "answered",
            lead_answers,
            lambda r: "answered",
        ],
        alice=[
            lambda r: ModelReply(
                tool_calls=[
                    CallTool(
                        "agent.team_request", {"to": "lead", "kind": "plan_approval", "content": "plan A"}
                    ),
                    CallTool("test.act", {}),
                ]
            ),
            lambda r: ModelReply(
                tool_calls=[
                    CallTool(
                        "agent.team_request", {"to": "lead", "kind": "plan_approval", "content": "plan B"}
                    ),
                    CallTool("test.act", {}),
                ]
            ),
            lambda r: "done with plan B",
        ],
    )
    async with team_runtime(tmp_path, cast) as rt:
        from agent_core import ToolDefinition

        rt.register_tool(
            ToolDefinition(
                name="test.act", description="act", input_schema={"type": "object"}, permission="readonly"
            ),
            act,
        )
        run = await rt.start("lead a planner")
        await run.wait()
        await until(lambda: len(cast.requests("alice")) == 3)
        await settled(rt, run.session_id)
        (alice,) = await rt.team(run.session_id)
        # the lead saw both requests, each with its request_id, and answered them
        lead_notes = [last_note(r) for r in cast.requests("lead")[2:5:2]]
        ids = [REQUEST_ID.search(n).group(1) for n in lead_notes]  # type: ignore[union-attr]
        assert len(set(ids)) == 2 and 'request_kind="plan_approval"' in lead_notes[0]
        assert "plan A" in lead_notes[0] and "plan B" in lead_notes[1]
        # plan A: rejected, the act in the same turn did not run; plan B: approved, then it acted once
        rejected, approved = (result_json(r) for r in cast.requests("alice")[1:3])
        assert any("rejected the plan: too risky" in str(x) for x in rejected)
        assert any("not run" in str(x) or "skipped" in str(x) for x in rejected), rejected
        answer = next(x for x in approved if isinstance(x, dict))
        assert answer == {"request_id": ids[1], "approved": True, "reason": "looks good", "from": "lead"}
        assert acted == [alice.session_id]
        # the answers were read through the tool results: nothing left unread, no extra note
        assert all("<inbox>" not in t for t in texts(cast.requests("alice")[2])[1:])
        assert alice.inbox_depth == 0


async def test_shutdown_round_trip_and_a_stopped_teammate(tmp_path: Path) -> None:
    def lead(request: ModelRequest) -> ModelReply | str:
        results = result_json(request)
        if request.messages[-1].role == "tool":
            return f"tool results: {results}"
        said = texts(request)[-1]
        if said == "start bob":
            return ModelReply(tool_calls=[spawn("bob", "stand by")])
        if said == "stop bob":
            return call("agent.team_request", to="bob", kind="shutdown", content="we are done")
        if said == "ping bob":
            return call("agent.team_send", to="bob", content="are you there?")
        return "noted"

    cast = Cast(lead=lead, bob=[lambda r: "standing by"])
    async with team_runtime(tmp_path, cast) as rt:
        run = await rt.start("start bob")
        await run.wait()
        await settled(rt, run.session_id)
        second = await rt.start("stop bob", session_id=run.session_id)
        await second.wait()
        (asked,) = result_json(cast.requests("lead")[3])
        assert asked["kind"] == "shutdown" and asked["status"] == "pending" and asked["to"] == "bob"
        request_id = asked["request_id"]
        answered = f'kind="response" from="bob" request_id="{request_id}"'
        await until(lambda: any(answered in last_note(r) for r in cast.requests("lead")))
        await settled(rt, run.session_id)
        (bob,) = await rt.team(run.session_id)
        assert bob.state == "stopped" and bob.stopped_reason == "shut down at its lead's request"
        assert len(cast.requests("bob")) == 1  # it stopped without another model call
        note = next(last_note(r) for r in cast.requests("lead") if answered in last_note(r))
        assert 'request_kind="shutdown" approve="true"' in note and "bob finished its current step" in note
        replay = await rt.replay_session(bob.session_id)
        drained = [e for e in replay.events if e.event_type == "inbox_drained"]
        assert [e.payload["kinds"] for e in drained] == [["message"], ["request"]]
        lead_events = [e.event_type for e in (await rt.replay_session(run.session_id)).events]
        assert "teammate_stopped" in lead_events
        # a stopped teammate takes no more messages: an error to the sender
        third = await rt.start("ping bob", session_id=run.session_id)
        await third.wait()
        (refused,) = result_json(cast.requests("lead")[-1])
        assert "has stopped" in str(refused)
        with pytest.raises(AgentCoreError) as info:
            await rt.deliver(bob.session_id, None, {"kind": "message", "from": "x", "content": "hi"})
        assert info.value.code == ErrorCode.validation_error


async def test_a_due_schedule_and_a_teammate_message_through_the_same_inbox(tmp_path: Path) -> None:
    cast = Cast(
        lead=[
            lambda r: ModelReply(tool_calls=[spawn("alice", "report when the build is green")]),
            lambda r: "alice is watching",
        ],
        alice=[lambda r: "watching"],
    )
    start = datetime(2026, 3, 2, 10, 0, 30, tzinfo=UTC)
    clock = FakeClock(start)
    async with team_runtime(tmp_path, cast) as rt:
        run = await rt.start("set up")
        await run.wait()
        await settled(rt, run.session_id)
        (alice,) = await rt.team(run.session_id)
        service = rt.scheduler(clock=clock)
        await rt.add_schedule("*/5 * * * *", "check the nightly build", session_id=run.session_id)
        # both arrive while the lead is idle and undisturbed: one wake-up run reads them in order
        await rt.deliver(
            run.session_id,
            None,
            {"kind": "message", "from": "alice", "content": "the build is green"},
            wake=False,
        )
        await clock.advance(timedelta(minutes=5))
        (firing,) = await service.tick()
        assert firing.run is not None and firing.session_id == run.session_id
        await firing.run.wait()
        note = last_note(cast.requests("lead")[-1])
        assert note.index('kind="message" from="alice"') < note.index('kind="schedule" from="schedule:')
        assert "the build is green" in note and "check the nightly build" in note
        replay = await rt.replay_session(run.session_id)
        delivered = [e.payload["kind"] for e in replay.events if e.event_type == "inbox_delivered"]
        assert delivered == ["message", "schedule"]
        assert alice.state == "idle"


async def test_limits_names_and_a_non_resident_teammate(tmp_path: Path) -> None:
    checked = asyncio.Event()

    def release(request: ModelRequest) -> str:
        checked.set()
        return "waiting for the scout"

    async def count(request: ModelRequest) -> str:
        await checked.wait()  # still working while the lead tries to exceed the limit
        return "there are 3 files"

    cast = Cast(
        lead=[
            lambda r: ModelReply(tool_calls=[spawn("scout", "count the files", resident=False)]),
            lambda r: ModelReply(tool_calls=[spawn("scout2", "x")]),  # over the limit of 1
            lambda r: ModelReply(tool_calls=[spawn("Bad Name", "x")]),
            lambda r: ModelReply(tool_calls=[spawn("lead", "x")]),
            release,
        ],
        scout=[count],
    )
    async with team_runtime(tmp_path, cast, max_teammates=1) as rt:
        run = await rt.start("scout it")
        await run.wait()
        report = 'from="scout"'
        await until(lambda: any(report in last_note(r) for r in cast.requests("lead")))
        await settled(rt, run.session_id)
        over, bad, lead = (str(result_json(r)) for r in cast.requests("lead")[2:5])
        assert "max_teammates_per_session = 1" in over
        assert "name" in bad and ("pattern" in bad or "does not match" in bad)
        assert "invalid teammate name 'lead'" in lead
        (scout,) = await rt.team(run.session_id)
        assert (scout.state, scout.resident, scout.stopped_reason) == ("stopped", False, "finished its task")
        note = next(last_note(r) for r in cast.requests("lead") if report in last_note(r))
        assert "there are 3 files" in note
        assert len(cast.requests("scout")) == 1


async def test_watch_team_follows_teammates_by_name_until_the_runtime_closes(tmp_path: Path) -> None:
    cast = Cast(
        lead=[lambda r: ModelReply(tool_calls=[spawn("alice", "say hi")]), lambda r: "started"],
        alice=[lambda r: "hi from alice"],
    )
    seen: list[tuple[str, str]] = []
    async with team_runtime(tmp_path, cast) as rt:
        run = await rt.start("start alice")

        async def follow() -> None:
            async for item in rt.watch_team(run.session_id):
                seen.append((item.name, item.event.event_type.value))

        watcher = asyncio.ensure_future(follow())
        await run.wait()
        await until(lambda: ("alice", "run_completed") in seen)
    await asyncio.wait_for(watcher, 5)  # ended by the runtime's close
    kinds = [kind for name, kind in seen if name == "alice"]
    assert {"loop_started", "inbox_drained", "message_completed", "run_completed"} <= set(kinds)
    assert kinds.index("loop_started") < kinds.index("inbox_drained") < kinds.index("run_completed")
    assert {name for name, _ in seen} == {"alice"}  # the lead's own (user) run is not in the feed
