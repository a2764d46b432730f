"""Compact persisted context reports (issue 16): node-id lists stored as node_seq ranges, read back
unchanged; rows in the old (verbatim) shape still read; read-time key redaction while decoding rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from agent_core._redaction import has_sensitive_keys, redact_sensitive_keys
from agent_core._storage._reports import NodeIndex, compact_seqs, expand_report, seq_ranges
from agent_core._storage.decode import events_from_rows
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core._storage.sqlite import StorageManager
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.content import TextBlock
from agent_core.types.enums import EventType
from agent_core.types.runtime import ContextBuildReport, TokenBudget
from tests.fixtures.storage_env import make_redactor, opened_store, set_test_secret


def _nodes(aid: str, n: int) -> list[NodeDraft]:
    return [NodeDraft(agent_id=aid, role="user", content=[TextBlock(text=f"m{i}")]) for i in range(n)]


def _report(rid: str, aid: str, included: list[str], excluded: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return ContextBuildReport(
        run_id=rid,
        agent_id=aid,
        turn=1,
        provider="p",
        model="m",
        token_budget=TokenBudget(**dict.fromkeys(TokenBudget.model_fields, 10)),
        included_node_ids=included,
        excluded_node_ids=list(excluded),
    ).model_dump(mode="json")


def _stored(db: Path, sid: str) -> list[str]:
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            f"SELECT payload_json FROM \"events_{sid}\" WHERE event_type = 'context_built' ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def test_seq_ranges_keep_order() -> None:
    assert seq_ranges([3, 4, 5, 9, 1, 2]) == [[3, 5], [9, 9], [1, 2]]
    assert seq_ranges([]) == []


def test_compacting_a_list_that_extends_the_previous_one_equals_a_fresh_compaction() -> None:
    """A session's reports mostly extend the previous list: the memo of the node index reuses its ranges
    (only the new ids are looked up) and never changes the stored ranges."""
    ids = [f"node_{i}" for i in range(40)]
    index = NodeIndex({node_id: i + 1 for i, node_id in enumerate(ids)})
    plain = dict(index)

    def both(included: list[str], new_nodes: dict[str, int] | None = None, first_new: int = 0) -> None:
        payload = {"included_node_ids": included, "excluded_node_ids": ids[:3]}
        memo = compact_seqs(payload, index, new_nodes or {}, ())
        fresh = compact_seqs(payload, plain, new_nodes or {}, ())
        assert memo is not None and fresh is not None and set(memo) == set(fresh)
        for field, value in fresh.items():
            assert memo[field].ranges(first_new) == value.ranges(first_new)
        if not new_nodes:  # a list naming a node of the same write is not remembered
            assert index.lists["included_node_ids"].ids == included

    both(ids[:10])
    both(ids[:10] + ids[12:20])  # extends: only the 8 new ids are looked up
    assert index.lists["included_node_ids"].ranges == [[1, 10], [13, 20]]
    both([*ids[:10], *ids[12:30], "node_new"], {"node_new": -1}, first_new=41)  # a node of the same write
    both(ids[5:30])  # not an extension: a fresh compaction
    both(list(reversed(ids[:20])))
    assert compact_seqs({"included_node_ids": [*ids[:9], "unknown"]}, index, {}, ()) is None


async def test_reports_are_stored_as_ranges_and_read_back_unchanged(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        first = _nodes(aid, 20)
        # first report of the session after opening: stored verbatim, its write loads the node index
        await env.storage.append(sid, nodes=first)
        ids = [n.node_id for n in first]
        r1 = _report(rid, aid, ids)
        await env.storage.append(sid, events=[EventDraft(event_type=EventType.context_built, payload=r1)])
        # later: ids of committed nodes and of nodes written in the same transaction, out of order
        more = _nodes(aid, 10)
        r2 = _report(rid, aid, [*ids[10:], *ids[:2], *(n.node_id for n in more)], excluded=ids[2:10])
        short = _report(rid, aid, ids[:2])
        result = await env.storage.append(
            sid,
            nodes=more,
            events=[
                EventDraft(event_type=EventType.context_built, payload=r2),
                EventDraft(event_type=EventType.context_built, payload=short),
            ],
        )
        assert result.events[0].payload == r2  # the live event carries the full report
        stored = _stored(env.db_path, sid)
        assert "node_seq_ranges" not in stored[0]
        compact = json.loads(stored[1])
        assert compact["included_node_ids"] == {"node_seq_ranges": [[11, 20], [1, 2], [21, 30]]}
        assert compact["excluded_node_ids"] == {"node_seq_ranges": [[3, 10]]}
        assert list(compact) == list(r2)  # key order kept
        assert json.loads(stored[2]) == short  # short lists stay verbatim
        events = await env.storage.list_events(sid)
        assert [e.payload for e in events] == [r1, r2, short]
        assert (
            ContextBuildReport.model_validate(events[1].payload).included_node_ids == r2["included_node_ids"]
        )


async def test_reports_expand_from_the_session_nodes_the_caller_read_when_they_are_all_of_them(
    tmp_path: Path,
) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        first = _nodes(aid, 20)
        await env.storage.append(sid, nodes=first)
        ids = [n.node_id for n in first]
        await env.storage.append(
            sid, events=[EventDraft(event_type=EventType.context_built, payload=_report(rid, aid, ids))]
        )
        more = _nodes(aid, 10)
        r2 = _report(rid, aid, [*ids[5:], *(n.node_id for n in more)])
        await env.storage.append(
            sid, nodes=more, events=[EventDraft(event_type=EventType.context_built, payload=r2)]
        )
        assert "node_seq_ranges" in _stored(env.db_path, sid)[1]
        expected = [e.payload for e in await env.storage.list_events(sid)]
        nodes = await env.storage.list_nodes(sid)
        reads: list[str] = []
        read = env.storage._read

        async def counted(sql: str, params: Any = ()) -> list[Any]:
            reads.append(sql)
            return await read(sql, params)

        env.storage._read = counted  # type: ignore[method-assign]
        events = await env.storage.list_events(sid, session_nodes=nodes)
        assert [e.payload for e in events] == expected
        assert not any(sql.startswith("SELECT node_seq, node_id") for sql in reads)
        # not all of the session's nodes (another agent wrote some): the ids are read
        for partial in (nodes[:-1], nodes[1:], [*nodes[:3], *nodes[4:]]):
            reads.clear()
            events = await env.storage.list_events(sid, session_nodes=partial)
            assert [e.payload for e in events] == expected
            assert any(sql.startswith("SELECT node_seq, node_id") for sql in reads)


async def test_old_verbatim_rows_and_unknown_ids_still_read(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        nodes = _nodes(aid, 12)
        await env.storage.append(sid, nodes=nodes)
        await env.storage.append(sid, events=[EventDraft(event_type=EventType.context_built, payload={})])
        foreign = _report(rid, aid, [*(n.node_id for n in nodes), "node_not_in_this_session"])
        await env.storage.append(
            sid, events=[EventDraft(event_type=EventType.context_built, payload=foreign)]
        )
        assert "node_seq_ranges" not in _stored(env.db_path, sid)[1]
        assert (await env.storage.list_events(sid))[1].payload == foreign


async def test_an_id_holding_a_secret_is_not_compacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        nodes = _nodes(aid, 9)
        nodes[0].node_id = f"node_{secret}"
        await env.storage.append(sid, nodes=nodes)
        await env.storage.append(sid, events=[EventDraft(event_type=EventType.context_built, payload={})])
        report = _report(rid, aid, [n.node_id for n in nodes])
        await env.storage.append(sid, events=[EventDraft(event_type=EventType.context_built, payload=report)])
        stored = _stored(env.db_path, sid)[1]
        assert secret not in stored and "node_seq_ranges" not in stored


async def test_a_secret_in_another_field_stores_the_report_redacted_and_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        nodes = _nodes(aid, 12)
        await env.storage.append(sid, nodes=nodes)
        await env.storage.append(sid, events=[EventDraft(event_type=EventType.context_built, payload={})])
        report = {**_report(rid, aid, [n.node_id for n in nodes]), "model": f"m-{secret}"}
        result = await env.storage.append(
            sid, events=[EventDraft(event_type=EventType.context_built, payload=report)]
        )
        stored = _stored(env.db_path, sid)[1]
        assert secret not in stored and "node_seq_ranges" not in stored
        redacted = {**report, "model": "m-[REDACTED]"}
        assert json.loads(stored) == redacted
        assert result.events[0].payload == redacted  # the live event carries the redacted report too
        assert (await env.storage.list_events(sid))[1].payload == redacted


@pytest.mark.parametrize(
    "ranges",
    [[[1, "2"]], [["1", 2]], [[True, 2]], [[1, 2.0]], [[1, 2, 2]], [[1]], [(1, 2)], [[2, 1]], [[0, 1]]],
)
def test_a_malformed_range_is_a_schema_error(ranges: list[Any]) -> None:
    payload: dict[str, Any] = {"included_node_ids": {"node_seq_ranges": ranges}}
    with pytest.raises(AgentCoreError) as info:
        expand_report(payload, [None, "a", "b"], complete=True)
    assert info.value.code == ErrorCode.schema_error
    good: dict[str, Any] = {"included_node_ids": {"node_seq_ranges": [[1, 2], [2, 2]]}}
    expand_report(good, [None, "a", "b"], complete=True)
    assert good == {"included_node_ids": ["a", "b", "b"]}


def test_a_range_naming_no_node_is_a_schema_error() -> None:
    payload: dict[str, Any] = {"included_node_ids": {"node_seq_ranges": [[1, 3]]}}
    with pytest.raises(AgentCoreError) as info:
        expand_report(payload, [None, "a", "b"])
    assert info.value.code == ErrorCode.schema_error
    row = (
        "evt_1",
        1,
        1,
        None,
        None,
        "info",
        "context_built",
        None,
        None,
        json.dumps(payload),
        "2026-01-02T03:04:05Z",
    )
    with pytest.raises(AgentCoreError) as info:
        events_from_rows([row], "sess_1")  # no node seqs given
    assert info.value.code == ErrorCode.schema_error


@pytest.mark.parametrize(
    "value",
    [
        {"usage": {"input_tokens": 100, "output_tokens": 10}},
        {"token_budget": {"context_window": 10, "total_tokens": 4}, "included_node_ids": ["a"]},
        {"token_budget": {"context_window": "x"}},
        {"token_budget": {"api_key": 5}},
        {"input_tokens": "sk-1"},
        {"secret_tokens": 5, "text": "token of appreciation"},
        {"x": [{"Cookie": 1}]},
        {"tokens": 1.5e30, "k": None},
        {"API-KEY": "v"},
        {"ſecret": "x"},  # folds onto "secret" for the regex
    ],
)
def test_the_scan_agrees_with_the_walk_also_once_keys_are_learned(value: dict[str, Any]) -> None:
    for _ in range(2):  # the second scan runs with the harmless keys of the first one learned
        assert has_sensitive_keys(value) == (redact_sensitive_keys(value) != value)
        assert has_sensitive_keys({"wrapper": [value]}) == has_sensitive_keys(value)


async def test_list_events_masks_sensitive_keys_when_asked(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        payload = {"usage": {"input_tokens": 3}, "headers": {"Authorization": "Bearer x"}}
        await env.storage.append(
            sid,
            nodes=[
                NodeDraft(agent_id=aid, role="user", content=[TextBlock(text="hi")], metadata={"token": "t"})
            ],
            events=[EventDraft(event_type=EventType.model_started, payload=payload)],
        )
        (event,) = await env.storage.list_events(sid, redact_keys=True)
        assert event.payload == {"usage": {"input_tokens": 3}, "headers": {"Authorization": "[REDACTED]"}}
        assert (await env.storage.list_events(sid))[0].payload == payload
        (node,) = await env.storage.list_nodes(sid, redact_keys=True)
        assert node.metadata == {"token": "[REDACTED]"}


async def test_a_node_index_missing_another_stores_nodes_is_reloaded_so_reports_stay_compact(
    tmp_path: Path,
) -> None:
    """Several processes on one file (issue 40): another store's nodes are not in this store's node index;
    the next write of the session after that store wrote drops it, so the report after next is compact
    again (not every later report stored whole)."""
    async with opened_store(tmp_path) as env:
        other = StorageManager(env.db_path, redactor=make_redactor())
        await other.open()
        try:
            sid, aid = await env.new_session()
            rid = await env.new_run(sid, aid)
            mine = _nodes(aid, 10)
            await env.storage.append(sid, nodes=mine)
            ids = [n.node_id for n in mine]
            report = EventType.context_built
            await env.storage.append(
                sid, events=[EventDraft(event_type=report, payload=_report(rid, aid, ids))]
            )
            theirs = _nodes(aid, 10)
            await other.append(sid, nodes=theirs)
            ids += [n.node_id for n in theirs]
            for _ in range(3):
                await env.storage.append(
                    sid, events=[EventDraft(event_type=report, payload=_report(rid, aid, ids))]
                )
        finally:
            await other.close()
        stored = _stored(env.db_path, sid)
        assert ["node_seq_ranges" in s for s in stored] == [False, False, False, True]
        assert json.loads(stored[3])["included_node_ids"] == {"node_seq_ranges": [[1, 20]]}
        events = await env.storage.list_events(sid)
        assert [e.payload["included_node_ids"] for e in events][1:] == [ids] * 3
