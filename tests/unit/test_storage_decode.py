"""Row decoding of the read paths (storage/decode.py): models built without per-row validation equal
validated ones, read-time key redaction still applies, and bad rows are ``schema_error``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core._storage.decode import events_from_rows, nodes_from_rows
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.content import (
    ArtifactRefBlock,
    ErrorPayload,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    content_list_adapter,
)
from agent_core.types.runtime import Node, RuntimeEvent

TS = "2026-01-02T03:04:05.000006Z"
BLOCKS = [
    TextBlock(text="hi"),
    JsonBlock(data={"a": [1, {"b": None}]}, summary="s"),
    ToolCallBlock(tool_call_id="c1", name="code.read_file", arguments={"path": "x"}, metadata={"m": 1}),
    ToolResultBlock(
        tool_call_id="c1",
        content=[TextBlock(text="out"), JsonBlock(data=[1, 2]), ArtifactRefBlock(artifact_id="art_1")],
    ),
    ToolResultBlock(
        tool_call_id="c2",
        is_error=True,
        content=[TextBlock(text="failed")],
        error=ErrorPayload(code=ErrorCode.file_not_found, message="boom", details={"k": "v"}),
    ),
]


def _node_row(content: str, metadata: str | None, role: str = "assistant") -> tuple[Any, ...]:
    return ("node_1", 1, None, "agent_1", "run_1", role, "message", content, metadata, 7, TS)


def _event_row(payload: str | None, event_type: str = "tool_completed") -> tuple[Any, ...]:
    return ("evt_1", 5, 2, "agent_1", "run_1", "info", event_type, "node_1", "c1", payload, TS)


def test_a_node_built_from_its_row_equals_the_validated_node() -> None:
    content = content_list_adapter.dump_json(BLOCKS).decode()
    (node,) = nodes_from_rows([_node_row(content, '{"tool_name":"x"}')], "sess_1")
    validated = Node.model_validate(
        {
            "node_id": "node_1",
            "node_seq": 1,
            "session_id": "sess_1",
            "parent_id": None,
            "agent_id": "agent_1",
            "run_id": "run_1",
            "role": "assistant",
            "node_type": "message",
            "content": json.loads(content),
            "metadata": {"tool_name": "x"},
            "token_count": 7,
            "created_at": TS,
        }
    )
    assert node == validated and node.content == BLOCKS
    assert node.model_dump_json() == validated.model_dump_json()
    assert node.model_fields_set == validated.model_fields_set
    assert [type(b) for b in node.content] == [type(b) for b in BLOCKS]
    copy = node.model_copy(update={"token_count": 8})
    assert copy.token_count == 8 and node.token_count == 7
    node.metadata = {"changed": True}  # assignment works like on a validated model
    assert node.model_dump()["metadata"] == {"changed": True}


def test_an_event_built_from_its_row_equals_the_validated_event() -> None:
    (event,) = events_from_rows([_event_row('{"tool_name":"x","duration_ms":3}')], "sess_1")
    validated = RuntimeEvent.model_validate(
        {
            "event_id": "evt_1",
            "seq": 5,
            "run_seq": 2,
            "session_id": "sess_1",
            "agent_id": "agent_1",
            "run_id": "run_1",
            "level": "info",
            "event_type": "tool_completed",
            "node_id": "node_1",
            "tool_call_id": "c1",
            "payload": {"tool_name": "x", "duration_ms": 3},
            "created_at": TS,
        }
    )
    assert event == validated and event.model_dump_json() == validated.model_dump_json()
    assert event.model_fields_set == validated.model_fields_set
    assert type(event.event_type) is type(validated.event_type)
    assert event.created_at == validated.created_at and event.created_at.utcoffset() is not None


def test_blocks_that_differ_from_the_stored_form_are_validated() -> None:
    # an older row without the defaulted fields, and an unknown field
    (node,) = nodes_from_rows(
        [_node_row('[{"type":"tool_call","tool_call_id":"c","name":"n","arguments":{}}]', None)], "s"
    )
    assert node.content == [ToolCallBlock(tool_call_id="c", name="n", arguments={})]
    with pytest.raises(AgentCoreError) as info:
        nodes_from_rows([_node_row('[{"type":"text","text":"x","extra":1}]', None)], "s")
    assert info.value.code == ErrorCode.schema_error


@pytest.mark.parametrize(
    "row",
    [
        _node_row('[{"type":"text","text":"x"}]', None, role="wizard"),
        _node_row('{"type":"text"}', None),
        _node_row('[{"type":"nope"}]', None),
        _node_row('[{"type":"text","text":"x"}]', "[1]"),
        ("node_1", "one", None, "agent_1", None, "user", "message", "[]", None, None, TS),
        ("node_1", 1, None, "agent_1", None, "user", "message", "[]", None, None, "yesterday"),
    ],
)
def test_bad_node_rows_are_schema_errors(row: tuple[Any, ...]) -> None:
    with pytest.raises(AgentCoreError) as info:
        nodes_from_rows([row], "sess_1")
    assert info.value.code == ErrorCode.schema_error


@pytest.mark.parametrize(
    "row",
    [
        ("evt_1", 5, None, None, None, "loud", "loop_started", None, None, None, TS),
        ("evt_1", "5", None, None, None, "info", "loop_started", None, None, None, TS),
        ("evt_1", 5, None, None, None, "info", "loop_started", None, None, '"text"', TS),
    ],
)
def test_bad_event_rows_are_schema_errors(row: tuple[Any, ...]) -> None:
    with pytest.raises(AgentCoreError) as info:
        events_from_rows([row], "sess_1")
    assert info.value.code == ErrorCode.schema_error


def test_read_time_key_redaction_applies_to_payloads_metadata_and_blocks() -> None:
    secret_payload = json.dumps({"headers": {"Authorization": "Bearer x"}, "usage": {"input_tokens": 3}})
    escaped = '{"tok\\u0065n":"t"}'  # a key spelled with an escape
    rows = [_event_row('{"tool_name":"x"}')] * 300 + [_event_row(secret_payload), _event_row(escaped)]
    events = events_from_rows(rows, "sess_1", redact_keys=True)
    assert events[0].data == {"tool_name": "x"}
    assert events[300].data == {"headers": {"Authorization": "[REDACTED]"}, "usage": {"input_tokens": 3}}
    assert events[301].data == {"token": "[REDACTED]"}
    assert events_from_rows(rows, "sess_1")[300].data["headers"] == {"Authorization": "Bearer x"}
    content = json.dumps(
        [
            {
                "type": "tool_call",
                "tool_call_id": "c",
                "name": "n",
                "arguments": {"api_key": "k"},
                "metadata": {},
            }
        ]
    )
    (node,) = nodes_from_rows([_node_row(content, '{"password":"p","n":1}')], "s", redact_keys=True)
    assert node.metadata == {"password": "[REDACTED]", "n": 1}
    assert isinstance(node.content[0], ToolCallBlock) and node.content[0].arguments == {
        "api_key": "[REDACTED]"
    }


@pytest.mark.parametrize(
    "payload",
    [
        {"tool_name": "x", "duration_ms": 3, "ok": True, "ratio": 0.5, "none": None},
        {"stop_reason": "end", "usage": {"input_tokens": 1, "output_tokens": 2}},
        {"ids": ["a", "b"], "nested": {"deeper": {"k": 1}}},
    ],
)
def test_a_repeated_payload_text_gives_equal_independent_payloads(payload: dict[str, Any]) -> None:
    text = json.dumps(payload, separators=(",", ":"))
    events = events_from_rows([_event_row(text)] * 3, "sess_1")
    assert [e.data for e in events] == [payload] * 3
    first, second, third = (e.data for e in events)
    assert first is not second and second is not third
    for key, value in payload.items():
        if isinstance(value, dict | list):  # containers are never shared between events
            assert first[key] is not second[key] and second[key] is not third[key]
    first["tool_name"] = "changed"
    for value in second.values():
        if isinstance(value, dict):
            value["added"] = 1
    assert third == payload


def test_a_repeated_payload_masked_in_one_event_is_masked_in_each() -> None:
    text = '{"tool_name":"x","api_key":"k","usage":{"total_tokens":3}}'
    events = events_from_rows([_event_row(text)] * 2, "sess_1", redact_keys=True)
    masked = {"tool_name": "x", "api_key": "[REDACTED]", "usage": {"total_tokens": 3}}
    assert [e.data for e in events] == [masked, masked]
    assert [e.data for e in events_from_rows([_event_row(text)] * 2, "sess_1")] == [
        {"tool_name": "x", "api_key": "k", "usage": {"total_tokens": 3}}
    ] * 2
