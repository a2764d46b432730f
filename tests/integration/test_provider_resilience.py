"""Retries, timeouts, mid-stream failures, cancellation, close and secrets for all three built-in adapters,
over real HTTP against the scripted servers (C7–C10, C12 adapter halves)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent_core.providers._anthropic import AnthropicAdapter
from agent_core.providers._ollama import OllamaAdapter
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.providers._streaming import HttpStreamAdapter
from agent_core.types.content import TextBlock
from agent_core.types.model import ModelCompleted, ModelEvent, ModelFailed, ModelTextDelta
from tests.fixtures.provider_requests import SleepRecorder, collect, make_request, model_config, types_of
from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    ScriptedServer,
    drop_after,
    error,
    hold_open,
    stall,
    stream,
)

KEY = "sk-live-SECRET-0123456789"


@dataclass
class Case:
    name: str
    adapter_cls: type[HttpStreamAdapter]
    server: ScriptedServer
    path: str
    text_stream: Callable[..., list[str]]
    first_text: list[str]  # frames up to and including one text delta
    preamble: list[str]  # frames that yield no delta

    def adapter(self, sleep: SleepRecorder | None = None, **config: Any) -> HttpStreamAdapter:
        return self.adapter_cls(model_config(self.name, self.server.base_url, **config), sleep=sleep)

    def chat_requests(self) -> int:
        return len(self.server.requests_to(self.path))


@pytest.fixture(params=["openai", "anthropic", "ollama"])
def case(request: pytest.FixtureRequest) -> Case:
    name = request.param
    if name == "openai":
        return Case(
            name,
            OpenAIAdapter,
            request.getfixturevalue("scripted_openai"),
            "/v1/chat/completions",
            OpenAIWire.text_stream,
            [OpenAIWire.role(), OpenAIWire.text("Hi")],
            [OpenAIWire.role()],
        )
    if name == "anthropic":
        start = [AnthropicWire.message_start(), AnthropicWire.text_start(0)]
        return Case(
            name,
            AnthropicAdapter,
            request.getfixturevalue("scripted_anthropic"),
            "/v1/messages",
            AnthropicWire.text_stream,
            [*start, AnthropicWire.text_delta(0, "Hi")],
            start,
        )
    return Case(
        name,
        OllamaAdapter,
        request.getfixturevalue("scripted_ollama"),
        "/api/chat",
        OllamaWire.text_stream,
        [OllamaWire.content("Hi")],
        [],
    )


def failed_of(events: list[ModelEvent]) -> ModelFailed:
    assert isinstance(events[-1], ModelFailed), events[-1]
    return events[-1]


def completed_of(events: list[ModelEvent]) -> ModelCompleted:
    assert isinstance(events[-1], ModelCompleted), events[-1]
    return events[-1]


# -- C7: retries --------------------------------------------------------------------------------------
async def test_429_then_success_uses_backoff(case: Case) -> None:
    """Case C7."""
    sleep = SleepRecorder()
    case.server.enqueue(error(429, {"error": {"message": "slow down"}}), stream(case.text_stream("ok")))
    adapter = case.adapter(sleep)
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_started", "model_text_delta", "model_completed"]
    assert sleep.jittered_under([500])  # initial_backoff_ms (default retry config), full jitter
    retry = completed_of(events).metadata["retry"]
    assert retry["attempts"] == 2 and retry["max_attempts"] == 3
    assert retry["retries"] == [
        {
            "attempt": 1,
            "error_type": "rate_limit",
            "code": "provider_rate_limited",
            "status_code": 429,
            "backoff_ms": sleep.delays_ms[0],
            "retry_after_ms": None,
        }
    ]
    assert (
        retry["last_error"]["code"] == "provider_rate_limited"
        and "slow down" in retry["last_error"]["message"]
    )
    assert case.chat_requests() == 2


@pytest.mark.parametrize(
    ("headers", "expected"), [({"Retry-After": "0"}, 0), ({"retry-after-ms": "120"}, 120)]
)
async def test_retry_after_headers_honoured(case: Case, headers: dict[str, str], expected: int) -> None:
    """Case C7."""
    sleep = SleepRecorder()
    case.server.enqueue(error(429, {"error": "busy"}, headers), stream(case.text_stream("ok")))
    adapter = case.adapter(sleep)
    events = await collect(adapter, make_request())
    await adapter.close()
    assert sleep.delays_ms == [expected]
    retry = completed_of(events).metadata["retry"]
    assert retry["retries"][0]["retry_after_ms"] == expected and retry["retries"][0]["backoff_ms"] == expected


async def test_429_exhausted(case: Case) -> None:
    """Case C7."""
    sleep = SleepRecorder()
    case.server.enqueue(*[error(429, {"error": "busy"}) for _ in range(3)])
    adapter = case.adapter(sleep)
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_started", "model_failed"]
    failed = failed_of(events)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "rate_limit",
        "provider_rate_limited",
        True,
    )
    assert failed.error.status_code == 429 and failed.error.provider == case.name
    assert case.chat_requests() == 3
    assert sleep.jittered_under([500, 1000])
    assert failed.metadata["retry"]["attempts"] == 3 and len(failed.metadata["retry"]["retries"]) == 2


@pytest.mark.parametrize("status", [500, 503])
async def test_server_error_then_success(case: Case, status: int) -> None:
    """Case C7."""
    case.server.enqueue(error(status, {"error": "oops"}), stream(case.text_stream("recovered")))
    adapter = case.adapter(SleepRecorder())
    events = await collect(adapter, make_request())
    await adapter.close()
    done = completed_of(events)
    assert done.content == [TextBlock(text="recovered")]
    assert done.metadata["retry"]["retries"][0]["error_type"] == "server"


@pytest.mark.parametrize(
    ("status", "type_", "code"),
    [
        (400, "invalid_request", "provider_error"),
        (401, "auth", "provider_auth_failed"),
        (403, "auth", "provider_auth_failed"),
    ],
)
async def test_client_errors_not_retried(case: Case, status: int, type_: str, code: str) -> None:
    """Case C7."""
    sleep = SleepRecorder()
    case.server.enqueue(error(status, {"error": {"message": "nope"}}))
    adapter = case.adapter(sleep)
    events = await collect(adapter, make_request())
    await adapter.close()
    failed = failed_of(events)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (type_, code, False)
    assert failed.error.status_code == status and failed.error.raw == {"error": {"message": "nope"}}
    assert case.chat_requests() == 1 and sleep.delays_ms == []


async def test_backoff_sequence_four_attempts(scripted_openai: ScriptedServer) -> None:
    sleep = SleepRecorder()
    scripted_openai.enqueue(*[error(500, {"error": "down"}) for _ in range(4)])
    adapter = OpenAIAdapter(model_config("openai", scripted_openai.base_url, max_attempts=4), sleep=sleep)
    events = await collect(adapter, make_request())
    await adapter.close()
    assert failed_of(events).error.type == "server"
    assert sleep.jittered_under([500, 1000, 2000])
    assert len(scripted_openai.requests) == 4


async def test_stall_times_out_after_all_attempts(case: Case) -> None:
    """Case C7."""
    sleep = SleepRecorder()
    case.server.enqueue(stall(), stall(), stall())
    adapter = case.adapter(sleep, timeout_ms=300)
    loop = asyncio.get_running_loop()
    began = loop.time()
    events = await collect(adapter, make_request())
    elapsed = loop.time() - began
    await adapter.close()
    failed = failed_of(events)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "timeout",
        "provider_timeout",
        True,
    )
    assert case.chat_requests() == 3
    assert 0.85 <= elapsed < 4.0  # three idle timeouts of 0.3 s; backoff sleeps are injected
    assert await case.server.until_disconnected(3, timeout=2)
    assert [d.kind for d in case.server.disconnects] == ["stall"] * 3


async def test_connection_refused_is_network_error_and_retried() -> None:
    """Case C7."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    sleep = SleepRecorder()
    adapter = OpenAIAdapter(model_config("openai", f"http://127.0.0.1:{port}/v1"), sleep=sleep)
    events = await collect(adapter, make_request())
    await adapter.close()
    failed = failed_of(events)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "network",
        "provider_error",
        True,
    )
    assert sleep.jittered_under([500, 1000])


