"""``AgentRuntime.list_sessions`` and ``AgentRuntime.fork_session`` (docs/runs.md#branches-and-forks /sessions
/fork, docs/runs.md#branches-and-forks)."""

from __future__ import annotations

import json

import pytest

from agent_core import AgentCoreError, ErrorCode
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text
from tests.fixtures.runtime import collect, open_runtime, rows


async def test_list_sessions_newest_first_with_title_status_and_limit(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("a1"), text("b1"), text("a2"))
    async with open_runtime(soong_env, fake) as rt:
        assert await rt.list_sessions() == []
        first = await rt.start("  first   question\nwith two lines ")
        await collect(first)
        second = await rt.start("x" * 200)
        await collect(second)
        again = await rt.start("follow-up", session_id=first.session_id)
        await collect(again)
        listed = await rt.list_sessions()
        assert [s.session_id for s in listed] == [first.session_id, second.session_id]
        assert listed[0].title == "first question with two lines"
        assert listed[0].status == "completed" and listed[0].run_count == 2 and listed[0].mode == "normal"
        assert len(listed[1].title) == 80 and listed[1].title.endswith("...")
        assert [s.session_id for s in await rt.list_sessions(limit=1)] == [first.session_id]
        with pytest.raises(AgentCoreError) as bad:
            await rt.list_sessions(limit=0)
        assert bad.value.code == ErrorCode.validation_error


async def test_fork_copies_the_path_and_the_fork_continues_on_its_own(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("answer one"), text("answer two"), text("fork answer"))
    async with open_runtime(soong_env, fake) as rt:
        r1 = await rt.start("question one")
        await collect(r1)
        sid = r1.session_id
        r2 = await rt.start("question two", session_id=sid)
        await collect(r2)
        source = await rt.replay_session(sid)
        first_answer = next(n for n in source.nodes if n.role == "assistant")
        forked = await rt.fork_session(sid, first_answer.node_id)
        assert forked != sid
        copy = await rt.replay_session(forked)
        assert [n.role for n in copy.nodes] == ["user", "assistant"]
        assert copy.nodes[-1].metadata["forked_from"] == {"session_id": sid, "node_id": first_answer.node_id}
        assert {n.node_id for n in copy.nodes}.isdisjoint({n.node_id for n in source.nodes})
        assert copy.nodes[1].parent_id == copy.nodes[0].node_id and copy.nodes[0].parent_id is None
        meta = rows(
            soong_env, "SELECT parent_session_id, active_node_id FROM sessions WHERE session_id = ?", forked
        )
        assert tuple(meta[0]) == (sid, copy.nodes[1].node_id)
        run = await rt.start("fork question", session_id=forked)
        await collect(run)
        sent = json.dumps([m.model_dump(mode="json") for m in fake.requests[-1].messages])
        assert "question one" in sent and "answer one" in sent and "fork question" in sent
        assert "question two" not in sent and "answer two" not in sent
        assert len((await rt.replay_session(sid)).nodes) == len(source.nodes)  # the source is unchanged
        listed = {s.session_id: s for s in await rt.list_sessions()}
        assert listed[forked].parent_session_id == sid and listed[forked].title == "question one"
        for session_id, node_id in ((sid, "node_unknown"), ("sess_unknown", first_answer.node_id)):
            with pytest.raises(AgentCoreError) as info:
                await rt.fork_session(session_id, node_id)
            assert info.value.code == ErrorCode.validation_error
