"""Teams and the inbox on the temporal engine (issue 36 item 4): ``agent.team_*`` is refused with a clear
error (teammates run on the local engine only); a delivery to an idle session starts no wake-up run there
and is read by the session's next run, on the worker."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core import RunStatus
from agent_core.types.content import ToolResultBlock, text_of
from tests.engine.test_temporal_engine import _env, engine_config, worker
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import open_runtime
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal


async def test_team_tools_are_refused_and_an_idle_session_reads_its_inbox_next_run(
    tmp_path: Any, temporal_server: TemporalServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server), agents={"max_teammates_per_session": 2})
    fake = FakeProvider(
        tool_calls(("agent.team_spawn", {"name": "alice", "task": "help"}, "call_spawn")),
        text("teams are not available here"),
        text("read it"),
    )
    async with worker(env, fake, lambda rt: None):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run = await rt.start("start a teammate")
            assert await run.wait() == RunStatus.completed, run.error
            result = next(
                b for m in fake.requests[1].messages for b in m.content if isinstance(b, ToolResultBlock)
            )
            assert result.is_error and "local engine only" in text_of(result.content)
            assert await rt.team(run.session_id) == []
            delivery = await rt.deliver(
                run.session_id, None, {"kind": "message", "from": "ops", "content": "ping"}
            )
            assert not delivery.woke and delivery.run_id is None
            nxt = await rt.start("anything new?", session_id=run.session_id)
            assert await nxt.wait() == RunStatus.completed, nxt.error
    *_, note, last = (text_of(m.content) for m in fake.requests[2].messages)
    assert note.startswith("<inbox>") and "ping" in note and last == "anything new?"
