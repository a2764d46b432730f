"""The ``ollama`` adapter over real HTTP against the scripted Ollama server (C2b/C2c, C5, C6 adapter
halves)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.providers._ollama import OllamaAdapter
from agent_core.types.content import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.model import ModelCompleted, ModelFailed, ModelStarted, ModelTextDelta, ToolCallDelta
from tests.fixtures.provider_requests import (
    SleepRecorder,
    assistant,
    collect,
    make_request,
    model_config,
    tool,
    tool_message,
    types_of,
    user,
)
from tests.fixtures.scripted_servers import (
    OllamaWire,
    Response,
    ScriptedOllamaServer,
    ScriptedRequest,
    advertised_tool_name,
    error,
    json_reply,
    stream,
)

TOOLS = [tool("code.list_dir"), tool("code.read_file")]


def make_adapter(server: ScriptedOllamaServer, **kwargs: Any) -> tuple[OllamaAdapter, SleepRecorder]:
    sleep = SleepRecorder()
    return OllamaAdapter(model_config("ollama", server.base_url, **kwargs), sleep=sleep), sleep


async def test_ollama_text_streaming(scripted_ollama: ScriptedOllamaServer) -> None:
    """Case C5."""
    adapter, _ = make_adapter(scripted_ollama, name="gemma-test")
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("The ", "answer ", "is 42."), delay_s=0.01))
    events = await collect(adapter, make_request(model="gemma-test", temperature=0.0))
    await adapter.close()
    started = events[0]
    assert (
        isinstance(started, ModelStarted) and started.provider == "ollama" and started.model == "gemma-test"
    )
    texts = [e.text for e in events if isinstance(e, ModelTextDelta)]
    assert len(texts) == 3 and "".join(texts) == "The answer is 42."
    done = events[-1]
    assert isinstance(done, ModelCompleted)
    assert done.content == [TextBlock(text="The answer is 42.")]
    assert done.metadata["provider"] == "ollama" and done.stop_reason.reason == "end_turn"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.total_tokens) == (10, 5, 15)
    assert done.usage.raw_usage["eval_duration"] == 200
    (sent,) = scripted_ollama.requests  # no tools: no /api/show pre-flight
    assert sent.path == "/api/chat" and sent.json["stream"] is True and sent.json["model"] == "gemma-test"
    assert sent.json["options"] == {"temperature": 0.0, "num_predict": 1024, "num_ctx": 8192}
    assert "tools" not in sent.json and "authorization" not in sent.headers


async def test_ollama_tool_call_round_trip_adapter(scripted_ollama: ScriptedOllamaServer) -> None:
    """Case C6."""
    adapter, _ = make_adapter(scripted_ollama)

    def respond(req: ScriptedRequest) -> Response:
        body = req.json or {}
        if body["messages"][-1]["role"] == "tool":
            return stream(OllamaWire.text_stream("There are 2 entries."))
        name = advertised_tool_name(req, "list_dir")
        return stream([OllamaWire.tool_calls([(name, {"path": "."})]), OllamaWire.done("stop", 20, 8)])

    scripted_ollama.handler(respond)
    first = await collect(adapter, make_request("what is here?", tools=TOOLS))
    starts = [e for e in first if isinstance(e, ToolCallDelta) and e.phase == "start"]
    assert starts and starts[0].name == "code.list_dir"
    done = first[-1]
    assert isinstance(done, ModelCompleted)
    (call,) = done.tool_calls
    assert call.name == "code.list_dir" and call.arguments == {"path": "."}
    assert call.tool_call_id.startswith("call_") and starts[0].tool_call_id == call.tool_call_id
    assert "provider_tool_call_id" not in call.metadata
    assert done.stop_reason.model_dump() == {"reason": "tool_use", "raw_stop_reason": "stop"}

    history = [
        user("what is here?"),
        assistant(*[b for b in done.content if isinstance(b, ToolCallBlock)]),
        tool_message(
            ToolResultBlock(tool_call_id=call.tool_call_id, content=[TextBlock(text="README.md\nsrc/")])
        ),
    ]
    second = await collect(adapter, make_request(tools=TOOLS, messages=history))
    await adapter.close()
    final = second[-1]
    assert isinstance(final, ModelCompleted) and final.content == [TextBlock(text="There are 2 entries.")]
    chat = scripted_ollama.requests_to("/api/chat")
    assert len(chat) == 2
    assert len(scripted_ollama.requests_to("/api/show")) == 1  # capabilities are cached per model
    sent = chat[1].json["messages"]
    assert sent[-2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "code__list_dir", "arguments": {"path": "."}}}],
    }
    assert sent[-1] == {"role": "tool", "content": "README.md\nsrc/", "tool_name": "code__list_dir"}


@pytest.mark.parametrize("capabilities", [["completion"], None], ids=["no-tools", "no-capabilities-field"])
async def test_ollama_tools_unsupported_preflight(capabilities: list[str] | None) -> None:
    """Case C2."""
    with ScriptedOllamaServer(capabilities=capabilities) as server:
        adapter, _ = make_adapter(server)
        events = await collect(adapter, make_request(tools=TOOLS))
        await adapter.close()
        server.verify()
    assert types_of(events) == ["model_failed"]  # pre-flight rejection: no model_started
    failed = events[0]
    assert isinstance(failed, ModelFailed)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "unsupported_capability",
        "unsupported_capability",
        False,
    )
    assert (failed.error.provider, failed.error.model) == ("ollama", "test-model")
    assert (failed.error.capability, failed.error.request_feature) == ("tools", "tools")
    assert [(r.method, r.path) for r in server.requests] == [("POST", "/api/show")]


async def test_ollama_plain_text_when_tool_set_empty() -> None:
    """Case C2."""
    with ScriptedOllamaServer(capabilities=["completion"]) as server:
        server.enqueue(stream(OllamaWire.text_stream("plain")))
        adapter, _ = make_adapter(server)
        events = await collect(adapter, make_request(tools=[]))
        await adapter.close()
        server.verify()
    assert isinstance(events[-1], ModelCompleted) and events[-1].content == [TextBlock(text="plain")]
    assert [r.path for r in server.requests] == ["/api/chat"]


async def test_ollama_chat_400_does_not_support_tools(scripted_ollama: ScriptedOllamaServer) -> None:
    adapter, _ = make_adapter(scripted_ollama)
    scripted_ollama.enqueue(error(400, {"error": '"test-model" does not support tools'}))
    events = await collect(adapter, make_request(tools=TOOLS))
    await adapter.close()
    failed = events[-1]
    assert isinstance(failed, ModelFailed)
    assert failed.error.type == "unsupported_capability" and failed.error.capability == "tools"
    assert failed.error.status_code == 400
    assert len(scripted_ollama.requests_to("/api/chat")) == 1


async def test_ollama_show_failure_is_classified_and_retried(scripted_ollama: ScriptedOllamaServer) -> None:
    adapter, sleep = make_adapter(scripted_ollama, initial_backoff_ms=10)
    scripted_ollama.show_queue.extend(
        [error(503, {"error": "loading"}), json_reply({"capabilities": ["tools"]})]
    )
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("ok")))
    events = await collect(adapter, make_request(tools=TOOLS))
    assert isinstance(events[-1], ModelCompleted)
    assert sleep.jittered_under([10])
    scripted_ollama.show_queue.append(error(404, {"error": "model 'other' not found"}))
    events = await collect(adapter, make_request(tools=TOOLS, model="other"))
    await adapter.close()
    assert types_of(events) == ["model_failed"]
    failed = events[0]
    assert isinstance(failed, ModelFailed)
    assert failed.error.type == "invalid_request" and "not found" in failed.error.message
    assert failed.metadata["retry"]["attempts"] == 1
    assert [r.path for r in scripted_ollama.requests] == ["/api/show", "/api/show", "/api/chat", "/api/show"]


async def test_unknown_ollama_option_rejected_before_sending(
    scripted_ollama: ScriptedOllamaServer,
) -> None:
    adapter, _ = make_adapter(scripted_ollama)
    bad = make_request(tools=TOOLS, provider_options={"ollama": {"options": {"seed": 1}, "mystery": True}})
    events = await collect(adapter, bad)
    assert types_of(events) == ["model_failed"]
    failed = events[0]
    assert isinstance(failed, ModelFailed)
    assert (failed.error.type, failed.error.code) == (
        "config",
        "config_error",
    ) and "mystery" in failed.error.message
    assert scripted_ollama.requests == []
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("ok")))
    other_namespaces = make_request(
        provider_options={"openai": {"whatever": 1}, "ollama": {"keep_alive": "1m"}}
    )
    events = await collect(adapter, other_namespaces)
    await adapter.close()
    assert isinstance(events[-1], ModelCompleted)
    assert scripted_ollama.requests[-1].json["keep_alive"] == "1m"
