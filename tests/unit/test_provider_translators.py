"""Pure payload builders and stream translators of the three built-in adapters.

These feed parsed chunk dicts straight into the translators; the same behaviour is checked end to end
over real HTTP in ``tests/integration/test_provider_*.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core.errors import ErrorCode
from agent_core.providers import _anthropic as anthropic
from agent_core.providers import _ollama as ollama
from agent_core.providers import _openai_compatible as openai_compatible
from agent_core.providers._tool_mapping import ToolNameMap
from agent_core.providers.base import MessageAssembler, parse_arguments
from agent_core.types.content import ErrorPayload, ReasoningBlock, TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.model import (
    ModelCompleted,
    ModelEvent,
    ModelFailed,
    ModelReasoningDelta,
    ModelTextDelta,
    ProviderDebug,
    ToolCallDelta,
    ToolChoiceNamed,
)
from tests.fixtures.provider_requests import (
    assistant,
    call_block,
    make_request,
    result_block,
    system_blocks,
    tool,
    tool_message,
    user,
)

NAMES = ToolNameMap(["code.read_file", "code.list_dir", "agent.task_get"])


def oa_chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def run(translator: Any, chunks: list[dict[str, Any]]) -> list[ModelEvent]:
    events: list[ModelEvent] = []
    for chunk in chunks:
        events += translator.feed(chunk)
    return events + translator.finish()


def completed(events: list[ModelEvent]) -> ModelCompleted:
    assert isinstance(events[-1], ModelCompleted), events[-1]
    return events[-1]


# -- OpenAI -----------------------------------------------------------------------------------------
def test_openai_fragmented_tool_arguments() -> None:
    t = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    chunks = [
        oa_chunk({"role": "assistant", "content": ""}),
        oa_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "code__read_file", "arguments": ""},
                    }
                ]
            }
        ),
        oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"pa'}}]}),
        oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a.t'}}]}),
        oa_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'xt", "max_lines": 3}'}}]}),
        oa_chunk({}, "tool_calls"),
        openai_compatible.END_OF_STREAM,
    ]
    events = run(t, chunks)
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [d.phase for d in deltas] == ["start", "delta", "delta", "delta", "end"]
    assert deltas[0].name == "code.read_file" and deltas[0].tool_call_id == "call_a"
    done = completed(events)
    call = done.tool_calls[0]
    assert call.name == "code.read_file"
    assert call.arguments == {"path": "a.txt", "max_lines": 3}
    assert call.metadata["provider_tool_name"] == "code__read_file"
    assert call.metadata["provider_tool_call_id"] == "call_a"
    assert done.content == [
        ToolCallBlock(
            tool_call_id="call_a", name="code.read_file", arguments=call.arguments, metadata=call.metadata
        )
    ]
    assert done.stop_reason.reason == "tool_use" and done.stop_reason.raw_stop_reason == "tool_calls"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("tool_calls", "tool_use"),
        ("function_call", "tool_use"),
        ("weird", "end_turn"),
    ],
)
def test_openai_stop_reasons(raw: str, reason: str) -> None:
    t = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    events = run(t, [oa_chunk({"content": "x"}), oa_chunk({}, raw)])
    stop = completed(events).stop_reason
    assert stop.reason == reason and stop.raw_stop_reason == raw


def test_openai_stop_with_tool_call_is_tool_use() -> None:
    t = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    call = {"index": 0, "id": "c", "function": {"name": "code__list_dir", "arguments": "{}"}}
    events = run(t, [oa_chunk({"tool_calls": [call]}), oa_chunk({}, "stop")])
    assert completed(events).stop_reason.model_dump() == {"reason": "tool_use", "raw_stop_reason": "stop"}


def test_openai_usage_mapping() -> None:
    raw = {
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "prompt_tokens_details": {"cached_tokens": 3},
    }
    usage = openai_compatible.map_usage(raw)
    assert usage.model_dump(exclude={"raw_usage"}) == {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "cache_read_tokens": 3,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
    }
    assert usage.raw_usage == raw
    reasoning = openai_compatible.map_usage(
        {"prompt_tokens": 2, "completion_tokens": 4, "completion_tokens_details": {"reasoning_tokens": 1}}
    )
    assert (
        reasoning.total_tokens == 6
        and reasoning.reasoning_tokens == 1
        and reasoning.cache_read_tokens is None
    )


def test_openai_translator_index_missing_matches_by_id_and_parallel_calls() -> None:
    t = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    chunks = [
        oa_chunk(
            {"tool_calls": [{"id": "x1", "function": {"name": "code__list_dir", "arguments": '{"path"'}}]}
        ),
        oa_chunk(
            {
                "tool_calls": [
                    {"id": "x2", "function": {"name": "code__read_file", "arguments": '{"path": "b"}'}}
                ]
            }
        ),
        oa_chunk({"tool_calls": [{"id": "x1", "function": {"arguments": ': "."}'}}]}),
        oa_chunk({}, "tool_calls"),
    ]
    done = completed(run(t, chunks))
    assert [(c.tool_call_id, c.name, c.arguments) for c in done.tool_calls] == [
        ("x1", "code.list_dir", {"path": "."}),
        ("x2", "code.read_file", {"path": "b"}),
    ]


def test_openai_translator_invalid_arguments_ids_and_duplicates() -> None:
    t = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    long_id = "x" * 129
    chunks = [
        oa_chunk(
            {
                "tool_calls": [
                    {"index": 0, "id": "dup", "function": {"name": "code__list_dir", "arguments": "{bad"}}
                ]
            }
        ),
        oa_chunk(
            {
                "tool_calls": [
                    {"index": 1, "id": "dup", "function": {"name": "code__list_dir", "arguments": "[1]"}}
                ]
            }
        ),
        oa_chunk(
            {"tool_calls": [{"index": 2, "id": long_id, "function": {"name": "ghost__x", "arguments": ""}}]}
        ),
        oa_chunk({}, "tool_calls"),
    ]
    calls = completed(run(t, chunks)).tool_calls
    first, second, third = calls
    assert first.tool_call_id == "dup" and first.arguments == {}
    assert "invalid JSON" in first.metadata["arguments_error"] and first.metadata["raw_arguments"] == "{bad"
    assert second.tool_call_id.startswith("call_") and second.metadata["provider_tool_call_id"] == "dup"
    assert second.arguments == {} and "JSON object" in second.metadata["arguments_error"]
    assert third.tool_call_id.startswith("call_") and third.metadata["provider_tool_call_id"] == long_id
    assert third.arguments == {} and "arguments_error" not in third.metadata  # empty text parses as {}
    assert third.name == "ghost__x"  # unknown names pass through unchanged
    assert len({c.tool_call_id for c in calls}) == 3


def test_openai_translator_error_chunk_and_truncated_stream() -> None:
    t = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    events = t.feed({"error": {"message": "rate limited", "type": "rate_limit_error"}})
    assert isinstance(events[0], ModelFailed)
    assert events[0].error.type == "rate_limit" and events[0].error.code == "provider_rate_limited"
    t2 = openai_compatible.StreamTranslator(model="m", name_map=NAMES)
    events = run(t2, [oa_chunk({"content": "partial"})])
    assert isinstance(events[-1], ModelFailed) and events[-1].error.type == "protocol"


def test_openai_payload_mapping() -> None:
    request = make_request(
        system=system_blocks("sys one", "sys two"),
        messages=[
            user("list"),
            assistant(TextBlock(text="checking"), call_block("c1", "code.list_dir", {"path": "."})),
            tool_message(result_block("c1", "a.txt\nb.txt")),
            tool_message(
                ToolResultBlock(
                    tool_call_id="c9",
                    is_error=True,
                    content=[],
                    error=ErrorPayload(code=ErrorCode.permission_denied, message="denied"),
                )
            ),
        ],
        tools=[tool("code.list_dir")],
        tool_choice=ToolChoiceNamed(name="code.list_dir"),
        temperature=0.3,
        max_output_tokens=77,
        stop_sequences=["END"],
        provider_options={"openai": {"seed": 7}, "ollama": {"bogus": 1}},
    )
    payload = openai_compatible.build_payload(request, ToolNameMap.for_request(request))
    assert payload["stream"] is True and payload["stream_options"] == {"include_usage": True}
    assert payload["messages"][0] == {"role": "system", "content": "sys one\n\nsys two"}
    assert payload["messages"][1] == {"role": "user", "content": "list"}
    assert payload["messages"][2] == {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "code__list_dir", "arguments": '{"path": "."}'},
            }
        ],
    }
    assert payload["messages"][3] == {"role": "tool", "tool_call_id": "c1", "content": "a.txt\nb.txt"}
    assert payload["messages"][4]["content"] == "[error permission_denied] denied"
    assert payload["tools"][0]["function"]["parameters"] == request.tools[0].input_schema
    assert payload["tool_choice"] == {"type": "function", "function": {"name": "code__list_dir"}}
    assert (payload["temperature"], payload["max_tokens"], payload["stop"], payload["seed"]) == (
        0.3,
        77,
        ["END"],
        7,
    )
    assert "bogus" not in payload
    bare = openai_compatible.build_payload(make_request(), ToolNameMap())
    assert "tools" not in bare and "tool_choice" not in bare and "temperature" not in bare


# -- Anthropic --------------------------------------------------------------------------------------
def test_anthropic_tool_use_and_cache_usage() -> None:
    t = anthropic.StreamTranslator(model="m", name_map=NAMES)
    chunks: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "usage": {
                    "input_tokens": 20,
                    "output_tokens": 1,
                    "cache_read_input_tokens": 4,
                    "cache_creation_input_tokens": 6,
                },
            },
        },
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "agent__task_get",
                "input": {"ignored": True},
            },
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"task_'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": 'id": "t1"'},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": "}"},
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
    ]
    events = run(t, chunks)
    done = completed(events)
    assert len(done.tool_calls) == 1
    call = done.tool_calls[0]
    assert (call.tool_call_id, call.name, call.arguments) == ("toolu_1", "agent.task_get", {"task_id": "t1"})
    assert done.stop_reason.reason == "tool_use"
    # the whole prompt: Anthropic's uncached 20 plus 4 read from and 6 written to the cache
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (30, 9, 39)
    assert (done.usage.cache_read_tokens, done.usage.cache_write_tokens) == (4, 6)
    assert done.usage.uncached_input_tokens == 20
    assert done.metadata["response_id"] == "msg_1"
    assert [e.phase for e in events if isinstance(e, ToolCallDelta)] == [
        "start",
        "delta",
        "delta",
        "delta",
        "end",
    ]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("stop_sequence", "stop_sequence"),
        ("refusal", "content_filter"),
        ("pause_turn", "end_turn"),
    ],
)
def test_anthropic_stop_reasons(raw: str, reason: str) -> None:
    t = anthropic.StreamTranslator(model="m", name_map=NAMES)
    events = run(
        t,
        [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
            {"type": "message_delta", "delta": {"stop_reason": raw}, "usage": {"output_tokens": 1}},
            {"type": "message_stop"},
        ],
    )
    assert completed(events).stop_reason.model_dump() == {"reason": reason, "raw_stop_reason": raw}


def test_anthropic_thinking_deltas_errors_and_truncation() -> None:
    t = anthropic.StreamTranslator(model="m", name_map=NAMES)
    events = t.feed(
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}
    )
    assert events == []
    deltas = t.feed(
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}
    )
    assert [e.type for e in deltas] == ["model_reasoning_delta"]
    events = t.feed({"type": "content_block_start", "index": 1, "content_block": {"type": "server_tool_use"}})
    assert isinstance(events[0], ProviderDebug) and events[0].kind == "ignored_block"
    assert t.feed({"type": "ping"}) == []
    failed = t.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert isinstance(failed[0], ModelFailed)
    assert (failed[0].error.type, failed[0].error.code, failed[0].error.retryable) == (
        "server",
        "provider_error",
        True,
    )
    for kind, expected in [
        ("rate_limit_error", "rate_limit"),
        ("authentication_error", "auth"),
        ("permission_error", "auth"),
        ("invalid_request_error", "invalid_request"),
        ("api_error", "server"),
    ]:
        other = anthropic.StreamTranslator(model="m", name_map=NAMES)
        event = other.feed({"type": "error", "error": {"type": kind, "message": "x"}})[0]
        assert isinstance(event, ModelFailed) and event.error.type == expected
    cut = anthropic.StreamTranslator(model="m", name_map=NAMES)
    events = run(cut, [{"type": "message_start", "message": {"id": "m"}}])
    assert isinstance(events[-1], ModelFailed) and events[-1].error.type == "protocol"


def test_anthropic_payload_mapping() -> None:
    request = make_request(
        system=system_blocks("first", "second"),
        messages=[
            user("one"),
            user("two"),
            assistant(TextBlock(text=""), call_block("toolu_1", "code.list_dir", {"path": "."})),
            tool_message(result_block("toolu_1", "files", is_error=True)),
            user("three"),
        ],
        tools=[tool("code.list_dir")],
        tool_choice="required",
        provider_options={"anthropic": {"top_k": 5}},
    )
    payload = anthropic.build_payload(request, ToolNameMap.for_request(request))
    assert payload["system"] == [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    assert all(m["role"] != "system" for m in payload["messages"])
    assert [m["role"] for m in payload["messages"]] == ["user", "assistant", "user"]
    assert payload["messages"][0]["content"] == [
        {"type": "text", "text": "one"},
        {"type": "text", "text": "two"},
    ]
    assert payload["messages"][1]["content"] == [
        {"type": "tool_use", "id": "toolu_1", "name": "code__list_dir", "input": {"path": "."}}
    ]
    assert payload["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "files", "is_error": True},
        {"type": "text", "text": "three"},
    ]
    assert payload["tools"] == [
        {
            "name": "code__list_dir",
            "description": "the code.list_dir tool",
            "input_schema": request.tools[0].input_schema,
        }
    ]
    assert payload["tool_choice"] == {"type": "any"} and payload["top_k"] == 5
    assert payload["max_tokens"] == 4096 and payload["stream"] is True
    named = make_request(tools=[tool("code.list_dir")], tool_choice=ToolChoiceNamed(name="code.list_dir"))
    assert anthropic.build_payload(named, ToolNameMap.for_request(named))["tool_choice"] == {
        "type": "tool",
        "name": "code__list_dir",
    }


def test_anthropic_request_without_tools_carries_tool_blocks_as_text() -> None:
    """The final no-tools answer call (docs/runs.md#limits): the Messages API rejects tool blocks without
    tools."""
    request = make_request(
        messages=[
            user("one"),
            assistant(TextBlock(text=""), call_block("toolu_1", "code.list_dir", {"path": "."})),
            tool_message(result_block("toolu_1", "files")),
        ],
        tools=[],
        tool_choice="none",
    )
    payload = anthropic.build_payload(request, ToolNameMap.for_request(request))
    assert "tools" not in payload and "tool_choice" not in payload
    kinds = {block["type"] for message in payload["messages"] for block in message["content"]}
    assert kinds == {"text"}
    assert payload["messages"][1]["content"] == [
        {"type": "text", "text": '[tool call code.list_dir {"path":"."}]'}
    ]
    assert payload["messages"][2]["content"] == [{"type": "text", "text": "[tool result toolu_1]\nfiles"}]


# -- Ollama -----------------------------------------------------------------------------------------
def test_ollama_tool_call_line() -> None:
    t = ollama.StreamTranslator(model="m", name_map=NAMES)
    events = run(
        t,
        [
            {
                "message": {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"function": {"name": "code__list_dir", "arguments": {"path": "."}}}],
                },
                "done": False,
            },
            {
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 12,
                "eval_count": 4,
                "eval_duration": 99,
            },
        ],
    )
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [d.phase for d in deltas] == ["start", "delta", "end"]
    assert deltas[0].tool_call_id is not None and deltas[0].tool_call_id.startswith("call_")
    done = completed(events)
    call = done.tool_calls[0]
    assert call.tool_call_id == deltas[0].tool_call_id and call.tool_call_id.startswith("call_")
    assert (call.name, call.arguments) == ("code.list_dir", {"path": "."})
    assert done.stop_reason.model_dump() == {"reason": "tool_use", "raw_stop_reason": "stop"}
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (12, 4, 16)
    assert done.usage.raw_usage == {"prompt_eval_count": 12, "eval_count": 4, "eval_duration": 99}


def test_ollama_translator_text_length_thinking_error_truncation() -> None:
    t = ollama.StreamTranslator(model="m", name_map=NAMES)
    events = run(
        t,
        [
            {"message": {"content": "Hel", "thinking": "hmm"}, "done": False},
            {"message": {"content": "lo", "thinking": "more"}, "done": False},
            {"message": {"content": ""}, "done": True, "done_reason": "length"},
        ],
    )
    assert "".join(e.text for e in events if isinstance(e, ModelTextDelta)) == "Hello"
    assert [e.text for e in events if isinstance(e, ModelReasoningDelta)] == ["hmm", "more"]
    done = completed(events)
    thought = ReasoningBlock(text="hmmmore", provider="ollama")
    assert done.content == [thought, TextBlock(text="Hello")] and done.stop_reason.reason == "max_tokens"
    err = ollama.StreamTranslator(model="m", name_map=NAMES).feed({"error": '"m" does not support tools'})[0]
    assert isinstance(err, ModelFailed) and err.error.type == "unsupported_capability"
    assert err.error.capability == "tools"
    cut = run(
        ollama.StreamTranslator(model="m", name_map=NAMES), [{"message": {"content": "x"}, "done": False}]
    )
    assert isinstance(cut[-1], ModelFailed) and cut[-1].error.type == "protocol"


def test_ollama_payload_mapping() -> None:
    request = make_request(
        system=system_blocks("sys"),
        messages=[
            user("go"),
            assistant(call_block("call_1", "code.list_dir", {"path": "."})),
            tool_message(result_block("call_1", "a.txt")),
        ],
        tools=[tool("code.list_dir")],
        temperature=0.1,
        max_output_tokens=50,
        stop_sequences=["X"],
        provider_options={"ollama": {"options": {"top_k": 3}, "keep_alive": "5m"}},
    )
    payload = ollama.build_payload(request, ToolNameMap.for_request(request), context_window=4096)
    assert payload["messages"] == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "code__list_dir", "arguments": {"path": "."}}}],
        },
        {"role": "tool", "content": "a.txt", "tool_name": "code__list_dir"},
    ]
    assert payload["options"] == {
        "temperature": 0.1,
        "num_predict": 50,
        "num_ctx": 4096,
        "stop": ["X"],
        "top_k": 3,
    }
    assert payload["keep_alive"] == "5m" and payload["stream"] is True
    assert payload["tools"][0]["function"]["name"] == "code__list_dir"


# -- shared helpers ---------------------------------------------------------------------------------
def test_parse_arguments_rules() -> None:
    assert parse_arguments("") == ({}, None)
    assert parse_arguments("  ") == ({}, None)
    assert parse_arguments('{"a": 1}') == ({"a": 1}, None)
    assert parse_arguments("null")[1] is not None
    assert parse_arguments("{")[0] == {}


def test_assembler_merges_text_segments_and_orders_blocks() -> None:
    asm = MessageAssembler(provider="p", model="m", name_map=NAMES)
    asm.text("a")
    asm.text("b")
    asm.start_call(1, provider_id="t1", provider_name="code__list_dir")
    asm.call_arguments(1, json.dumps({"path": "."}))
    asm.end_call(1)
    asm.text("")
    asm.text("c")
    done = asm.completed("end_turn", None)
    assert [b.type for b in done.content] == ["text", "tool_call", "text"]
    assert isinstance(done.content[0], TextBlock) and done.content[0].text == "ab"
    assert done.stop_reason.reason == "tool_use" and done.stop_reason.raw_stop_reason is None


def test_anthropic_separate_text_blocks_stay_separate() -> None:
    t = anthropic.StreamTranslator(model="m", name_map=NAMES)
    events = run(
        t,
        [
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "one"}},
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": " two"}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": "three"}},
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
            {"type": "message_stop"},
        ],
    )
    assert completed(events).content == [TextBlock(text="one two"), TextBlock(text="three")]
