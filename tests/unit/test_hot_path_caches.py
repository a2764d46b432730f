"""Caches and fast paths added for the performance issue (issue 9): each must give exactly the result of the
plain computation, and never a stale one."""

from __future__ import annotations

import gc
import json
import os
from typing import Any

import pytest

from agent_core import RunStatus
from agent_core._events.stream import EventChannel
from agent_core._memo import WireMemo
from agent_core._redaction import REDACTED, Redactor, has_sensitive_keys, redact_sensitive_keys, redact_with
from agent_core._storage.decode import events_from_rows, nodes_from_rows
from agent_core.providers._openai_wire import BodyEncoder, build_payload
from agent_core.providers._tool_mapping import ToolNameMap
from agent_core.types.content import JsonBlock, TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.enums import EventType
from agent_core.types.model import ModelMessage, ModelRequest, SystemBlock
from agent_core.types.runtime import RuntimeEvent
from agent_core.types.tools import ToolDefinition
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text
from tests.fixtures.runtime import collect, open_runtime


class _Box:
    """A weak-referenceable stand-in key."""


def test_wire_memo_is_by_identity_and_forgets_dead_objects() -> None:
    memo = WireMemo()
    first, twin = _Box(), _Box()
    memo.put(first, {"v": 1})
    assert memo.get(first) == {"v": 1}
    assert memo.get(twin) is None  # an equal-looking object is another key
    del first
    gc.collect()
    assert len(memo) == 0  # the entry died with its key: a recycled id() can never hit it
    memo.put(42, "not cached")  # not weak-referenceable: silently not cached
    assert memo.get(42) is None


def test_wire_memo_with_a_capacity_drops_its_oldest_entries() -> None:
    memo = WireMemo(capacity=2)
    boxes = [_Box() for _ in range(3)]
    for i, box in enumerate(boxes):
        memo.put(box, i)
    assert len(memo) == 2 and memo.get(boxes[0]) is None and memo.get(boxes[2]) == 2
    del boxes[0]
    gc.collect()  # the dropped entry's key dying later changes nothing
    assert len(memo) == 2 and memo.get(boxes[0]) == 1


def _request(messages: list[ModelMessage], tools: list[str]) -> ModelRequest:
    return ModelRequest(
        model="m",
        system=[SystemBlock(block_id="s", source="test", content="be brief")],
        messages=messages,
        tools=[
            ToolDefinition(
                name=n, description=f"tool {n}", input_schema={"type": "object"}, permission="readonly"
            )
            for n in tools
        ],
    )


def _history() -> list[ModelMessage]:
    call_a = ToolCallBlock(tool_call_id="a", name="code.read_file", arguments={"path": "x"})
    call_b = ToolCallBlock(tool_call_id="b", name="code.list_dir", arguments={"path": "."})
    return [
        ModelMessage(role="user", content=[TextBlock(text="hi"), JsonBlock(data={"k": 1})]),
        ModelMessage(role="assistant", content=[TextBlock(text="two calls"), call_a, call_b]),
        # results in completion order (b first) in two consecutive tool messages, a system message between
        ModelMessage(role="tool", content=[ToolResultBlock(tool_call_id="b", content=[TextBlock(text="B")])]),
        ModelMessage(role="system", content=[TextBlock(text="note")]),
        ModelMessage(
            role="tool",
            content=[ToolResultBlock(tool_call_id="a", is_error=True, content=[TextBlock(text="A failed")])],
        ),
        ModelMessage(role="assistant", content=[TextBlock(text="done")]),
        ModelMessage(role="user", content=[TextBlock(text="again")]),
    ]


def _plain_body(request: ModelRequest, names: ToolNameMap) -> bytes:
    return json.dumps(build_payload(request, names), ensure_ascii=False).encode("utf-8")


