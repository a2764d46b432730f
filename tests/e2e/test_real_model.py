"""Optional real-model checks of the built-in adapters against a local llama.cpp server
(docs/testing.md#markers).

llama-server serves both the OpenAI Chat Completions API (``/v1/chat/completions``) and the Anthropic
Messages API (``/v1/messages``), so one tiny GGUF model exercises two adapters end to end. Skipped with a
reason when ``llama-server`` or the model is not installed.
"""

from __future__ import annotations

import asyncio

import pytest

from agent_core.providers._anthropic import AnthropicAdapter
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.providers._streaming import HttpStreamAdapter
from agent_core.types.content import text_of
from agent_core.types.model import ModelCompleted, ModelStarted, ModelTextDelta
from tests.fixtures.llama_server import LlamaServer
from tests.fixtures.provider_requests import collect, make_request, model_config, system_blocks, tool

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]


def adapter_for(kind: str, server: LlamaServer) -> HttpStreamAdapter:
    if kind == "openai":
        config = model_config("openai", server.base_url, api_key_env="SOONG_TEST_API_KEY", name=server.model)
        return OpenAIAdapter(config)
    config = model_config("anthropic", server.root_url, api_key_env="SOONG_TEST_API_KEY", name=server.model)
    return AnthropicAdapter(config)


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", "sk-local-dummy-key")


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_real_model_streams_text(llama_server: LlamaServer, kind: str) -> None:
    adapter = adapter_for(kind, llama_server)
    request = make_request(
        "Say hello in one short sentence.",
        model=llama_server.model,
        system=system_blocks("You are a friendly assistant."),
        max_output_tokens=32,
        temperature=0.0,
    )
    events = await collect(adapter, request)
    await adapter.close()
    assert isinstance(events[0], ModelStarted) and events[0].provider == kind
    done = events[-1]
    assert isinstance(done, ModelCompleted), done
    deltas = [e.text for e in events if isinstance(e, ModelTextDelta)]
    assert deltas and "".join(deltas).strip()
    assert text_of(done.content) == "".join(deltas)
    assert done.usage.input_tokens > 0 and done.usage.output_tokens > 0
    assert done.stop_reason.reason in {"end_turn", "max_tokens"}
    assert done.metadata["retry"]["attempts"] == 1


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_real_model_accepts_tools(llama_server: LlamaServer, kind: str) -> None:
    """Best effort: the request with tools is accepted and completes (tool call or text), never crashes."""
    adapter = adapter_for(kind, llama_server)
    request = make_request(
        "List the files in the current directory using the tool.",
        model=llama_server.model,
        tools=[tool("code.list_dir", description="List the entries of a directory.")],
        max_output_tokens=64,
        temperature=0.0,
    )
    events = await collect(adapter, request)
    await adapter.close()
    done = events[-1]
    assert isinstance(done, ModelCompleted), done
    assert done.tool_calls or text_of(done.content).strip()
    for call in done.tool_calls:
        assert call.tool_call_id and isinstance(call.arguments, dict)
        if call.metadata["provider_tool_name"] == "code__list_dir":
            assert call.name == "code.list_dir"
    if done.tool_calls:
        assert done.stop_reason.reason == "tool_use"


async def test_real_model_cancel_mid_stream(llama_server: LlamaServer) -> None:
    adapter = adapter_for("openai", llama_server)
    request = make_request(
        "Count from 1 to 200, separated by spaces.", model=llama_server.model, max_output_tokens=400
    )
    seen: list[str] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for event in adapter.stream(request):
            if isinstance(event, ModelTextDelta):
                seen.append(event.text)
                first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 120)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    count = len(seen)
    await asyncio.sleep(0.2)
    assert len(seen) == count
    await adapter.close()
