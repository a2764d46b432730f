"""Overflow recovery on the wire (issue 34 item 5): the estimate says the prompt fits, the provider says it
does not (each vendor's own error shape, from the strict scripted servers); the runtime compacts once and
retries the request, learning how far off its estimate was; a prompt that still does not fit ends the run
``prompt_too_long`` with the provider's figures."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core import RunStatus
from agent_core.testing import ModelRules, Response, ScriptedRequest, error, llamacpp_overflow, stream
from agent_core.testing._rules import estimate_tokens
from tests.fixtures.env import SoongEnv
from tests.fixtures.orchestrator import events
from tests.fixtures.real_models import (
    KEY_ENV,
    KEY_VALUE,
    PROVIDERS,
    bodies,
    finished,
    model_config,
    server_for,
    serving,
    text_answer,
)
from tests.fixtures.runtime import open_runtime
from tests.integration.compaction_support import compact_reply

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa " * 40  # ~610 tokens
COMPACT = {"model_overrides": {"compact": {"name": "compact-model"}}}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)


def server_size(provider: str, body: dict[str, Any]) -> int:
    """The prompt size the scripted server estimates for ``body`` (what its window is compared with)."""
    if provider == "anthropic":
        return estimate_tokens(body.get("system"), body["messages"], body.get("tools"))
    if provider == "openai_responses":
        return estimate_tokens(body.get("instructions"), body["input"], body.get("tools"))
    return estimate_tokens(body["messages"], body.get("tools"))


def answering(provider: str) -> Any:
    """Answers the compact fork with a valid summary and every other request with "ok"."""

    def turns(request: ScriptedRequest) -> Response:
        text = json.dumps(request.json)
        if "<tokens_before>" in text:
            return stream(text_answer(provider, compact_reply(text)))
        return stream(text_answer(provider, "ok"))

    return turns


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_overflow_compacts_once_and_the_retry_succeeds(soong_env: SoongEnv, provider: str) -> None:
    """Case C16: overflow in the vendor's shape → one compaction → the retry succeeds."""
    with serving(server_for(provider)) as server:
        server.handler(answering(provider))
        model = model_config(provider, server)
        async with open_runtime(soong_env, config={"model": model, **COMPACT}) as rt:
            run = await finished(await rt.start("hello"))
            # the model's real window: the system prompt and about seven messages; the composer's own
            # window (200,000) lets the conversation grow until the provider refuses it
            window = server_size(provider, bodies(server)[0]) + 4500
            server.models["test-model"] = ModelRules(context_window=window)
            session = run.session_id
            for k in range(12):
                last = await finished(await rt.start(f"part {k}: {WORDS}", session_id=session))
                if server.rejections:
                    break
    ((rejected, status, body),) = server.rejections
    assert status == 400
    shape = {
        "openai": lambda b: b["error"]["code"] == "context_length_exceeded",
        "openai_responses": lambda b: b["error"]["code"] == "context_length_exceeded",
        "anthropic": lambda b: b["error"]["message"].startswith("prompt is too long: "),
        "ollama": lambda b: b == {"error": "the input length exceeds the context length"},
    }
    assert shape[provider](body)
    sent = bodies(server)
    after = sent[sent.index(rejected.json) + 1 :]
    assert [b["model"] for b in after] == ["compact-model", "test-model"]  # one compaction, one retry
    assert server_size(provider, after[1]) <= window
    overflow = [e for e in events(soong_env, session, "context_overflow") if e["run_id"] == last.run_id]
    assert len(overflow) == 1
    payload = overflow[0]["payload"]
    if provider in ("openai", "anthropic"):  # these vendors give their figures
        assert payload["prompt_tokens"] > window and payload["context_window"] == window
        assert payload["estimate_factor"] >= payload["prompt_tokens"] / payload["estimated_tokens"]
    else:
        assert payload["prompt_tokens"] is None
    assert events(soong_env, session, "compact_completed")


