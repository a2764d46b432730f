"""Prompt caching on the wire (issue 33): Anthropic breakpoints, the OpenAI cache key, the cost split on
all three providers — the real adapters in a runtime against the scripted servers, Anthropic's and
OpenAI's with the kit's prompt-cache emulation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from agent_core import RunStatus
from agent_core.config.model import ResolvedModelConfig, RetryConfig
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.testing import AnthropicPromptCache, OpenAIPromptCache
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.multi_agent import child_json
from tests.fixtures.orchestrator import events
from tests.fixtures.runtime import collect, open_runtime
from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    ScriptedRequest,
    advertised_tool_name,
    stream,
)

KEY_ENV = "SOONG_TEST_API_KEY"
FILE = re.compile(r"notes/n\d+\.txt")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-prompt-cache-0123456789")


@pytest.fixture
def notes(soong_env: SoongEnv) -> SoongEnv:
    for k in range(4):
        soong_env.write_project(f"notes/n{k}.txt", f"note {k}\n" + "lorem ipsum dolor sit amet\n" * 20)
    return soong_env


def blocks_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] for b in m["content"]]


def marked(body: dict[str, Any]) -> list[str]:
    """Where the request's cache_control breakpoints are."""
    out = [f"tool:{t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    out += [f"system:{i}" for i, b in enumerate(body.get("system", [])) if "cache_control" in b]
    out += [f"block:{i}" for i, b in enumerate(blocks_of(body)) if "cache_control" in b]
    return out


def anthropic_turns(request: ScriptedRequest) -> Response:
    """Reads the file the user names (``parallel`` in the message: six reads at once), then answers."""
    last = request.json["messages"][-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return stream(AnthropicWire.text_stream("Read it."))
    said = " ".join(b.get("text", "") for b in last if b.get("type") == "text")
    name = advertised_tool_name(request, "read_file")
    count = 12 if "parallel" in said else 1
    n = len(request.json["messages"])
    calls = [(f"toolu_{n}_{i}", name, {"path": f"notes/n{i % 4}.txt"}) for i in range(count)]
    if count == 1:
        calls = [(f"toolu_{n}", name, {"path": FILE.search(said).group(0)})]  # type: ignore[union-attr]
    return stream(AnthropicWire.tool_stream(calls))


@pytest.fixture
def anthropic_cached() -> Iterator[ScriptedAnthropicServer]:
    server = ScriptedAnthropicServer(prompt_cache=AnthropicPromptCache())
    server.handler(anthropic_turns)
    server.start()
    try:
        yield server
    finally:
        server.stop()
    server.verify()


async def run_turns(env: SoongEnv, model: dict[str, Any], messages: list[str]) -> list[Any]:
    runs = []
    session_id: str | None = None
    async with open_runtime(env, config={"model": {"context_window": 200_000, **model}}) as rt:
        for message in messages:
            run = await rt.start(message, session_id=session_id)
            await collect(run)
            assert run.status == RunStatus.completed, run.error
            session_id = run.session_id
            runs.append(run)
    return runs


def completed_usage(env: SoongEnv, run: Any) -> dict[str, Any]:
    (event,) = [e for e in events(env, run.session_id, "run_completed") if e["run_id"] == run.run_id]
    usage: dict[str, Any] = event["payload"]["usage"]
    return usage


async def test_anthropic_breakpoints_make_every_request_read_the_previous_one(
    notes: SoongEnv, anthropic_cached: ScriptedAnthropicServer
) -> None:
    model = {
        "provider": "anthropic",
        "base_url": anthropic_cached.base_url,
        "api_key_env": KEY_ENV,
        "price_input_per_mtok": 3.0,
        "price_output_per_mtok": 15.0,
    }
    runs = await run_turns(notes, model, ["read notes/n0.txt", "read notes/n1.txt", "read them in parallel"])
    sent = anthropic_cached.requests
    assert len(sent) == 6
    previous_blocks = 0
    for index, request in enumerate(sent):
        body = request.json
        last_tool = f"tool:{body['tools'][-1]['name']}"
        last_system = f"system:{len(body['system']) - 1}"
        last_block = f"block:{len(blocks_of(body)) - 1}"
        expected = [last_tool, last_system, last_block]
        if index:  # the previous request's last block: the bridge for a long tool round
            expected.insert(2, f"block:{previous_blocks - 1}")
        assert marked(body) == expected, index
        assert all(
            b["cache_control"] == {"type": "ephemeral"}
            for b in [*body["tools"], *body["system"], *blocks_of(body)]
            if "cache_control" in b
        )
        previous_blocks = len(blocks_of(body))
    # each request reads the whole previous request from the cache, including after 12 parallel calls
    whole = [sum(r.cache_usage.values()) for r in sent]  # type: ignore[union-attr]
    for index in range(1, len(sent)):
        usage = sent[index].cache_usage
        assert usage is not None and usage["cache_read_input_tokens"] == whole[index - 1], index
    assert len(blocks_of(sent[-1].json)) - len(blocks_of(sent[-2].json)) > 20  # beyond the lookback
    # the run's usage splits the input and prices each part: 0.1x reads, 1.25x writes (5m entries)
    usage = completed_usage(notes, runs[-1])
    read, write = usage["cache_read_tokens"], usage["cache_write_tokens"]
    assert read == sum(r.cache_usage["cache_read_input_tokens"] for r in sent[4:])  # type: ignore[index]
    assert usage["input_tokens"] == usage["uncached_input_tokens"] + read + write
    expected_cost = (
        usage["uncached_input_tokens"] * 3 + read * 0.3 + write * 3.75 + usage["output_tokens"] * 15
    )
    assert usage["cost_usd"] == pytest.approx(expected_cost / 1e6, abs=1e-9)
    assert events(notes, runs[-1].session_id, "prompt_cache_break") == []


async def test_anthropic_one_hour_entries_and_caching_off(
    notes: SoongEnv, anthropic_cached: ScriptedAnthropicServer
) -> None:
    base = {"provider": "anthropic", "base_url": anthropic_cached.base_url, "api_key_env": KEY_ENV}
    await run_turns(notes, {**base, "prompt_cache_ttl": "1h"}, ["read notes/n0.txt"])
    first = anthropic_cached.requests[0]
    assert first.headers["anthropic-beta"] == "extended-cache-ttl-2025-04-11"
    assert first.json["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    await run_turns(notes, {**base, "prompt_cache": "off"}, ["read notes/n1.txt"])
    for request in anthropic_cached.requests[2:]:
        assert marked(request.json) == [] and "anthropic-beta" not in request.headers
        assert request.cache_usage is not None and request.cache_usage["cache_read_input_tokens"] == 0


def is_child(body: dict[str, Any]) -> bool:
    return any(m["role"] == "user" and "<delegated_task>" in str(m.get("content")) for m in body["messages"])


def openai_turns(request: ScriptedRequest) -> Response:
    body = request.json
    messages = body["messages"]
    last = messages[-1]
    delegated = is_child(body)
    if last["role"] == "tool":
        reply = child_json("child read it") if delegated else "Read it."
        return stream(OpenAIWire.text_stream(reply))
    text = str(last.get("content"))
    if text.startswith("delegate"):
        name = advertised_tool_name(request, "create_sub_agent")
        return stream(OpenAIWire.tool_stream([("call_sub", name, {"task": "read notes/n3.txt"})]))
    path = FILE.search(text)
    name = advertised_tool_name(request, "read_file")
    call = (f"call_{len(messages)}", name, {"path": path.group(0) if path else "notes/n0.txt"})
    return stream(OpenAIWire.tool_stream([call]))


async def test_openai_cache_key_per_agent_and_the_cost_of_cached_input(notes: SoongEnv) -> None:
    server = ScriptedOpenAIServer(prompt_cache=OpenAIPromptCache())
    server.handler(openai_turns)
    with server:
        model = {
            "provider": "openai",
            "base_url": server.base_url,
            "api_key_env": KEY_ENV,
            "price_input_per_mtok": 2.0,
            "price_cache_read_per_mtok": 0.5,
            "price_output_per_mtok": 8.0,
        }
        runs = await run_turns(notes, model, ["read notes/n0.txt", "read notes/n1.txt", "delegate it"])
        sent = [r.json for r in server.requests]
        main = [b for b in sent if not is_child(b)]
        child = [b for b in sent if b not in main]
        keys = {b["prompt_cache_key"] for b in main}
        assert len(keys) == 1 and len(next(iter(keys))) <= 64
        # the sub-agent starts with its parent's tools and system prompt: routed with its parent's key
        assert child and {b["prompt_cache_key"] for b in child} == keys
        assert all(b["cache_prompt"] is True for b in sent)  # a server on this machine (llama.cpp's field)
        cached = [r.cache_usage["cached_tokens"] for r in server.requests]  # type: ignore[index]
        assert cached[0] == 0 and all(c >= 1024 for c in cached[1:4])
        usage = completed_usage(notes, runs[1])
        assert usage["cache_read_tokens"] == sum(cached[2:4]) and usage["cache_write_tokens"] is None
        assert usage["uncached_input_tokens"] == usage["input_tokens"] - usage["cache_read_tokens"]
        expected = usage["uncached_input_tokens"] * 2 + usage["cache_read_tokens"] * 0.5
        expected += usage["output_tokens"] * 8
        assert usage["cost_usd"] == pytest.approx(expected / 1e6, abs=1e-9)
        # a server that rejects unknown fields: neither field is sent
        await run_turns(notes, {**model, "openai_cache_fields": False}, ["read notes/n2.txt"])
        for request in server.requests[-2:]:
            assert "prompt_cache_key" not in request.json and "cache_prompt" not in request.json


def test_openai_sends_no_llama_cpp_field_to_openai_itself() -> None:
    def config(base_url: str, **extra: Any) -> ResolvedModelConfig:
        return ResolvedModelConfig(
            provider="openai",
            base_url=base_url,
            api_key_env="",
            name="m",
            context_window=8192,
            max_output_tokens=256,
            temperature=None,
            timeout_ms=1000,
            retry=RetryConfig(),
            **extra,
        )

    request = ModelRequest(model="m", messages=[], metadata={"prompt_cache_key": "soong-abc"})
    fields = OpenAIAdapter(config("https://api.openai.com/v1"))._cache_fields(request)
    assert fields == [("prompt_cache_key", "soong-abc")]
    assert ("cache_prompt", True) in OpenAIAdapter(config("http://192.168.1.20:8080/v1"))._cache_fields(
        request
    )
    assert OpenAIAdapter(config("http://localhost:8080/v1", prompt_cache="off"))._cache_fields(request) == []


async def test_ollama_reports_its_own_prefix_reuse_and_the_cost_splits(soong_env: SoongEnv) -> None:
    server = ScriptedOllamaServer()
    done = json.loads(OllamaWire.done("stop", 1200, 9))
    done["prompt_eval_cached_count"] = 1100  # the part Ollama kept from its previous prompt
    server.enqueue(stream([OllamaWire.content("ok"), json.dumps(done) + "\n"]))
    with server:
        model = {
            "provider": "ollama",
            "base_url": server.base_url,
            "price_input_per_mtok": 1.0,
            "price_cache_read_per_mtok": 0.25,
            "price_output_per_mtok": 2.0,
        }
        (run,) = await run_turns(soong_env, model, ["hi"])
    usage = completed_usage(soong_env, run)
    assert (usage["input_tokens"], usage["uncached_input_tokens"], usage["cache_read_tokens"]) == (
        1200,
        100,
        1100,
    )
    assert usage["cost_usd"] == pytest.approx((100 * 1.0 + 1100 * 0.25 + 9 * 2.0) / 1e6, abs=1e-12)


def delegated(body: dict[str, Any]) -> bool:
    """A child's request: a user message holds its ``<delegated_task>``."""
    texts = [b.get("text", "") for m in body["messages"] if m["role"] == "user" for b in m["content"]]
    return any(t.startswith("<delegated_task>") for t in texts)


def fork_turns(request: ScriptedRequest) -> Response:
    """``fork``: the main agent forks (``narrow``: with allowed_tools); the fork answers at once."""
    messages = request.json["messages"]
    if delegated(request.json):
        return stream(AnthropicWire.text_stream(child_json("fork looked")))
    last = messages[-1]["content"]
    if any(b.get("type") == "tool_result" for b in last):
        return stream(AnthropicWire.text_stream("Forked."))
    said = " ".join(b.get("text", "") for b in last if b.get("type") == "text")
    if said.startswith("fork"):
        args: dict[str, Any] = {"task": "look at the notes"}
        if "narrow" in said:
            args["allowed_tools"] = ["code.read_file"]
        name = advertised_tool_name(request, "fork_agent")
        return stream(AnthropicWire.tool_stream([(f"toolu_{len(messages)}", name, args)]))
    return anthropic_turns(request)


async def test_a_fork_starts_with_its_parents_cached_prefix(notes: SoongEnv) -> None:
    server = ScriptedAnthropicServer(prompt_cache=AnthropicPromptCache())
    server.handler(fork_turns)
    with server:
        model = {"provider": "anthropic", "base_url": server.base_url, "api_key_env": KEY_ENV}
        await run_turns(notes, model, ["read notes/n0.txt", "fork please", "fork narrow please"])
    sent = server.requests
    forks = [i for i, r in enumerate(sent) if delegated(r.json)]
    assert len(forks) == 2, forks
    first, narrow = forks
    parent = sent[first - 1]  # the parent's request that asked for the fork
    fork = sent[first]
    assert fork.json["tools"] == parent.json["tools"] and fork.json["system"] == parent.json["system"]
    whole_parent = sum(parent.cache_usage.values())  # type: ignore[union-attr]
    assert fork.cache_usage is not None and fork.cache_usage["cache_read_input_tokens"] == whole_parent
    # a fork narrowed by allowed_tools is shown only its tools: its own prompt, nothing read beyond tools
    narrowed = sent[narrow]
    assert [t["name"] for t in narrowed.json["tools"]] == ["code__read_file"]
    assert narrowed.cache_usage is not None and narrowed.cache_usage["cache_read_input_tokens"] == 0
