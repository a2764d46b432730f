"""Write-time redaction: a secret env value never reaches the SQLite file (docs/storage.md#redaction)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core.types.base import format_ts
from agent_core.types.content import ErrorPayload, JsonBlock, TextBlock, ToolResultBlock
from agent_core.types.enums import AgentType, ErrorCode, EventType, RunStatus
from agent_core.types.storage import AgentRecord, RunRecord
from tests.fixtures.storage_env import db_bytes, opened_store, set_test_secret


async def test_secret_never_reaches_the_database_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    quoted = f'pre"{secret}"post'  # the JSON-escaped form must be caught too
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        now = format_ts()
        rid = "run_secret_test"
        await env.storage.insert_run(
            RunRecord(
                run_id=rid,
                session_id=sid,
                agent_id=aid,
                status=RunStatus.running,
                metadata_json=f'{{"note": "{secret}"}}',
                created_at=now,
                updated_at=now,
            )
        )
        await env.storage.insert_agent(
            AgentRecord(
                agent_id="agent_child",
                session_id=sid,
                agent_type=AgentType.sub,
                result_json=f'{{"summary": "{secret}"}}',
                created_at=now,
                updated_at=now,
            )
        )
        error = ErrorPayload(code=ErrorCode.internal_error, message=f"failed with {secret}")
        node = NodeDraft(
            agent_id=aid,
            run_id=rid,
            role="tool",
            content=[
                ToolResultBlock(
                    tool_call_id="call_1",
                    content=[TextBlock(text=f"out: {secret}"), JsonBlock(data={"k": [quoted]})],
                    is_error=True,
                    error=error,
                )
            ],
            metadata={"tool_name": "code.run_command", "env": {"KEY": secret}},
        )
        result = await env.storage.append(
            sid,
            nodes=[node],
            events=[
                EventDraft(
                    event_type=EventType.tool_failed,
                    agent_id=aid,
                    run_id=rid,
                    node_id=node.node_id,
                    payload={"tool_name": "code.run_command", "error": error, "raw": quoted},
                )
            ],
            run_update=(rid, {"error_json": error.model_dump(mode="json"), "status": "failed"}),
        )
        await env.storage.update_agent(aid, metadata_json={"purpose": secret})
        # what the writer returns is what it stored: already redacted
        assert secret not in result.nodes[0].model_dump_json()
        assert secret not in result.events[0].model_dump_json()
        assert "[REDACTED]" in result.events[0].data["raw"]
        stored = await env.storage.list_nodes(sid)
        block = stored[0].content[0]
        assert isinstance(block, ToolResultBlock) and block.error is not None
        assert block.error.message == "failed with [REDACTED]"
        assert stored[0].metadata["env"] == {"KEY": "[REDACTED]"}
        events = await env.storage.list_events(sid)
        assert events[0].data["error"]["message"] == "failed with [REDACTED]"
        run = await env.storage.get_run(rid)
        assert run is not None and run.error_json is not None and "[REDACTED]" in run.error_json
    raw = db_bytes(env.db_path)
    assert secret.encode() not in raw
    assert b"[REDACTED]" in raw


async def test_no_secret_no_change(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        content = [TextBlock(text="plain ünïcode text"), JsonBlock(data={"a": [1, 2.5, None, True]})]
        res = await env.storage.append(sid, nodes=[NodeDraft(agent_id=aid, role="user", content=content)])
        assert res.nodes[0].content == content
        stored = env.query(f'SELECT content_json FROM "nodes_{sid}"')[0][0]
        assert stored == (
            '[{"type":"text","text":"plain ünïcode text"},'
            '{"type":"json","data":{"a":[1,2.5,null,true]},"summary":null,"artifact_id":null}]'
        )
