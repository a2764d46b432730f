"""Reasoning and thinking on the wire (issue 34 items 1-3, 7): the real adapters in a runtime against the
scripted servers that enforce the vendors' rules — reasoning models refuse ``max_tokens`` and a
temperature, Anthropic checks thinking signatures and the tool-loop rule, the Responses API verifies its
encrypted reasoning — and what the runtime stores, streams and sends back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core import ReasoningBlock, RunStatus
from agent_core.testing import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ResponsesWire,
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    ScriptedRequest,
    ScriptedResponsesServer,
    advertised_tool_name,
    stream,
)
from agent_core.types.events import MessageCompleted, ReasoningDelta, RunCompleted
from tests.fixtures.env import SoongEnv
from tests.fixtures.orchestrator import events
from tests.fixtures.real_models import KEY_ENV, KEY_VALUE, bodies, finished, model_config, serving
from tests.fixtures.runtime import collect, open_runtime, rows


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)


@pytest.fixture
def notes(soong_env: SoongEnv) -> SoongEnv:
    for k in range(3):
        soong_env.write_project(f"notes/n{k}.txt", f"note {k}\n")
    return soong_env


def assistant_nodes(env: SoongEnv, session_id: str) -> list[list[dict[str, Any]]]:
    found = rows(
        env,
        f"SELECT content_json FROM nodes_{session_id} WHERE role = 'assistant' ORDER BY node_seq",
    )
    return [json.loads(r["content_json"]) for r in found]


# ---- which request fields a model accepts (OpenAI Chat Completions) --------------------------
async def test_openai_reasoning_model_gets_max_completion_tokens_and_effort_and_no_temperature(
    soong_env: SoongEnv,
) -> None:
    with serving(ScriptedOpenAIServer()) as server:  # "o4-mini": a reasoning model by its name
        server.enqueue(stream(OpenAIWire.text_stream("done")))
        model = model_config("openai", server, name="o4-mini", reasoning_effort="high", temperature=0.2)
        async with open_runtime(soong_env, config={"model": model}) as rt:
            await finished(await rt.start("hi"))
    (body,) = bodies(server)
    assert body["reasoning_effort"] == "high"
    assert "max_tokens" not in body and body["max_completion_tokens"] > 0
    assert "temperature" not in body
    assert server.rejections == []


async def test_openai_reasoning_model_refuses_the_2024_request_shape(soong_env: SoongEnv) -> None:
    """Without reasoning configured the adapter sends max_tokens and the temperature: the strict server
    answers as OpenAI does, and the run's error says which keys to set."""
    with serving(ScriptedOpenAIServer()) as server:
        model = model_config("openai", server, name="gpt-5-mini")
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(await rt.start("hi"), status=RunStatus.failed)
    ((_, status, body),) = server.rejections
    assert status == 400 and body["error"]["code"] == "unsupported_parameter"
    assert body["error"]["param"] == "max_tokens"
    assert run.error is not None and "max_completion_tokens" in run.error.message
    assert "reasoning_effort" in run.error.message


async def test_openai_token_field_and_default_temperature_without_reasoning(soong_env: SoongEnv) -> None:
    with serving(ScriptedOpenAIServer()) as server:
        server.enqueue(stream(OpenAIWire.text_stream("ok")))
        model = model_config(
            "openai", server, name="gpt-5", openai_token_field="max_completion_tokens", temperature="default"
        )
        async with open_runtime(soong_env, config={"model": model}) as rt:
            await finished(await rt.start("hi"))
    (body,) = bodies(server)
    assert "max_completion_tokens" in body and "max_tokens" not in body
    assert "temperature" not in body and "reasoning_effort" not in body


async def test_openai_compatible_reasoning_content_is_streamed_stored_and_sent_back(
    soong_env: SoongEnv,
) -> None:
    """A compatible server (DeepSeek, vLLM, llama.cpp) streams ``reasoning_content``: the runtime streams
    it as ``reasoning_delta``, stores a reasoning block, puts it in ``message_completed`` and sends it back
    to the same provider as ``reasoning_content``."""
    frames = [
        OpenAIWire.role(),
        OpenAIWire.reasoning("First, "),
        OpenAIWire.reasoning("think."),
        OpenAIWire.text("Answer."),
        OpenAIWire.finish("stop"),
        OpenAIWire.usage(),
        OpenAIWire.DONE,
    ]
    with serving(ScriptedOpenAIServer()) as server:
        server.enqueue(stream(frames), stream(OpenAIWire.text_stream("Again.")))
        async with open_runtime(soong_env, config={"model": model_config("openai", server)}) as rt:
            first = await rt.start("q1")
            seen = await collect(first)
            await first.wait()
            await finished(await rt.start("q2", session_id=first.session_id))
    deltas = [e.payload.text for e in seen if isinstance(e.payload, ReasoningDelta)]
    assert "".join(deltas) == "First, think."
    (completed,) = [e.payload for e in seen if isinstance(e.payload, MessageCompleted)]
    assert completed.reasoning == "First, think." and completed.text == "Answer."
    first_answer = assistant_nodes(soong_env, first.session_id)[0]
    assert first_answer[0] == ReasoningBlock(text="First, think.", provider="openai").model_dump()
    stored = events(soong_env, first.session_id)
    assert not [e for e in stored if e["event_type"] == "reasoning_delta"]  # live only, never stored
    second = bodies(server)[1]
    (previous,) = [m for m in second["messages"] if m["role"] == "assistant"]
    assert previous["reasoning_content"] == "First, think." and previous["content"] == "Answer."


