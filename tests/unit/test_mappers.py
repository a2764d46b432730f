"""Storage records and storage ↔ runtime mappers (docs/architecture.md#type-layers; E8)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pydantic
import pytest

from agent_core._storage.decode import events_from_rows, nodes_from_rows
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core._storage.rows import prepare_event, prepare_node
from agent_core.errors import ErrorCode, SchemaError
from agent_core.types.base import format_ts
from agent_core.types.content import ArtifactRefBlock, ErrorPayload, JsonBlock, TextBlock, ToolCallBlock
from agent_core.types.enums import (
    AgentType,
    EndReason,
    EventLevel,
    EventType,
    MessageRole,
    NodeType,
    RunStatus,
)
from agent_core.types.mappers import artifact_from_record, record_from_row, run_info_from_record
from agent_core.types.runtime import Node, RuntimeEvent
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
    StorageRecord,
)
from tests.fixtures.storage_env import opened_store

TS = "2026-06-12T15:30:22.123456Z"
RECORDS: list[type[StorageRecord]] = [
    SessionRecord,
    AgentRecord,
    RunRecord,
    NodeRecord,
    EventRecord,
    ArtifactRecord,
]


def _node_record(**kw: object) -> NodeRecord:
    base: dict[str, object] = dict(
        node_id="node_1",
        node_seq=3,
        parent_id="node_0",
        agent_id="agent_1",
        run_id="run_1",
        role="assistant",
        node_type="message",
        content_json=json.dumps(
            [
                {"type": "text", "text": "héllo"},
                {
                    "type": "tool_call",
                    "tool_call_id": "c1",
                    "name": "code.read_file",
                    "arguments": {"path": "a"},
                    "metadata": {},
                },
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        ),
        metadata_json='{"usage":{"input_tokens":3},"partial":false}',
        token_count=12,
        created_at=TS,
    )
    base.update(kw)
    return NodeRecord.model_validate(base)


def test_records_mirror_columns_and_reject_unknown_fields() -> None:
    """Case E8."""
    for cls in RECORDS:
        json_fields = [f for f in cls.model_fields if "json" in f]
        assert all(f.endswith("_json") for f in json_fields), cls
        assert cls.columns() == tuple(cls.model_fields)
    with pytest.raises(pydantic.ValidationError):
        SessionRecord(session_id="s", cwd="/", root_agent_id="a", created_at=TS, updated_at=TS, extra=1)  # type: ignore[call-arg]
    with pytest.raises(pydantic.ValidationError):
        _node_record(role="wizard")
    with pytest.raises(pydantic.ValidationError):
        _node_record(created_at="yesterday")


def test_timestamps_are_normalised_utc_strings() -> None:
    """Case E8."""
    assert _node_record(created_at="2026-06-12T15:30:22.123456+00:00").created_at == TS
    assert _node_record(created_at="2026-06-12T17:30:22.123456+02:00").created_at == TS
    assert _node_record(created_at="2026-06-12T15:30:22Z").created_at == "2026-06-12T15:30:22.000000Z"


def node_from_record(record: NodeRecord, session_id: str) -> Node:
    """The read path of the storage manager (one ``nodes_<sid>`` row)."""
    return nodes_from_rows([record.row()], session_id)[0]


def node_to_record(node: Node) -> NodeRecord:
    """The write path of the storage manager (a draft prepared into its row)."""
    draft = NodeDraft(
        node_id=node.node_id,
        agent_id=node.agent_id,
        run_id=node.run_id,
        role=node.role,
        node_type=node.node_type,
        content=node.content,
        metadata=node.metadata,
        token_count=node.token_count,
        created_at=node.created_at,
    )
    row = prepare_node(draft, ()).row(node.node_seq, node.parent_id)
    return NodeRecord.model_validate(dict(zip(NodeRecord.columns(), row, strict=True)))


def event_from_record(record: EventRecord, session_id: str) -> RuntimeEvent:
    return events_from_rows([record.row()], session_id)[0]


def event_to_record(event: RuntimeEvent) -> EventRecord:
    assert event.seq is not None
    draft = EventDraft(
        event_id=event.event_id,
        agent_id=event.agent_id,
        run_id=event.run_id,
        level=event.level,
        event_type=event.event_type,
        node_id=event.node_id,
        tool_call_id=event.tool_call_id,
        payload=event.data,
        created_at=event.created_at,
    )
    row = prepare_event(draft, ()).row(event.seq, event.run_seq)
    return EventRecord.model_validate(dict(zip(EventRecord.columns(), row, strict=True)))


def test_node_round_trip_is_lossless() -> None:
    """Case E8."""
    record = _node_record()
    node = node_from_record(record, "sess_1")
    assert (
        node.session_id == "sess_1"
        and node.role == MessageRole.assistant
        and node.node_type == NodeType.message
    )
    assert isinstance(node.content[1], ToolCallBlock) and node.metadata == {
        "usage": {"input_tokens": 3},
        "partial": False,
    }
    assert node.created_at == datetime(2026, 6, 12, 15, 30, 22, 123456, tzinfo=UTC)
    assert node_to_record(node) == record
    assert node_from_record(node_to_record(node), "sess_1") == node
    empty = _node_record(metadata_json=None, content_json="[]", parent_id=None, run_id=None, token_count=None)
    assert node_to_record(node_from_record(empty, "s")) == empty


def test_event_round_trip_is_lossless() -> None:
    """Case E8."""
    record = EventRecord(
        event_id="evt_1",
        seq=7,
        run_seq=2,
        agent_id="agent_1",
        run_id="run_1",
        level=EventLevel.warning,
        event_type=EventType.tool_failed,
        node_id="node_1",
        tool_call_id="c1",
        payload_json='{"tool_name":"code.x","error":{"code":"timeout"}}',
        created_at=TS,
    )
    event = event_from_record(record, "sess_1")
    assert (
        event.level == "warning"
        and event.event_type == EventType.tool_failed
        and event.data["tool_name"] == "code.x"
    )
    assert event_to_record(event) == record
    bare = record.model_copy(update={"run_seq": None, "agent_id": None, "run_id": None, "payload_json": None})
    assert event_to_record(event_from_record(bare, "s")) == bare


def test_artifact_round_trip_is_lossless() -> None:
    """Case E8."""
    record = ArtifactRecord(
        artifact_id="artifact_1",
        session_id="sess_1",
        agent_id="agent_1",
        run_id="run_1",
        node_id=None,
        tool_call_id="c1",
        path="/home/x/sessions/sess_1/artifacts/artifact_1/stdout.txt",
        filename="stdout.txt",
        mime_type="text/plain",
        size_bytes=42,
        summary="first lines",
        metadata_json='{"kind":"tool_output","redacted":true}',
        created_at=TS,
    )
    ref = artifact_from_record(record)
    assert ref.metadata == {"kind": "tool_output", "redacted": True}
    assert format_ts(ref.created_at) == record.created_at
    fields = set(ArtifactRecord.model_fields) - {"metadata_json", "created_at"}
    assert {f: getattr(ref, f) for f in fields} == {f: getattr(record, f) for f in fields}


def test_run_record_to_run_info() -> None:
    """Case E8."""
    error = ErrorPayload(code=ErrorCode.storage_error, message="disk full", redacted=True)
    run = RunRecord(
        run_id="run_2",
        session_id="sess_1",
        agent_id="agent_2",
        status=RunStatus.failed,
        end_reason=EndReason.failed,
        turn_count=4,
        usage_json='{"input_tokens":10,"output_tokens":5}',
        error_json=error.model_dump_json(),
        created_at=TS,
        updated_at="2026-06-12T15:31:00.000000Z",
    )
    agent = AgentRecord(
        agent_id="agent_2",
        session_id="sess_1",
        parent_agent_id="agent_1",
        agent_type=AgentType.sub,
        created_by_run_id="run_1",
        metadata_json='{"purpose":"worker","agent_definition_id":"w"}',
        created_at=TS,
        updated_at=TS,
    )
    info = run_info_from_record(run, agent)
    assert (info.agent_type, info.purpose, info.parent_run_id) == ("sub", "worker", "run_1")
    assert info.status == RunStatus.failed and info.end_reason == EndReason.failed and info.turn_count == 4
    assert info.usage == {"input_tokens": 10, "output_tokens": 5} and info.error == error
    bare = run_info_from_record(run.model_copy(update={"usage_json": None, "error_json": None}))
    assert bare.agent_type is None and bare.usage is None and bare.error is None


@pytest.mark.parametrize(
    "update",
    [
        {"content_json": "not json"},
        {"content_json": '{"type":"text","text":"not a list"}'},
        {"content_json": '[{"type":"video","url":"x"}]'},
        {"content_json": '[{"type":"text","text":"x","extra":1}]'},
        {"metadata_json": "[1,2]"},
        {"metadata_json": "{broken"},
    ],
)
def test_malformed_node_rows_raise_schema_error(update: dict[str, str]) -> None:
    """Case E8."""
    record = _node_record().model_copy(update=update)
    with pytest.raises(SchemaError) as info:
        node_from_record(record, "sess_1")
    assert info.value.code == ErrorCode.schema_error


def test_malformed_rows_and_json_columns_raise_schema_error() -> None:
    """Case E8."""
    columns = NodeRecord.columns()
    good = _node_record().row()
    assert record_from_row(NodeRecord, columns, good) == _node_record()
    bad_role = tuple("bogus" if c == "role" else v for c, v in zip(columns, good, strict=True))
    with pytest.raises(SchemaError):
        record_from_row(NodeRecord, columns, bad_role)
    run = RunRecord(run_id="r", session_id="s", agent_id="a", status="running", created_at=TS, updated_at=TS)
    for update in ({"usage_json": "[1]"}, {"error_json": '{"code":"not_a_code","message":"x"}'}):
        with pytest.raises(SchemaError):
            run_info_from_record(run.model_copy(update=update))
    event = EventRecord(
        event_id="e", seq=1, level="info", event_type="error", payload_json='"str"', created_at=TS
    )
    with pytest.raises(SchemaError):
        event_from_record(event, "s")


async def test_round_trip_through_sqlite(tmp_path: Path) -> None:
    """Case E8: Runtime → storage → runtime through the real database; enums stored as their strings."""
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        content = [TextBlock(text="x"), JsonBlock(data={"n": 1}), ArtifactRefBlock(artifact_id="artifact_x")]
        created = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
        res = await env.storage.append(
            sid,
            nodes=[
                NodeDraft(
                    agent_id=aid,
                    role="assistant",
                    content=content,
                    metadata={"m": [1]},
                    token_count=9,
                    created_at=created,
                )
            ],
            events=[
                EventDraft(
                    event_type="message_completed",
                    level="info",
                    agent_id=aid,
                    payload={"p": {"q": None}},
                    created_at=created,
                )
            ],
        )
        node, event = res.nodes[0], res.events[0]
        assert await env.storage.list_nodes(sid) == [node]
        assert await env.storage.list_events(sid) == [event]
        row = env.query(f'SELECT role, node_type, created_at FROM "nodes_{sid}"')[0]
        assert row == ("assistant", "message", "2026-01-02T03:04:05.678901Z")
        assert env.query(f'SELECT level, event_type FROM "events_{sid}"')[0] == ("info", "message_completed")
        assert env.query("SELECT status FROM sessions")[0] == ("active",)
        session = await env.storage.get_session(sid)
        assert session is not None and session.created_at.endswith("Z")
        agent = await env.storage.get_agent(aid)
        assert agent is not None and agent.created_at == format_ts(
            datetime.fromisoformat(agent.created_at[:-1] + "+00:00")
        )


def test_committed_node_metadata_shares_its_key_strings() -> None:
    """A committed node's metadata (held by the cursor for the whole session) shares its keys and short
    string values with other nodes' (one copy of each, issue 16 target 4); the value, its JSON and its
    container types are unchanged, and the draft's containers are not reused."""
    model = "".join(["bench", "-model"])  # a fresh, non-interned string
    usage = {"input_tokens": 100, "raw_usage": {"prompt_tokens": 100}}
    metadata = {
        "model": model,
        "usage": usage,
        "retry": {"attempts": 1, "retries": [], "last_error": None},
        "tags": ["a" * 40, "short"],
        "request_id": "r" * 33,
    }
    expected_json = json.dumps(metadata, separators=(",", ":"))
    first = prepare_node(NodeDraft(agent_id="agent_1", role="assistant", content=[], metadata=metadata), ())
    second = prepare_node(NodeDraft(agent_id="agent_1", role="assistant", content=[], metadata=metadata), ())
    assert first.metadata == metadata and json.loads(first.metadata_json or "") == metadata
    assert json.loads(expected_json) == json.loads(first.metadata_json or "")
    assert first.metadata is not metadata and first.metadata["usage"] is not usage
    for a, b in zip(first.metadata, second.metadata, strict=True):
        assert a is b
    assert first.metadata["model"] is second.metadata["model"]
    raw_keys = [next(iter(p.metadata["usage"]["raw_usage"])) for p in (first, second)]
    assert raw_keys[0] is raw_keys[1]
    assert first.metadata["tags"][1] is second.metadata["tags"][1]
    assert first.metadata["tags"][0] == "a" * 40 and first.metadata["request_id"] == "r" * 33


def test_shared_strings_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_core._storage import rows

    monkeypatch.setattr(rows, "SHARED_STRINGS_CAPACITY", 4)
    monkeypatch.setattr(rows, "_shared", {})
    for k in range(10):
        value = {f"key_{k}": f"value_{k}"}
        assert rows.shared_strings(value) == value
        assert len(rows._shared) <= 5
