"""The ``openai`` adapter over real HTTP against the scripted Chat Completions server (C3 adapter half)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.types.content import TextBlock
from agent_core.types.model import (
    ModelCompleted,
    ModelFailed,
    ModelStarted,
    ModelTextDelta,
    ProviderDebug,
    ToolCallDelta,
)
from tests.fixtures.provider_requests import (
    READ_FILE_SCHEMA,
    SleepRecorder,
    assistant,
    call_block,
    collect,
    make_request,
    model_config,
    result_block,
    system_blocks,
    tool,
    tool_message,
    types_of,
    user,
)
from tests.fixtures.scripted_servers import (
    OpenAIWire,
    Response,
    ScriptedOpenAIServer,
    ScriptedRequest,
    advertised_tool_name,
    error,
    stream,
)

KEY = "sk-test-0123456789abcdef"
TOOLS = [tool("code.list_dir"), tool("code.read_file", READ_FILE_SCHEMA)]


@pytest.fixture
def adapter(scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch) -> OpenAIAdapter:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    config = model_config("openai", scripted_openai.base_url, api_key_env="SOONG_TEST_API_KEY")
    return OpenAIAdapter(config, sleep=SleepRecorder())


async def test_openai_text_and_parallel_fragmented_tool_calls(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    """Case C3."""
    args_a = {"path": "src", "recursive": False}
    args_b = {"path": "README.md", "max_lines": 20}

    def respond(req: ScriptedRequest) -> Response:
        calls = [
            ("call_list_1", advertised_tool_name(req, "list_dir"), args_a),
            ("call_read_2", advertised_tool_name(req, "read_file"), args_b),
        ]
        return stream(OpenAIWire.tool_stream(calls, text="Let me look.", fragments=4, usage=(31, 12)))

    scripted_openai.handler(respond)
    request = make_request(
        "inspect the repo", tools=TOOLS, system=system_blocks("core rules", "project rules")
    )
    events = await collect(adapter, request)
    await adapter.close()

    assert isinstance(events[0], ModelStarted) and events[0].provider == "openai"
    assert types_of(events).count("model_started") == 1
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["Let me look."]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert {d.phase for d in deltas} == {"start", "delta", "end"}
    assert [d.index for d in deltas if d.phase == "start"] == [0, 1]
    assert sum(1 for d in deltas if d.phase == "delta" and d.index == 0) == 4
    rebuilt = "".join(d.arguments_delta for d in deltas if d.index == 1)
    assert json.loads(rebuilt) == args_b

    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert [(c.tool_call_id, c.name, c.arguments) for c in done.tool_calls] == [
        ("call_list_1", "code.list_dir", args_a),
        ("call_read_2", "code.read_file", args_b),
    ]
    assert done.tool_calls[0].metadata["provider_tool_name"] == "code__list_dir"
    assert done.tool_calls[0].metadata["provider_tool_call_id"] == "call_list_1"
    assert done.content[0] == TextBlock(text="Let me look.")
    assert [b.type for b in done.content] == ["text", "tool_call", "tool_call"]
    assert done.stop_reason.model_dump() == {"reason": "tool_use", "raw_stop_reason": "tool_calls"}
    assert done.usage.model_dump(include={"input_tokens", "output_tokens", "total_tokens"}) == {
        "input_tokens": 31,
        "output_tokens": 12,
        "total_tokens": 43,
    }
    assert done.usage.raw_usage["prompt_tokens"] == 31
    meta = done.metadata
    assert meta["provider"] == "openai" and meta["model"] == "test-model"
    assert meta["request_id"] == "req_scripted_1" and meta["response_id"] == "chatcmpl-scripted"
    assert meta["latency_ms"] >= 0 and meta["time_to_first_token_ms"] >= 0
    assert meta["retry"] == {"attempts": 1, "max_attempts": 3, "retries": [], "last_error": None}

    (sent,) = scripted_openai.requests
    assert sent.path == "/v1/chat/completions" and sent.method == "POST"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.headers["accept"] == "text/event-stream"
    body = sent.json
    assert body["stream"] is True and body["model"] == "test-model"
    assert body["messages"][0] == {"role": "system", "content": "core rules\n\nproject rules"}
    assert [t["function"]["parameters"] for t in body["tools"]] == [t.input_schema for t in TOOLS]
    assert KEY not in sent.body.decode()


async def test_openai_follow_up_request_carries_tool_results(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    """Case C3."""
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("Done.")))
    request = make_request(
        tools=TOOLS,
        messages=[
            user("list files"),
            assistant(
                call_block("call_a", "code.list_dir", {"path": "."}),
                call_block("call_b", "code.read_file", {"path": "x"}),
            ),
            tool_message(result_block("call_b", "file body")),
            tool_message(result_block("call_a", "a.txt\nb.txt")),
        ],
    )
    events = await collect(adapter, request)
    assert isinstance(events[-1], ModelCompleted)
    assert events[-1].content == [TextBlock(text="Done.")] and events[-1].tool_calls == []
    messages = scripted_openai.requests[0].json["messages"]
    assert messages[2]["role"] == "assistant" and messages[2]["content"] is None
    assert [c["id"] for c in messages[2]["tool_calls"]] == ["call_a", "call_b"]
    assert [c["function"]["name"] for c in messages[2]["tool_calls"]] == ["code__list_dir", "code__read_file"]
    assert messages[3:] == [
        {"role": "tool", "tool_call_id": "call_a", "content": "a.txt\nb.txt"},
        {"role": "tool", "tool_call_id": "call_b", "content": "file body"},
    ]
    await adapter.close()


@pytest.mark.parametrize(
    ("finish", "reason"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "content_filter")],
)
async def test_openai_text_stream_stop_reasons(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter, finish: str, reason: str
) -> None:
    """Case C3."""
    scripted_openai.enqueue(
        stream(OpenAIWire.text_stream("Hel", "lo", " world", finish_reason=finish), delay_s=0.01)
    )
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_started", *["model_text_delta"] * 3, "model_completed"]
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert done.content == [TextBlock(text="Hello world")]
    assert done.stop_reason.model_dump() == {"reason": reason, "raw_stop_reason": finish}


async def test_openai_usage_over_http(scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter) -> None:
    frames = [
        OpenAIWire.text("hi"),
        OpenAIWire.finish("stop"),
        OpenAIWire.usage(10, 5, 15, cached=3),
        OpenAIWire.DONE,
    ]
    scripted_openai.enqueue(stream(frames))
    events = await collect(adapter, make_request())
    await adapter.close()
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert done.usage.model_dump() == {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
        "cache_read_tokens": 3,
        "cache_write_tokens": None,
        "reasoning_tokens": None,
        "raw_usage": {
            "prompt_tokens": 10,
            "completion_tokens": 5,
            "total_tokens": 15,
            "prompt_tokens_details": {"cached_tokens": 3},
        },
    }


async def test_openai_debug_events_only_when_requested(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("a")), stream(OpenAIWire.text_stream("b")))
    quiet = await collect(adapter, make_request())
    assert not any(isinstance(e, ProviderDebug) for e in quiet)
    loud = await collect(adapter, make_request(debug=True))
    await adapter.close()
    debug = [e for e in loud if isinstance(e, ProviderDebug)]
    assert [d.kind for d in debug] == ["raw_request", "raw_response"]
    assert types_of(loud)[0] == "model_started" and types_of(loud)[-1] == "model_completed"
    assert debug[0].data["body"]["messages"][-1] == {"role": "user", "content": "hello"}
    assert debug[1].data["chunks"][1]["choices"][0]["delta"] == {"content": "b"}
    assert KEY not in json.dumps([e.model_dump() for e in loud])


async def test_openai_http_400_tools_unsupported_maps_to_capability(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    body = {"error": {"message": "This model does not support tools", "type": "invalid_request_error"}}
    scripted_openai.enqueue(error(400, body), error(400, {"error": {"message": "bad temperature"}}))
    events = await collect(adapter, make_request(tools=TOOLS))
    failed = events[-1]
    assert isinstance(failed, ModelFailed)
    assert (failed.error.type, failed.error.code) == ("unsupported_capability", "unsupported_capability")
    assert (failed.error.capability, failed.error.request_feature, failed.error.status_code) == (
        "tools",
        "tools",
        400,
    )
    events = await collect(adapter, make_request(tools=TOOLS))
    assert isinstance(events[-1], ModelFailed) and events[-1].error.type == "invalid_request"
    assert len(scripted_openai.requests) == 2  # neither was retried
    await adapter.close()


async def test_openai_malformed_stream_is_protocol_failure(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    scripted_openai.enqueue(stream([OpenAIWire.text("ok"), "data: {not json\n\n", OpenAIWire.DONE]))
    events = await collect(adapter, make_request())
    failed = events[-1]
    assert isinstance(failed, ModelFailed)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "protocol",
        "provider_error",
        False,
    )
    assert len(scripted_openai.requests) == 1
    await adapter.close()


async def test_openai_stream_without_done_or_finish_is_protocol_failure(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    scripted_openai.enqueue(stream([OpenAIWire.text("cut")]))
    events = await collect(adapter, make_request())
    assert types_of(events) == ["model_started", "model_text_delta", "model_failed"]
    failed = events[-1]
    assert isinstance(failed, ModelFailed) and failed.error.type == "protocol"
    assert failed.metadata["retry"]["attempts"] == 1
    await adapter.close()


async def test_openai_in_stream_error_chunk_after_text(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter
) -> None:
    scripted_openai.enqueue(stream([OpenAIWire.text("partial"), OpenAIWire.error("upstream exploded")]))
    events = await collect(adapter, make_request())
    failed = events[-1]
    assert isinstance(failed, ModelFailed)
    assert failed.error.type == "server" and "upstream exploded" in failed.error.message
    assert len(scripted_openai.requests) == 1  # a delta was yielded: never retried
    await adapter.close()


async def test_openai_finished_responses_are_freed_without_the_cyclic_collector(
    scripted_openai: ScriptedOpenAIServer, adapter: OpenAIAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A response (and through it the request body: the encoded history) is freed when its stream ends,
    not when the cyclic collector next runs: httpx's response and its bound stream refer to each other
    (issue 16 target 4: waiting bodies fragmented a long session's heap). Covers a retried error status."""
    import gc
    import weakref

    import httpx

    made: list[weakref.ref[httpx.Response]] = []
    init = httpx.Response.__init__

    def recording_init(self: httpx.Response, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(weakref.ref(self))

    monkeypatch.setattr(httpx.Response, "__init__", recording_init)
    scripted_openai.enqueue(error(500), stream(OpenAIWire.text_stream("hello")))
    gc.collect()
    gc.disable()
    try:
        events = await collect(adapter, make_request())
        assert isinstance(events[-1], ModelCompleted)
        assert len(made) == 2 and [r() for r in made] == [None, None]
    finally:
        gc.enable()
    await adapter.close()