# ---- Anthropic extended thinking ------------------------------------------------------------
def thinking_turns(request: ScriptedRequest) -> Response:
    """Reads notes/n0..n2 one per turn, each answer with a thinking block; then answers."""
    messages = request.json["messages"]
    done = sum(
        1 for m in messages for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"
    )
    signature = f"sig-{len(messages)}"
    if done >= 3:
        return stream(AnthropicWire.text_stream("All read.", thinking=(f"summing up {done}", signature)))
    name = advertised_tool_name(request, "read_file")
    call = (f"toolu_{len(messages)}", name, {"path": f"notes/n{done}.txt"})
    return stream(AnthropicWire.tool_stream([call], thinking=(f"next: note {done}", signature)))


async def test_anthropic_thinking_tool_loop_sends_signed_blocks_back_unchanged(notes: SoongEnv) -> None:
    """Case C13: thinking on, tool calls across three turns, every signed block sent back unchanged."""
    with serving(ScriptedAnthropicServer()) as server:
        server.handler(thinking_turns)
        model = model_config("anthropic", server, max_output_tokens=4096, thinking_budget_tokens=2048)
        async with open_runtime(notes, config={"model": model}) as rt:
            run = await finished(await rt.start("read the three notes"))
    sent = bodies(server)
    assert len(sent) == 4 and server.rejections == []
    for body in sent:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
        assert "temperature" not in body  # the baseline's 0.0 is not sent with thinking
    last = sent[-1]["messages"]
    thoughts = [b for m in last if m["role"] == "assistant" for b in m["content"] if b["type"] == "thinking"]
    assert [b["signature"] for b in thoughts] == ["sig-1", "sig-3", "sig-5"]
    assert all(m["content"][0]["type"] == "thinking" for m in last if m["role"] == "assistant")
    nodes = assistant_nodes(notes, run.session_id)
    assert nodes[0][0] == {
        "type": "reasoning",
        "text": "next: note 0",
        "signature": "sig-1",
        "provider": "anthropic",
        "redacted": False,
    }


async def test_anthropic_refuses_a_tool_loop_that_lost_its_thinking_block() -> None:
    """The kit enforces Anthropic's rule: the same request without the thinking block is refused with
    Anthropic's message, and a block whose text changed fails its signature."""
    import httpx

    with serving(ScriptedAnthropicServer()) as server:
        server.allow_unconsumed = True
        server.enqueue(
            stream(
                AnthropicWire.tool_stream(
                    [("toolu_1", "code__read_file", {"path": "a"})], thinking=("plan", "sig-a")
                )
            )
        )
        url = f"{server.base_url}/v1/messages"
        base = {"model": "m", "max_tokens": 4096, "thinking": {"type": "enabled", "budget_tokens": 2048}}
        user = {"role": "user", "content": [{"type": "text", "text": "go"}]}
        async with httpx.AsyncClient() as client:
            first = await client.post(url, json={**base, "messages": [user], "stream": True})
            assert first.status_code == 200
            call = {"type": "tool_use", "id": "toolu_1", "name": "code__read_file", "input": {"path": "a"}}
            result = {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
            }
            lost = await client.post(
                url, json={**base, "messages": [user, {"role": "assistant", "content": [call]}, result]}
            )
            changed = {"type": "thinking", "thinking": "plan!", "signature": "sig-a"}
            altered = await client.post(
                url,
                json={**base, "messages": [user, {"role": "assistant", "content": [changed, call]}, result]},
            )
    assert lost.status_code == 400
    assert "a final `assistant` message must start with a thinking block" in lost.json()["error"]["message"]
    assert altered.status_code == 400
    assert "Invalid `signature` in `thinking` block" in altered.json()["error"]["message"]


