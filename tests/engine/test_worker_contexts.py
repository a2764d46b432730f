"""A worker keeps a session's cursor between the session's runs (engine/temporal/_contexts.py): the next
run reuses it only while the store's active node is its tip; a session moved elsewhere is read again."""

from __future__ import annotations

from agent_core._loop.cursor import AgentCursor
from agent_core.engine.temporal._contexts import RunContexts
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text
from tests.fixtures.runtime import open_runtime


async def test_a_kept_cursor_is_reused_only_while_its_tip_is_the_active_node(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider(text("first"), text("second"))) as rt:
        first = await rt.start("one")
        await first.wait()
        manager = await rt._open()
        storage = manager.services.storage
        session_id = first.session_id
        record = await storage.get_session(session_id)
        assert record is not None and record.active_node_id is not None
        stored_path = await storage.node_path(session_id, record.active_node_id)
        contexts = RunContexts(manager)

        # kept with the active node as its tip: the same cursor (path and prompt caches) continues
        kept = AgentCursor(record.root_agent_id, stored_path)
        contexts._cursors[session_id] = kept
        assert (await contexts._load_session(session_id)).cursor is kept

        # kept, but the session moved on since (another worker ran its next run): read from the store
        stale = AgentCursor(record.root_agent_id, stored_path)
        contexts._cursors[session_id] = stale
        second = await rt.start("two", session_id=session_id)
        await second.wait()
        moved = await storage.get_session(session_id)
        assert moved is not None and moved.active_node_id != record.active_node_id
        session = await contexts._load_session(session_id)
        assert session.cursor is not stale
        assert [n.node_id for n in session.cursor.path] == [
            n.node_id for n in await storage.node_path(session_id, moved.active_node_id or "")
        ]
        assert session_id not in contexts._cursors  # taken by the run that loaded it