# -- C8: mid-stream failure ---------------------------------------------------------------------------
async def test_drop_after_text_is_terminal(case: Case) -> None:
    """Case C8."""
    case.server.enqueue(drop_after(case.first_text))
    adapter = case.adapter(SleepRecorder())
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_started", "model_text_delta", "model_failed"]
    failed = failed_of(events)
    assert failed.error.type in {"network", "protocol"} and failed.error.code == "provider_error"
    assert failed.error.message and isinstance(failed.error.retryable, bool)
    assert case.chat_requests() == 1
    assert failed.metadata["retry"]["attempts"] == 1


async def test_drop_before_any_delta_is_retried(case: Case) -> None:
    """Case C8."""
    case.server.enqueue(drop_after(case.preamble), stream(case.text_stream("second try")))
    adapter = case.adapter(SleepRecorder())
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events).count("model_started") == 1
    assert completed_of(events).content == [TextBlock(text="second try")]
    assert case.chat_requests() == 2


# -- C9: cancellation ---------------------------------------------------------------------------------
async def test_cancel_closes_http_response(case: Case) -> None:
    """Case C9."""
    case.server.enqueue(hold_open(case.first_text))
    adapter = case.adapter(SleepRecorder())
    received: list[ModelEvent] = []
    got_text = asyncio.Event()

    async def consume() -> None:
        async for event in adapter.stream(make_request()):
            received.append(event)
            if isinstance(event, ModelTextDelta):
                got_text.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(got_text.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await case.server.until_disconnected(1, timeout=2), "server did not see the client disconnect"
    assert case.server.disconnects[0].kind == "hold_open"
    await asyncio.sleep(0.05)
    assert types_of(received) == ["model_started", "model_text_delta"]
    assert case.chat_requests() == 1
    await adapter.close()


async def test_aclose_of_the_generator_closes_http_response(case: Case) -> None:
    """Case C9."""
    case.server.enqueue(hold_open(case.first_text))
    adapter = case.adapter(SleepRecorder())
    gen = adapter.stream(make_request())
    async for event in gen:
        if isinstance(event, ModelTextDelta):
            break
    await gen.aclose()
    assert await case.server.until_disconnected(1, timeout=2)
    await adapter.close()


# -- C10: close -----------------------------------------------------------------------
@pytest.mark.filterwarnings("error::ResourceWarning")
async def test_close_idempotent_releases_connections(case: Case) -> None:
    """Case C10."""
    case.server.enqueue(stream(case.text_stream("one")))
    adapter = case.adapter(SleepRecorder())
    assert isinstance((await collect(adapter, make_request()))[-1], ModelCompleted)
    await adapter.close()
    await adapter.close()
    assert await case.server.until_idle(timeout=2), "a pooled connection stayed open after close()"
    events = await collect(adapter, make_request())
    assert types_of(events) == ["model_failed"]
    failed = failed_of(events)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == (
        "closed",
        "provider_error",
        False,
    )
    assert case.chat_requests() == 1


# -- C12: configuration and secrets ------------------------------------------------
async def test_missing_api_key_env_fails_lazily(case: Case) -> None:
    """Case C12."""
    adapter = case.adapter(
        SleepRecorder(),
        api_key_env="SOONG_TEST_API_KEY",
        purpose="compact",
        profile="compact",
        source="/home/u/config.toml [model] + [model_overrides.compact]",
    )  # construction succeeds without the variable
    events = await collect(adapter, make_request())
    await adapter.close()
    assert types_of(events) == ["model_failed"]
    failed = failed_of(events)
    assert (failed.error.type, failed.error.code, failed.error.retryable) == ("config", "config_error", False)
    message = failed.error.message
    assert "SOONG_TEST_API_KEY" in message and "compact" in message and "[model_overrides.compact]" in message
    assert case.name in message
    assert case.server.requests == []


async def test_api_key_only_in_auth_header(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    """Case C12."""
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    case.server.enqueue(
        error(401, {"error": {"message": f"invalid key {KEY}"}}),
        stream(case.text_stream("ok")),
    )
    adapter = case.adapter(SleepRecorder(), api_key_env="SOONG_TEST_API_KEY")
    rejected = await collect(adapter, make_request(debug=True))
    accepted = await collect(adapter, make_request(debug=True))
    await adapter.close()
    failed = failed_of(rejected)
    assert failed.error.code == "provider_auth_failed"
    assert "[REDACTED]" in failed.error.message
    dumped = json.dumps([e.model_dump() for e in rejected + accepted])
    assert KEY not in dumped
    assert isinstance(accepted[-1], ModelCompleted)
    for sent in case.server.requests:
        assert KEY not in sent.body.decode()
        header_values = " ".join(sent.headers.values())
        assert KEY in header_values


async def test_unknown_option_in_own_namespace_only(case: Case) -> None:
    adapter = case.adapter(SleepRecorder())
    own = {case.name: {"definitely_not_an_option": 1}}
    events = await collect(adapter, make_request(provider_options=own))
    assert types_of(events) == ["model_failed"]
    assert failed_of(events).error.code == "config_error"
    assert case.server.requests == []
    case.server.enqueue(stream(case.text_stream("ok")))
    foreign = {n: {"x": 1} for n in ("openai", "anthropic", "ollama") if n != case.name}
    events = await collect(adapter, make_request(provider_options=foreign))
    await adapter.close()
    assert isinstance(events[-1], ModelCompleted)


async def test_close_during_stream_ends_it_without_retry(case: Case) -> None:
    case.server.enqueue(hold_open(case.first_text))
    adapter = case.adapter(SleepRecorder())
    events: list[ModelEvent] = []
    async for event in adapter.stream(make_request()):
        events.append(event)
        if isinstance(event, ModelTextDelta):
            await asyncio.wait_for(adapter.close(), 5)
    assert types_of(events) == ["model_started", "model_text_delta", "model_failed"]
    failed = failed_of(events)
    assert (failed.error.type, failed.error.retryable) == ("closed", False)
    assert case.chat_requests() == 1
    assert await case.server.until_disconnected(1, timeout=2)