async def test_a_signed_block_holding_a_secret_is_dropped_and_thinking_is_off_for_that_loop(
    notes: SoongEnv,
) -> None:
    """Redaction would break the signature: the block is dropped, the node says why, and the tool loop's
    next request goes out with thinking off (Anthropic would refuse it with thinking on)."""

    def turns(request: ScriptedRequest) -> Response:
        messages = request.json["messages"]
        if any(b.get("type") == "tool_result" for b in messages[-1]["content"]):
            return stream(AnthropicWire.text_stream("Done."))
        name = advertised_tool_name(request, "read_file")
        thought = (f"the key is {KEY_VALUE}", "sig-secret")
        return stream(
            AnthropicWire.tool_stream([("toolu_1", name, {"path": "notes/n0.txt"})], thinking=thought)
        )

    with serving(ScriptedAnthropicServer()) as server:
        server.handler(turns)
        model = model_config("anthropic", server, max_output_tokens=4096, thinking_budget_tokens=2048)
        async with open_runtime(notes, config={"model": model}) as rt:
            run = await finished(await rt.start("read n0"))
    first_answer = rows(
        notes,
        f"SELECT content_json, metadata_json FROM nodes_{run.session_id} WHERE role = 'assistant' ORDER BY node_seq",
    )[0]
    assert "reasoning" not in first_answer["content_json"]
    assert KEY_VALUE not in first_answer["content_json"]
    dropped = json.loads(first_answer["metadata_json"])["reasoning_dropped"]
    assert dropped[0]["provider"] == "anthropic" and "signature" in dropped[0]["reason"]
    second = bodies(server)[1]
    assert "thinking" not in second and server.rejections == []
    assert second["temperature"] == 0.0  # thinking off: the configured temperature goes out again


async def test_reasoning_is_left_out_when_the_session_moves_to_another_model(notes: SoongEnv) -> None:
    with serving(ScriptedAnthropicServer()) as anthropic, serving(ScriptedOpenAIServer()) as openai:
        anthropic.enqueue(stream(AnthropicWire.text_stream("First.", thinking=("private plan", "sig-1"))))
        openai.enqueue(stream(OpenAIWire.text_stream("Second.")))
        model = model_config("anthropic", anthropic, max_output_tokens=4096, thinking_budget_tokens=2048)
        async with open_runtime(notes, config={"model": model}) as rt:
            first = await finished(await rt.start("q1"))
        async with open_runtime(notes, config={"model": model_config("openai", openai)}) as rt:
            second = await rt.start("q2", session_id=first.session_id)
            await finished(second)
    (body,) = bodies(openai)
    assert "private plan" not in json.dumps(body)
    (report,) = [e for e in events(notes, first.session_id, "context_built") if e["run_id"] == second.run_id]
    (reason,) = report["payload"]["reasoning_dropped"].values()
    assert reason == "reasoning of anthropic/test-model is not sent to openai/test-model"


# ---- Ollama think -----------------------------------------------------------------------------------
async def test_ollama_think_streams_thinking_and_sends_it_back(soong_env: SoongEnv) -> None:
    frames = [OllamaWire.thinking("pondering"), OllamaWire.content("Yes."), OllamaWire.done()]
    with serving(ScriptedOllamaServer(capabilities=("completion", "tools", "thinking"))) as server:
        server.enqueue(stream(frames), stream(OllamaWire.text_stream("Again.")))
        model = model_config("ollama", server, thinking_budget_tokens=1024)
        async with open_runtime(soong_env, config={"model": model}) as rt:
            first = await finished(await rt.start("q1"))
            await finished(await rt.start("q2", session_id=first.session_id))
    one, two = bodies(server)
    assert one["think"] is True and one["truncate"] is False
    (previous,) = [m for m in two["messages"] if m["role"] == "assistant"]
    assert previous["thinking"] == "pondering" and previous["content"] == "Yes."


async def test_ollama_refuses_think_for_a_model_without_thinking(soong_env: SoongEnv) -> None:
    with serving(ScriptedOllamaServer()) as server:
        model = model_config("ollama", server, reasoning_effort="high")
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(await rt.start("q"), status=RunStatus.failed)
    ((_, status, body),) = server.rejections
    assert status == 400 and body == {"error": '"test-model" does not support thinking'}
    assert run.error is not None and "does not support thinking" in run.error.message


# ---- the Responses API with reasoning and two tool calls -----------------------------------
def responses_turns(request: ScriptedRequest) -> Response:
    items = request.json["input"]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    n = len(outputs)
    usage = ResponsesWire.usage(1200, 40, cached=1024 if n else 0, reasoning=25)
    if n >= 2:
        return stream(
            ResponsesWire.text_stream("Both read.", reasoning="wrap up", encrypted=f"enc-{n}", usage=usage)
        )
    name = advertised_tool_name(request, "read_file")
    call = (f"call_{n}", name, {"path": f"notes/n{n}.txt"})
    return stream(ResponsesWire.tool_stream([call], reasoning=f"plan {n}", encrypted=f"enc-{n}", usage=usage))


