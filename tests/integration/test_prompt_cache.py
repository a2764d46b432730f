"""The stable prompt prefix and cache-break detection (issue 33).

Every request of an agent must repeat its previous request verbatim (tools, system blocks, messages) in
the normal flows — a new turn, the tool loop, loading an instruction file, a Task update in orchestrator
mode, a sub-agent — so a provider's prompt cache reads the whole previous request; changed dynamic
blocks reach the model as tail notes; ``prompt_cache_break`` (debug) names any break.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from agent_core import RunStatus
from agent_core.types.content import text_of
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.multi_agent import ChildRouter, child_done, routed_fake
from tests.fixtures.orchestrator import Router, create_args, events, finish, roomy, step
from tests.fixtures.runtime import collect, open_runtime


def assert_continuations(requests: Sequence[ModelRequest]) -> None:
    """Each request repeats the previous one whole: same tools, same system blocks, its messages first."""
    assert len(requests) > 1
    for number, (prev, cur) in enumerate(pairwise(requests), 2):
        assert [t.name for t in cur.tools] == [t.name for t in prev.tools], number
        assert [(b.block_id, b.content) for b in cur.system] == [
            (b.block_id, b.content) for b in prev.system
        ], number
        assert cur.messages[: len(prev.messages)] == prev.messages, number


def of_agent(fake: FakeProvider, agent_type: str) -> list[ModelRequest]:
    return [r for r in fake.requests if r.metadata.get("agent_type") == agent_type]


async def test_normal_flows_repeat_the_previous_request_and_emit_no_cache_break(soong_env: SoongEnv) -> None:
    (soong_env.project / "notes.txt").write_text("some notes\n", encoding="utf-8")
    (soong_env.project / "AGENTS.md").write_text("# Project rules\nRULE-MARK: answer briefly.\n", "utf-8")
    router = ChildRouter().add("MARK-SUB", child_done("sub finished"))
    fake = routed_fake(
        router,
        tool_calls(("code.read_file", {"path": "notes.txt"}, "c1")),  # turn 1: the tool loop
        text("read"),
        text("plain answer"),  # turn 2: a new turn
        tool_calls(("code.read_file", {"path": "AGENTS.md"}, "c2")),  # turn 3: an instruction file, once
        text("rules loaded"),
        tool_calls(("agent.create_sub_agent", {"task": "MARK-SUB look around"}, "c3")),  # turn 4: a sub-agent
        text("delegated"),
        tool_calls(("code.read_file", {"path": "AGENTS.md"}, "c4")),  # turn 5: the same file again
        text("still brief"),
    )
    session_id: str | None = None
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        for message in ("read the notes", "hello", "load the rules", "delegate", "re-read the rules"):
            run = await rt.start(message, session_id=session_id)
            await collect(run)
            assert run.status == RunStatus.completed, run.error
            session_id = run.session_id
    assert session_id is not None
    main = of_agent(fake, "main")
    assert len(main) == 9
    assert_continuations(main)
    assert events(soong_env, session_id, "prompt_cache_break") == []

    state = next(b for b in main[0].system if b.block_id == "runtime_state")
    assert "run_id" not in state.content and "session_id:" in state.content
    assert not any(b.block_id.startswith("instruction:") for b in main[-1].system)
    # the instruction reached the model once, as a system update right after the read that loaded it
    updates = [m for m in main[-1].messages if m.metadata.get("source") == "system_update"]
    assert len(updates) == 1 and "RULE-MARK" in text_of(updates[0].content)
    assert updates[0].metadata["block_id"].startswith("instruction:")
    position = main[-1].messages.index(updates[0])
    assert main[-1].messages[position - 1].role == "tool"
    assert updates[0] in main[4].messages  # the request right after the read already carried it


async def test_task_updates_in_orchestrator_mode_are_tail_notes(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    rename = {"task_id": "t1", "operations": [{"op": "update_task", "title": "Renamed RENAME-MARK"}]}
    router = Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1"), step("s2", "s1")), "c1")),
        text("created"),
        tool_calls(("agent.task_update", rename, "c2")),
        text("renamed"),
        text("nothing new"),
    )
    session_id: str | None = None
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        for message in ("plan the work", "rename it", "status?"):
            run = await rt.start(message, mode="orchestrator", session_id=session_id)
            await finish(run)
            assert run.status == RunStatus.completed, run.error
            session_id = run.session_id
    assert session_id is not None
    requests = router.orchestrator_requests
    assert len(requests) == 5
    assert_continuations(requests)
    assert events(soong_env, session_id, "prompt_cache_break") == []
    boards = [m for m in requests[-1].messages if m.metadata.get("source") == "task_board"]
    # one note when the Task appeared, one when its title changed; an unchanged board adds none
    assert len(boards) == 2
    assert "RENAME-MARK" not in text_of(boards[0].content) and "RENAME-MARK" in text_of(boards[1].content)
    assert all(text_of(b.content).startswith("<task_board>") for b in boards)
    assert "task_board" not in [b.block_id for b in requests[-1].system]


async def test_a_cache_break_is_reported_with_the_first_part_that_changed(soong_env: SoongEnv) -> None:
    # the limits' final answer call is sent without tools: the prefix breaks at the tool definitions
    fake = FakeProvider(tool_calls(("code.list_dir", {"path": "."}, "c1")), text("final"))
    async with open_runtime(soong_env, fake, config={"limits": {"max_tool_calls": 1}}) as rt:
        run = await rt.start("look")
        await collect(run)
    breaks = events(soong_env, run.session_id, "prompt_cache_break")
    assert len(breaks) == 1, breaks
    payload = breaks[0]["payload"]
    assert payload["part"] == "tools" and payload["first_changed"] == "tool:removed"
    assert run.status == RunStatus.completed and len(fake.requests) == 2 and not fake.requests[1].tools
    assert payload["turn"] == 2 and payload["reused_messages"] == 0 and payload["cause"] is None
    assert breaks[0]["level"] == "debug" and breaks[0]["run_id"] == run.run_id