async def test_an_overflow_that_survives_the_compaction_ends_prompt_too_long_with_the_figures(
    soong_env: SoongEnv,
) -> None:
    with serving(server_for("anthropic", models={"test-model": ModelRules(context_window=500)})) as server:
        server.handler(answering("anthropic"))
        model = model_config("anthropic", server)
        async with open_runtime(soong_env, config={"model": model, **COMPACT}) as rt:
            run = await finished(await rt.start("hello"), status=RunStatus.failed)
    assert run.end_reason is not None and run.end_reason.value == "prompt_too_long"
    assert run.error is not None and run.error.type == "prompt_too_long"
    details = run.error.details
    assert details["provider_context_window"] == 500 and details["provider_prompt_tokens"] > 500
    assert "prompt tokens, window 500" in run.error.message
    assert len(server.rejections) == 2  # the request and its one retry


async def test_llama_cpp_exceed_context_size_error_is_recognised_with_its_figures(
    soong_env: SoongEnv,
) -> None:
    with serving(server_for("openai")) as server:
        server.enqueue(error(400, llamacpp_overflow(9000, 8192)))
        server.handler(answering("openai"))
        async with open_runtime(soong_env, config={"model": model_config("openai", server), **COMPACT}) as rt:
            run = await finished(await rt.start("hello"))
    (overflow,) = events(soong_env, run.session_id, "context_overflow")
    assert (overflow["payload"]["prompt_tokens"], overflow["payload"]["context_window"]) == (9000, 8192)


async def test_the_estimate_learns_from_reported_prompt_sizes(soong_env: SoongEnv) -> None:
    """Completed calls report the real prompt size; the next build divides the window by the learned
    factor (reported in the context report)."""
    from agent_core.testing import OpenAIWire

    def turns(request: ScriptedRequest) -> Response:
        real = (
            estimate_tokens(request.json["messages"], request.json.get("tools")) * 2
        )  # a "tokenizer" 2x ours
        return stream(OpenAIWire.text_stream("ok", usage=(real, 3)))

    with serving(server_for("openai")) as server:
        server.handler(turns)
        async with open_runtime(soong_env, config={"model": model_config("openai", server)}) as rt:
            first = await finished(await rt.start("hello"))
            await finished(await rt.start("again", session_id=first.session_id))
    reports = [e["payload"] for e in events(soong_env, first.session_id, "context_built")]
    assert reports[0]["estimate_factor"] == 1.0
    assert 1.5 < reports[1]["estimate_factor"] < 3.0
    window = reports[1]["token_budget"]["context_window"]
    assert window == int(200_000 / reports[1]["estimate_factor"])


def test_recognition_of_each_vendor_shape() -> None:
    from agent_core.providers._overflow import recognise_overflow
    from agent_core.testing import anthropic_overflow, ollama_overflow, openai_overflow, responses_overflow

    assert recognise_overflow(openai_overflow(128000, 130532)) is not None
    found = recognise_overflow(openai_overflow(128000, 130532))
    assert found is not None and (found.prompt_tokens, found.context_window) == (130532, 128000)
    found = recognise_overflow(anthropic_overflow(208310, 200000))
    assert found is not None and (found.prompt_tokens, found.context_window) == (208310, 200000)
    found = recognise_overflow(llamacpp_overflow(9000, 8192))
    assert found is not None and (found.prompt_tokens, found.context_window) == (9000, 8192)
    vllm = {
        "error": {
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
            "type": "BadRequestError",
        }
    }
    found = recognise_overflow(vllm)
    assert found is not None and (found.prompt_tokens, found.context_window) == (4000, 4096)
    assert recognise_overflow(responses_overflow()) is not None
    assert recognise_overflow(ollama_overflow()) is not None
    failed_event = {
        "type": "response.failed",
        "response": {"error": {"code": "context_length_exceeded", "message": "x"}},
    }
    assert recognise_overflow(failed_event) is not None
    assert recognise_overflow({"error": {"message": "Invalid API key", "code": "invalid_api_key"}}) is None
    assert recognise_overflow({"error": {"message": "rate limited", "type": "rate_limit_error"}}) is None