async def test_responses_run_with_reasoning_and_two_tool_calls(notes: SoongEnv) -> None:
    """Case C14: the Responses API with reasoning and two tool calls, encrypted reasoning carried."""
    with serving(ScriptedResponsesServer()) as server:
        server.handler(responses_turns)
        model = model_config("openai_responses", server, name="o4-mini", reasoning_effort="medium")
        async with open_runtime(notes, config={"model": model}) as rt:
            run = await rt.start("read n0 then n1")
            seen = await collect(run, timeout=30)
            await run.wait()
    assert run.status == RunStatus.completed, run.error
    sent = bodies(server)
    assert len(sent) == 3 and server.rejections == []
    for body in sent:
        assert body["store"] is False and body["include"] == ["reasoning.encrypted_content"]
        assert body["reasoning"] == {"effort": "medium", "summary": "auto"}
        assert "temperature" not in body and body["max_output_tokens"] > 0
        assert body["prompt_cache_key"].startswith("soong-")
    carried = [i for i in sent[2]["input"] if i.get("type") == "reasoning"]
    assert [i["encrypted_content"] for i in carried] == ["enc-0", "enc-1"]
    assert all("id" not in i for i in sent[2]["input"])
    kinds = [i.get("type", i.get("role")) for i in sent[2]["input"]]
    assert kinds == ["user", "reasoning", "function_call", "function_call_output"] * 1 + [
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    reasoning = "".join(e.payload.text for e in seen if isinstance(e.payload, ReasoningDelta))
    assert reasoning == "plan 0plan 1wrap up"
    (done,) = [e.payload for e in seen if isinstance(e.payload, RunCompleted)]
    usage = done.usage
    assert usage["input_tokens"] == 3600 and usage["cache_read_tokens"] == 2048
    assert usage["reasoning_tokens"] == 75


async def test_responses_refuses_reasoning_it_did_not_issue_and_strips_it_without_include() -> None:
    import httpx

    with serving(ScriptedResponsesServer()) as server:
        server.enqueue(stream(ResponsesWire.text_stream("x", reasoning="r", encrypted="enc-real")))
        url = f"{server.base_url}/responses"
        async with httpx.AsyncClient() as client:
            plain = await client.post(
                url, json={"model": "o4-mini", "input": [], "stream": True, "store": False}
            )
            forged = await client.post(
                url,
                json={
                    "model": "o4-mini",
                    "store": False,
                    "input": [{"type": "reasoning", "summary": [], "encrypted_content": "enc-real"}],
                },
            )
    assert "encrypted_content" not in plain.text  # not asked for with include: not returned
    assert forged.status_code == 400 and forged.json()["error"]["code"] == "invalid_encrypted_content"


async def test_thinking_keeps_the_anthropic_cache_breakpoints_reading(notes: SoongEnv) -> None:
    """The thinking blocks go back identical, so each request of the tool loop still reads the previous
    one's cache entry (the kit's Anthropic cache emulation), and no breakpoint lands on a thinking block."""
    from agent_core.testing import AnthropicPromptCache

    with serving(ScriptedAnthropicServer(prompt_cache=AnthropicPromptCache(min_tokens=256))) as server:
        server.handler(thinking_turns)
        model = model_config("anthropic", server, max_output_tokens=4096, thinking_budget_tokens=2048)
        async with open_runtime(notes, config={"model": model}) as rt:
            await finished(await rt.start("read the three notes"))
    usage = [r.cache_usage for r in server.requests if r.cache_usage is not None]
    assert len(usage) == 4 and server.rejections == []
    assert all(u["cache_read_input_tokens"] > 0 for u in usage[1:])
    for body in bodies(server):
        for message in body["messages"]:
            assert not any("cache_control" in b for b in message["content"] if b["type"] == "thinking")


def test_a_breakpoint_never_lands_on_a_thinking_block() -> None:
    from agent_core.providers._anthropic import CachePlan, mark_breakpoints

    thinking = {"type": "thinking", "thinking": "t", "signature": "s"}
    payload = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "go"}]},
            {"role": "assistant", "content": [dict(thinking)]},
        ]
    }
    mark_breakpoints(payload, CachePlan())
    assert "cache_control" not in payload["messages"][1]["content"][0]
    assert payload["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}


async def test_responses_structured_output_uses_text_format(soong_env: SoongEnv) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    with serving(ScriptedResponsesServer()) as server:
        server.enqueue(stream(ResponsesWire.text_stream('{"answer": 42}')))
        model = model_config("openai_responses", server)
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(await rt.start("what is it?", output_schema=schema))
            assert await run.output() == {"answer": 42}
    (body,) = bodies(server)
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["schema"]["properties"] == schema["properties"]