def test_openai_encoded_body_equals_the_dumped_payload_across_requests() -> None:
    history = _history()
    request = _request(history, ["code.read_file", "code.list_dir"])
    names = ToolNameMap.for_request(request)
    plain = build_payload(request, names)
    encoder = BodyEncoder()
    assert encoder.encode(request, names) == _plain_body(request, names)
    roles = [m["role"] for m in plain["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert [m["tool_call_id"] for m in plain["messages"][3:5]] == ["a", "b"]  # the calls' order
    assert plain["messages"][0]["content"] == "be brief\n\nnote"  # system blocks, then system messages
    grown = [*history, ModelMessage(role="assistant", content=[TextBlock(text="more")])]
    second_request = request.model_copy(update={"messages": grown})  # the same tool definitions
    second_names = ToolNameMap.for_request(second_request)
    entries = len(encoder.memo)
    assert encoder.encode(second_request, second_names) == _plain_body(second_request, second_names)
    assert len(encoder.memo) == entries + 1  # only the new message was encoded; the rest was reused


def test_openai_encoded_body_merges_assistant_chains_and_keeps_options() -> None:
    """Consecutive assistant messages (a max_tokens continuation) become one entry; non-ASCII text,
    options and a named tool choice encode exactly as ``json.dumps`` of the payload."""
    from agent_core.types.model import ToolChoiceNamed

    call = ToolCallBlock(tool_call_id="c1", name="code.read_file", arguments={"path": "ü/x"})
    history = [
        ModelMessage(role="user", content=[TextBlock(text='héllo \u2028 "q"')]),
        ModelMessage(role="assistant", content=[TextBlock(text="part one ")]),
        ModelMessage(role="assistant", content=[TextBlock(text="part two"), call]),
        ModelMessage(
            role="tool", content=[ToolResultBlock(tool_call_id="c1", content=[TextBlock(text="ok")])]
        ),
    ]
    request = _request(history, ["code.read_file"]).model_copy(
        update={
            "temperature": 0.3,
            "max_output_tokens": 100,
            "stop_sequences": ["END"],
            "tool_choice": ToolChoiceNamed(name="code.read_file"),
            "provider_options": {"openai": {"seed": 7, "top_p": 0.5}},
        }
    )
    names = ToolNameMap.for_request(request)
    encoder = BodyEncoder()
    for _ in range(2):  # the second time from the memo
        assert encoder.encode(request, names) == _plain_body(request, names)
    merged = build_payload(request, names)["messages"][2]
    assert merged["content"] == "part one part two" and merged["tool_calls"][0]["id"] == "c1"


def test_openai_memo_is_bypassed_when_the_tool_name_mapping_changes() -> None:
    history = _history()
    encoder = BodyEncoder()
    encoder.encode(_request(history, ["code.read_file", "code.list_dir"]), ToolNameMap(["code.read_file"]))

    class Renamed(ToolNameMap):
        def mangle(self, canonical: str) -> str:
            return "renamed_" + canonical.replace(".", "_")

    renamed = Renamed(["code.read_file", "code.list_dir"])
    request = _request(history, ["code.read_file"])
    body = encoder.encode(request, renamed)
    assert body == _plain_body(request, renamed)
    payload = json.loads(body)
    calls = payload["messages"][2]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["renamed_code_read_file", "renamed_code_list_dir"]
    assert payload["tools"][0]["function"]["name"] == "renamed_code_read_file"


def test_has_sensitive_keys_matches_redact_sensitive_keys() -> None:
    samples: list[Any] = [
        {"usage": {"input_tokens": 3, "output_tokens": 4}, "token_budget": {"total_tokens": 9}},
        {"included_node_ids": ["node_a", "node_b"], "text": "token of appreciation"},
        {"headers": {"Authorization": "Bearer x"}},
        {"items": [{"ok": 1}, {"api_key": "k"}]},
        {"password": None, "secret": True},
        {"access_token": 12},
        [["a", "b"], ["c", {"n": 1}]],
    ]
    for value in samples:
        assert has_sensitive_keys(value) == (redact_sensitive_keys(value) != value), value
    assert redact_sensitive_keys({"ids": ("a", "b")}) == {"ids": ["a", "b"]}  # tuples still become lists
    assert redact_sensitive_keys({"x": [{"cookie": "c"}]}) == {"x": [{"cookie": REDACTED}]}


def test_redaction_of_string_lists_uses_the_joined_scan_without_missing_secrets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BENCH_API_KEY", "sk-abcdefgh12345")
    secrets = Redactor().secrets()
    assert "sk-abcdefgh12345" in secrets
    ids = [f"node_{i}" for i in range(50)]
    clean = redact_with({"included_node_ids": ids}, secrets)
    assert clean == {"included_node_ids": ids} and clean["included_node_ids"] is not ids
    dirty = redact_with({"list": ["a", "x sk-abcdefgh12345 y", "b"]}, secrets)
    assert dirty == {"list": ["a", f"x {REDACTED} y", "b"]}


def test_secrets_follow_environment_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor = Redactor(["MY_SERVICE_KEY"])
    monkeypatch.delenv("MY_SERVICE_KEY", raising=False)
    before = redactor.secrets()
    monkeypatch.setenv("MY_SERVICE_KEY", "value-1234567")
    assert "value-1234567" in redactor.secrets() and "value-1234567" not in before
    monkeypatch.setenv("MY_SERVICE_KEY", "value-7654321")  # same key set, new value
    assert "value-7654321" in redactor.secrets() and "value-1234567" not in redactor.secrets()
    monkeypatch.setenv("ANOTHER_SECRET", "zz-0123456789")  # new pattern-named variable
    assert "zz-0123456789" in redactor.secrets()
    monkeypatch.delenv("ANOTHER_SECRET")
    assert "zz-0123456789" not in redactor.secrets()
    assert os.environ.get("MY_SERVICE_KEY") == "value-7654321"


def test_row_readers_build_the_runtime_types_and_reject_bad_rows() -> None:
    content = json.dumps([{"type": "text", "text": "hi"}])
    [node] = nodes_from_rows(
        [
            (
                "node_1",
                1,
                None,
                "agent_1",
                "run_1",
                "user",
                "message",
                content,
                '{"k":1}',
                3,
                "2026-01-02T03:04:05.000006Z",
            )
        ],
        "sess_1",
    )
    assert node.content == [TextBlock(text="hi")] and node.metadata == {"k": 1}
    assert node.created_at.microsecond == 6 and node.session_id == "sess_1"
    [event] = events_from_rows(
        [
            (
                "evt_1",
                5,
                2,
                "agent_1",
                "run_1",
                "info",
                "loop_started",
                None,
                None,
                '{"mode":"normal"}',
                "2026-01-02T03:04:05Z",
            )
        ],
        "sess_1",
    )
    assert isinstance(event, RuntimeEvent) and event.event_type == EventType.loop_started
    assert event.data == {"mode": "normal"} and event.seq == 5 and event.run_seq == 2
    from agent_core.errors import AgentCoreError, ErrorCode

    for bad in (
        ("evt_1", 5, 2, None, None, "info", "no_such_event", None, None, None, "2026-01-02T03:04:05Z"),
        ("evt_1", 5, 2, None, None, "info", "loop_started", None, None, "[1]", "2026-01-02T03:04:05Z"),
        ("evt_1", 5, 2, None, None, "info", "loop_started", None, None, "{", "not a time"),
    ):
        with pytest.raises(AgentCoreError) as info:
            events_from_rows([bad], "sess_1")
        assert info.value.code == ErrorCode.schema_error


async def test_many_coalesced_deltas_keep_their_text_in_order() -> None:
    """Case D16."""
    channel = EventChannel()

    def delta(kind: EventType, text: str) -> RuntimeEvent:
        return RuntimeEvent(
            event_id="evt_x", session_id="s", run_id="r", event_type=kind, payload={"text": text}
        )

    for i in range(5000):
        await channel.push(delta(EventType.model_text_delta, str(i % 10)))
        await channel.push(delta(EventType.message_delta, str(i % 10)))
    await channel.push(
        RuntimeEvent(event_id="evt_y", session_id="s", run_id="r", event_type=EventType.loop_completed)
    )
    await channel.push(delta(EventType.message_delta, "tail"))
    channel.close()
    delivered = [e async for e in channel.subscribe(debug=True)]
    expected = "".join(str(i % 10) for i in range(5000))
    assert [e.event_type for e in delivered] == [
        EventType.model_text_delta,
        EventType.message_delta,
        EventType.loop_completed,
        EventType.message_delta,
    ]
    assert delivered[0].data["text"] == expected and delivered[1].data["text"] == expected
    assert delivered[3].data["text"] == "tail"


async def test_finished_root_runs_leave_the_live_run_table(soong_env: SoongEnv) -> None:
    """A long-lived runtime does not keep every finished run (memory and GC cost grow with the session)."""
    fake = FakeProvider(text("one"), text("two"))
    async with open_runtime(soong_env, fake) as runtime:
        first = await runtime.start("hello")
        await collect(first)
        second = await runtime.start("again", session_id=first.session_id)
        await collect(second)
        manager = await runtime._open()
        assert first.run_id not in manager.runs and second.run_id not in manager.runs
        assert first.status == RunStatus.completed and second.status == RunStatus.completed
        replay = await runtime.replay_session(first.session_id)
        assert [r.run_id for r in replay.runs] == [first.run_id, second.run_id]


def test_openai_payload_with_prefix_memo_equals_a_fresh_build() -> None:
    """Resuming the wire encoding at the last shared user message never changes the request body."""
    from agent_core.providers._openai_wire import BodyEncoder
    from agent_core.providers._prefix import PrefixMemo
    from agent_core.providers._tool_mapping import ToolNameMap
    from agent_core.types.content import TextBlock, ToolCallBlock, ToolResultBlock
    from agent_core.types.model import ModelMessage, ModelRequest

    memo = PrefixMemo()
    encoder = BodyEncoder()
    history: list[ModelMessage] = []
    meta = {"session_id": "sess_a", "agent_id": "agent_a"}
    for turn in range(6):
        history.append(ModelMessage(role="user", content=[TextBlock(text=f"q{turn}")]))
        history.append(
            ModelMessage(
                role="assistant",
                content=[
                    ToolCallBlock(tool_call_id=f"c{turn}", name="code.read_file", arguments={"path": "x"}),
                    ToolCallBlock(tool_call_id=f"d{turn}", name="demo.tool", arguments={}),
                ],
            )
        )
        history.append(
            ModelMessage(
                role="tool", content=[ToolResultBlock(tool_call_id=f"d{turn}", content=[TextBlock(text="d")])]
            )
        )
        history.append(
            ModelMessage(
                role="tool", content=[ToolResultBlock(tool_call_id=f"c{turn}", content=[TextBlock(text="c")])]
            )
        )
        history.append(ModelMessage(role="assistant", content=[TextBlock(text=f"a{turn}")]))
        if turn == 3:  # a rewritten history (e.g. trimming) must not reuse stale entries
            history = history[2:]
        if turn == 4:  # a system message inside the history joins the system prompt
            history.append(ModelMessage(role="system", content=[TextBlock(text=f"note {turn}")]))
        request = ModelRequest(model="m", messages=list(history), metadata=meta)
        entry, shared = memo.scan(request)
        names = ToolNameMap([*entry.names])
        body = encoder.encode(request, names, (entry, shared))
        assert body == _plain_body(request, ToolNameMap.for_request(request))


async def test_loop_started_commits_first_with_the_running_status(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``loop_started`` and the run's ``running`` status commit together, first, on the recorder's one
    write path (each write a transaction of its own); the stream delivers it first, committed (it has a
    seq), and the run row ends up consistent."""
    fake = FakeProvider(text("one"))
    async with open_runtime(soong_env, fake) as runtime:
        manager = await runtime._open()
        storage = manager.services.storage
        appends: list[tuple[list[str], list[str]]] = []
        original = storage.append

        async def spy(session_id: str, **kwargs: Any) -> Any:
            events = [str(d.event_type) for d in kwargs.get("events", ())]
            update = kwargs.get("run_update")
            appends.append((events, sorted(update[1]) if update else []))
            return await original(session_id, **kwargs)

        monkeypatch.setattr(storage, "append", spy)
        run = await runtime.start("hello")
        events = await collect(run, debug=True)
        assert appends[:2] == [(["loop_started"], ["status"]), (["message_created"], ["start_node_id"])]
        assert not any("loop_started" in e for e, _ in appends[1:])
        assert [e.event_type for e in events[:2]] == [EventType.loop_started, EventType.message_created]
        assert events[0].seq is not None and events[1].seq == events[0].seq + 1
        assert events[0].run_seq == 1 and events[1].run_seq == 2
        record = await storage.get_run(run.run_id)
        assert record is not None and record.status == RunStatus.completed


def test_system_entry_from_kept_pieces_equals_json_dumps() -> None:
    """The system message is joined from each text's kept JSON body: byte-equal to dumping the joined text."""
    from agent_core.providers._openai_wire import SYSTEM_PIECES_CAPACITY, BodyEncoder

    encoder = BodyEncoder()
    cases = [
        ["plain"],
        ['quote " backslash \\ slash /', "caf\u00e9\n\ttab \x01 \u2028 \U0001f600", "tail"],
        ["plain", "again"],  # a kept piece next to a new one
        [f"block {i}" for i in range(SYSTEM_PIECES_CAPACITY + 3)],  # past the capacity: cleared, still right
    ]
    for texts in cases:
        expected = json.dumps({"role": "system", "content": "\n\n".join(texts)}, ensure_ascii=False)
        assert encoder._system_entry(texts) == expected.encode("utf-8")


def test_effective_tools_memo_recomputes_when_an_input_changes() -> None:
    """Reused only while the definitions and settings are the same objects and role / failed MCP match."""
    from agent_core.config.schema import Settings
    from agent_core.tools._effective import EffectiveToolsMemo, compute_effective_tools
    from agent_core.types.enums import AgentRole

    def tool(name: str) -> ToolDefinition:
        return ToolDefinition(
            name=name, description="d", input_schema={"type": "object"}, permission="readonly"
        )

    settings = Settings.model_validate({"model": {"provider": "fake", "name": "m"}})
    defs = [tool("code.read_file"), tool("code.grep")]
    memo = EffectiveToolsMemo()
    first = memo.get(defs, settings, AgentRole.main)
    assert memo.get(list(defs), settings, AgentRole.main) is first  # same objects, new list
    assert first == compute_effective_tools(defs, settings, AgentRole.main)
    other_settings = Settings.model_validate(
        {"model": {"provider": "fake", "name": "m"}, "tools": {"disabled": ["code.grep"]}}
    )
    changed = memo.get(defs, other_settings, AgentRole.main)
    assert changed is not first and "code.grep" not in changed.names
    assert memo.get([defs[0], tool("code.grep")], other_settings, AgentRole.main) is not changed
    assert memo.get(defs, other_settings, AgentRole.main, ["srv"]) is not memo.get(
        defs, other_settings, AgentRole.worker
    )
