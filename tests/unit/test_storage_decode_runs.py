"""Batch reads of the replay path (storage/decode.py): run records and run infos built without per-row
validation equal validated ones, other rows are validated; the agent filter of ``list_events``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_core._redaction import texts_may_hold_keys
from agent_core._storage.decode import (
    events_from_rows,
    in_seq_order,
    run_infos,
    runs_from_rows,
)
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.content import TextBlock
from agent_core.types.enums import AgentStatus, AgentType, EventType
from agent_core.types.mappers import record_from_row, run_info_from_record
from agent_core.types.storage import AgentRecord, RunRecord
from tests.fixtures.storage_env import opened_store

TS = "2026-01-02T03:04:05.000006Z"


def _run_row(**kw: Any) -> tuple[Any, ...]:
    values = {
        "run_id": "run_1",
        "session_id": "sess_1",
        "agent_id": "agent_1",
        "status": "completed",
        "start_node_id": "node_1",
        "end_node_id": None,
        "end_reason": "completed",
        "turn_count": 2,
        "usage_json": '{"input_tokens":3}',
        "error_json": None,
        "metadata_json": '{"mode":"normal"}',
        "created_at": TS,
        "updated_at": TS,
    } | kw
    return tuple(values[c] for c in RunRecord.columns())


def _validated(row: tuple[Any, ...]) -> RunRecord:
    return record_from_row(RunRecord, RunRecord.columns(), row)


@pytest.mark.parametrize(
    "row",
    [
        _run_row(),
        _run_row(end_reason=None, turn_count=None, usage_json=None, metadata_json=None),
        _run_row(created_at="2026-01-02T03:04:05+00:00"),  # not the stored form: normalised by validation
        _run_row(error_json='{"code":"timeout","message":"slow"}'),
        _run_row(turn_count="2"),  # coerced by validation, as before
    ],
)
def test_a_run_record_built_from_its_row_equals_the_validated_record(row: tuple[Any, ...]) -> None:
    (record,) = runs_from_rows([row])
    validated = _validated(row)
    assert record == validated and record.model_dump_json() == validated.model_dump_json()
    assert record.model_fields_set == validated.model_fields_set
    assert type(record.status) is type(validated.status)


@pytest.mark.parametrize(
    "row",
    [
        _run_row(status="sleeping"),
        _run_row(end_reason="bored"),
        _run_row(turn_count="two"),
        _run_row(created_at="yesterday"),
        _run_row(run_id=None),
    ],
)
def test_bad_run_rows_are_schema_errors(row: tuple[Any, ...]) -> None:
    with pytest.raises(AgentCoreError) as info:
        runs_from_rows([row])
    assert info.value.code == ErrorCode.schema_error


@pytest.mark.parametrize("with_agent", [True, False])
def test_run_infos_equal_the_mapper(with_agent: bool) -> None:
    agent = AgentRecord(
        agent_id="agent_1",
        session_id="sess_1",
        agent_type=AgentType.main,
        status=AgentStatus.running,
        created_by_run_id="run_0",
        metadata_json='{"purpose":"p"}',
        created_at=TS,
        updated_at=TS,
    )
    rows = [
        _run_row(),
        _run_row(usage_json=None),
        _run_row(error_json='{"code":"timeout","message":"slow","details":{"a":1}}'),
    ]
    runs = [_validated(r) for r in rows]
    owner = agent if with_agent else None
    meta = {"purpose": "p"} if with_agent else {}
    infos = run_infos(runs, owner, meta)
    expected = [run_info_from_record(r, owner, meta) for r in runs]
    assert infos == expected
    assert [i.model_dump_json() for i in infos] == [e.model_dump_json() for e in expected]
    assert [i.model_fields_set for i in infos] == [e.model_fields_set for e in expected]
    with pytest.raises(AgentCoreError) as info:  # usage that is not an object: the mapper's error
        run_infos([_validated(_run_row(usage_json="[1]"))], owner, meta)
    assert info.value.code == ErrorCode.schema_error


async def test_list_events_keeps_the_given_agents(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, root = await env.new_session()
        child = await env.new_agent(sid)
        drafts = [
            EventDraft(event_type=EventType.loop_started, agent_id=root),
            EventDraft(event_type=EventType.loop_started, agent_id=child),
            EventDraft(event_type=EventType.loop_started, agent_id=None),
        ]
        await env.storage.append(sid, events=drafts)
        every = await env.storage.list_events(sid)
        assert [e.agent_id for e in every] == [root, child, None]
        assert await env.storage.list_events(sid, agent_ids=(root, None)) == [every[0], every[2]]
        assert await env.storage.list_events(sid, agent_ids=[child]) == [every[1]]
        assert await env.storage.list_events(sid, agent_ids=[None], from_seq=2) == [every[2]]
        assert await env.storage.list_events(sid, agent_ids=[]) == []


def test_repeated_texts_get_the_verdict_of_their_first_copy() -> None:
    texts = ['{"a":1}', '{"token":"x"}', None, '{"a":1}', '{"token":"x"}', None]
    assert texts_may_hold_keys(texts, chunk=1) == [False, True, False, False, True, False]
    assert texts_may_hold_keys(texts) == [True] * 6  # one chunk: flagged together
    assert texts_may_hold_keys(['{"a":1}'] * 600 + ['{"b":2}']) == [False] * 601


def test_rows_are_put_in_seq_order_and_a_bad_seq_is_still_a_schema_error() -> None:
    rows = [("e3", 3), ("e1", 1), ("e2", 2)]
    assert in_seq_order(rows) == [("e1", 1), ("e2", 2), ("e3", 3)]
    ts = "2026-01-02T03:04:05.000006Z"
    bad = [
        ("evt_2", 2, None, None, None, "info", "loop_started", None, None, None, ts),
        ("evt_1", "one", None, None, None, "info", "loop_started", None, None, None, ts),
    ]
    with pytest.raises(AgentCoreError) as info:
        events_from_rows(in_seq_order(bad), "sess_1")
    assert info.value.code == ErrorCode.schema_error


async def test_stored_rows_come_back_in_seq_order(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, root = await env.new_session()
        child = await env.new_agent(sid)
        for agent in (root, child, root, child):
            await env.storage.append(
                sid,
                nodes=[NodeDraft(agent_id=agent, role="user", content=[TextBlock(text="hi")])],
                events=[EventDraft(event_type=EventType.loop_started, agent_id=agent)],
            )
        assert [n.node_seq for n in await env.storage.list_nodes(sid)] == [1, 2, 3, 4]
        assert [n.node_seq for n in await env.storage.list_nodes(sid, agent_id=root)] == [1, 3]
        events = await env.storage.list_events(sid)
        assert [e.seq for e in events] == [1, 2, 3, 4]
        assert [e.seq for e in await env.storage.list_events(sid, agent_ids=[child])] == [2, 4]


def test_runs_from_rows_unpacks_the_run_columns_in_their_order() -> None:
    assert RunRecord.columns() == (
        *("run_id", "session_id", "agent_id", "status", "start_node_id", "end_node_id", "end_reason"),
        *("turn_count", "usage_json", "error_json", "metadata_json", "created_at", "updated_at"),
    )
    row = _run_row(start_node_id="node_s", end_node_id="node_e", error_json=None, usage_json=None)
    (record,) = runs_from_rows([row])
    assert record == _validated(row) and record.start_node_id == "node_s" and record.end_node_id == "node_e"
    for short in (row[:-1], (*row, "extra")):  # another width: validated (a schema_error)
        with pytest.raises(AgentCoreError) as info:
            runs_from_rows([short])
        assert info.value.code == ErrorCode.schema_error
