"""The ``anthropic`` adapter over real HTTP against the scripted Messages server (C4 adapter half)."""

from __future__ import annotations

import pytest

from agent_core.providers._anthropic import AnthropicAdapter
from agent_core.types.content import ReasoningBlock, TextBlock
from agent_core.types.model import (
    ModelCompleted,
    ModelFailed,
    ModelReasoningDelta,
    ModelTextDelta,
    ToolCallDelta,
)
from tests.fixtures.provider_requests import (
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
    AnthropicWire,
    Response,
    ScriptedAnthropicServer,
    ScriptedRequest,
    advertised_tool_name,
    stream,
)

KEY = "sk-ant-test-abcdef0123456789"


@pytest.fixture
def adapter(scripted_anthropic: ScriptedAnthropicServer, monkeypatch: pytest.MonkeyPatch) -> AnthropicAdapter:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    config = model_config("anthropic", scripted_anthropic.base_url, api_key_env="SOONG_TEST_API_KEY")
    return AnthropicAdapter(config, sleep=SleepRecorder())


async def test_anthropic_text_and_tool_use_stream(
    scripted_anthropic: ScriptedAnthropicServer, adapter: AnthropicAdapter
) -> None:
    """Case C4."""
    arguments = {"path": "src", "recursive": False}

    def respond(req: ScriptedRequest) -> Response:
        name = advertised_tool_name(req, "list_dir")
        frames = AnthropicWire.tool_stream(
            [("toolu_01A", name, arguments)], text="Looking.", fragments=5, cache_read=7, cache_write=2
        )
        return stream(frames)

    scripted_anthropic.handler(respond)
    request = make_request("list src", tools=[tool("code.list_dir")], system=system_blocks("core", "project"))
    events = await collect(adapter, request)
    await adapter.close()

    assert types_of(events)[0] == "model_started" and types_of(events).count("model_started") == 1
    assert [e.text for e in events if isinstance(e, ModelTextDelta)] == ["Looking."]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert [d.phase for d in deltas] == ["start", *["delta"] * 5, "end"]
    assert deltas[0].name == "code.list_dir" and deltas[0].tool_call_id == "toolu_01A"
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    (call,) = done.tool_calls
    assert (call.tool_call_id, call.name, call.arguments) == ("toolu_01A", "code.list_dir", arguments)
    assert done.content[0] == TextBlock(text="Looking.")
    assert done.stop_reason.model_dump() == {"reason": "tool_use", "raw_stop_reason": "tool_use"}
    # input_tokens counts the whole prompt: Anthropic's uncached 10 plus the 7 read and 2 written
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (19, 7, 26)
    assert (done.usage.cache_read_tokens, done.usage.cache_write_tokens) == (7, 2)
    assert done.usage.uncached_input_tokens == 10
    assert done.metadata["request_id"] == "req_scripted_1" and done.metadata["response_id"] == "msg_scripted"

    (sent,) = scripted_anthropic.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = sent.json
    # prompt caching is on by default: breakpoints end the tools, the system prompt and the last message
    ephemeral = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "core"},
        {"type": "text", "text": "project", "cache_control": ephemeral},
    ]
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert body["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["tools"][0]["input_schema"] == request.tools[0].input_schema
    assert body["stream"] is True and body["max_tokens"] == 1024


async def test_anthropic_tool_result_goes_back_in_user_message(
    scripted_anthropic: ScriptedAnthropicServer, adapter: AnthropicAdapter
) -> None:
    """Case C4."""
    scripted_anthropic.enqueue(stream(AnthropicWire.text_stream("src has 2 files")))
    request = make_request(
        tools=[tool("code.list_dir")],
        messages=[
            user("list src"),
            assistant(TextBlock(text="Looking."), call_block("toolu_01A", "code.list_dir", {"path": "src"})),
            tool_message(result_block("toolu_01A", "a.py\nb.py")),
        ],
    )
    events = await collect(adapter, request)
    await adapter.close()
    assert isinstance(events[-1], ModelCompleted) and events[-1].stop_reason.reason == "end_turn"
    messages = scripted_anthropic.requests[0].json["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_01A", "name": "code__list_dir", "input": {"path": "src"}},
        ],
    }
    result = {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "a.py\nb.py", "is_error": False}
    # the last block carries the rolling cache breakpoint
    assert messages[2] == {"role": "user", "content": [{**result, "cache_control": {"type": "ephemeral"}}]}


async def test_anthropic_thinking_block_kept_with_its_signature(
    scripted_anthropic: ScriptedAnthropicServer, adapter: AnthropicAdapter
) -> None:
    frames = [
        AnthropicWire.message_start(),
        AnthropicWire.thinking_start(0),
        AnthropicWire.thinking_delta(0, "a plan"),
        AnthropicWire.signature_delta(0, "sig-1"),
        AnthropicWire.block_stop(0),
        AnthropicWire.redacted_thinking(1, "opaque"),
        AnthropicWire.block_stop(1),
        AnthropicWire.text_start(2),
        AnthropicWire.text_delta(2, "Answer"),
        AnthropicWire.block_stop(2),
        AnthropicWire.message_delta("max_tokens", 3),
        AnthropicWire.message_stop(),
    ]
    scripted_anthropic.enqueue(stream(frames))
    events = await collect(adapter, make_request())
    await adapter.close()
    assert [e.text for e in events if isinstance(e, ModelReasoningDelta)] == ["a plan"]
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert done.content == [
        ReasoningBlock(text="a plan", signature="sig-1", provider="anthropic"),
        ReasoningBlock(text="", signature="opaque", provider="anthropic", redacted=True),
        TextBlock(text="Answer"),
    ]
    assert done.stop_reason.model_dump() == {"reason": "max_tokens", "raw_stop_reason": "max_tokens"}


async def test_anthropic_error_event_after_text(
    scripted_anthropic: ScriptedAnthropicServer, adapter: AnthropicAdapter
) -> None:
    """Case C8."""
    frames = [AnthropicWire.message_start(), AnthropicWire.text_start(0), AnthropicWire.text_delta(0, "part")]
    scripted_anthropic.enqueue(stream([*frames, AnthropicWire.error("overloaded_error", "Overloaded")]))
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_started", "model_text_delta", "model_failed"]
    failed = events[-1]
    assert isinstance(failed, ModelFailed)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "server",
        "provider_error",
        True,
    )
    assert failed.error.provider == "anthropic" and failed.error.model == "test-model"
    assert failed.usage is not None and failed.usage.input_tokens == 10
    assert len(scripted_anthropic.requests) == 1  # text was yielded: no retry


async def test_anthropic_error_event_before_output_is_retried(
    scripted_anthropic: ScriptedAnthropicServer, adapter: AnthropicAdapter
) -> None:
    scripted_anthropic.enqueue(
        stream([AnthropicWire.message_start(), AnthropicWire.error("overloaded_error", "Overloaded")]),
        stream(AnthropicWire.text_stream("fine")),
    )
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_started", "model_text_delta", "model_completed"]
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert done.metadata["retry"]["attempts"] == 2
    assert done.metadata["retry"]["retries"][0]["error_type"] == "server"
    assert done.metadata["retry"]["last_error"]["message"].startswith(
        "anthropic stream error (overloaded_error)"
    )
