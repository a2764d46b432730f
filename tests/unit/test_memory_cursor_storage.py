"""The scan cursor's storage path: ``append(session_metadata=...)`` merges into ``sessions.metadata_json``
in the same transaction as its events (docs/context.md#extraction)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core._memory.scan import CURSOR_KEY, parse_cursor
from agent_core._storage.drafts import EventDraft
from agent_core.errors import AgentCoreError
from agent_core.types.enums import EventType
from tests.fixtures.storage_env import make_redactor, opened_store, set_test_secret


def _meta(env: object, sid: str) -> dict[str, object]:
    [(raw,)] = env.query("SELECT metadata_json FROM sessions WHERE session_id = ?", (sid,))  # type: ignore[attr-defined]
    return json.loads(raw) if raw else {}


async def test_session_metadata_merge_keeps_other_keys_removes_none_and_redacts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path, make_redactor()) as env:
        sid, _aid = await env.new_session()
        await env.storage.append(sid, session_metadata={"mode": "normal", "other": {"a": 1}})
        cursor = {"node_seq": 7, "node_id": "node_x"}
        result = await env.storage.append(
            sid,
            events=[
                EventDraft(event_type=EventType.memory_extraction_completed, payload={"scan_cursor": cursor})
            ],
            session_metadata={CURSOR_KEY: cursor, "other": None, "note": f"k={secret}"},
        )
        [event] = result.events
        assert event.agent_id is None and event.run_id is None and event.run_seq is None
        meta = _meta(env, sid)
        assert meta == {"mode": "normal", CURSOR_KEY: cursor, "note": "k=[REDACTED]"}
        record = await env.storage.get_session(sid)
        assert record is not None and parse_cursor(record.metadata_json) is not None
        # a failing transaction (unknown run update) leaves the metadata unchanged
        with pytest.raises(AgentCoreError):
            await env.storage.append(
                sid,
                session_metadata={CURSOR_KEY: {"node_seq": 9, "node_id": "node_y"}},
                run_update=("run_missing", {"status": "completed"}),
            )
        assert _meta(env, sid)[CURSOR_KEY] == cursor
