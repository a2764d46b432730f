"""End to end through the public API with the real built-in adapters against the scripted wire-protocol
servers, for all three providers: plain run, tool round trip, queued run, cancel of a streaming run (later runs
still work), provider failure, max_turns. (docs/testing.md#isolation; the runtime halves of C3–C6, C8–C10, C12
and docs/providers.md are in test_providers_e2e_checks.py.)"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from agent_core import EndReason, RunStatus
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import collect, open_runtime, rows, types
from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ScriptedRequest,
    ScriptedServer,
    advertised_tool_name,
    error,
    hold_open,
    stream,
)

KEY = "sk-test-5f0e2d9c8b7a6e5d4c3b2a19"


@dataclass
class Wire:
    """One provider's scripted server plus the frames and config the runtime tests need."""

    name: str
    server: ScriptedServer

    @property
    def chat_path(self) -> str:
        return {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}[
            self.name
        ]

    def config(self, **extra: Any) -> dict[str, Any]:
        model = {
            "provider": self.name,
            "base_url": self.server.base_url,
            "api_key_env": "" if self.name == "ollama" else "SOONG_TEST_API_KEY",
        }
        return {"model": model, **extra}

    def chats(self) -> list[ScriptedRequest]:
        return self.server.requests_to(self.chat_path)

    def text(self, *parts: str) -> list[str]:
        if self.name == "openai":
            return OpenAIWire.text_stream(*parts)
        if self.name == "anthropic":
            return AnthropicWire.text_stream(*parts)
        return OllamaWire.text_stream(*parts)

    def tool(
        self, request: ScriptedRequest, contains: str, arguments: dict[str, Any], call_id: str
    ) -> list[str]:
        name = advertised_tool_name(request, contains)
        if self.name == "openai":
            return OpenAIWire.tool_stream([(call_id, name, arguments)])
        if self.name == "anthropic":
            return AnthropicWire.tool_stream([(call_id, name, arguments)])
        return [OllamaWire.tool_calls([(name, arguments)]), OllamaWire.done("stop")]

    def partial(self, text: str) -> list[str]:
        if self.name == "openai":
            return [OpenAIWire.role(), OpenAIWire.text(text)]
        if self.name == "anthropic":
            return [
                AnthropicWire.message_start(),
                AnthropicWire.text_start(0),
                AnthropicWire.text_delta(0, text),
            ]
        return [OllamaWire.content(text)]

    def bad_request(self) -> Response:
        if self.name == "openai":
            return error(400, {"error": {"message": "bad parameter", "type": "invalid_request_error"}})
        if self.name == "anthropic":
            return error(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}})
        return error(400, {"error": "bad request"})

    @staticmethod
    def answers_tool(request: ScriptedRequest) -> bool:
        last = (request.json or {}).get("messages", [])[-1]
        if last.get("role") == "tool":
            return True
        content = last.get("content")
        return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


@pytest.fixture(params=["openai", "anthropic", "ollama"])
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    server = request.getfixturevalue(f"scripted_{request.param}")
    yield Wire(request.param, server)


def assistant_texts(env: SoongEnv, session_id: str) -> list[str]:
    out = []
    for r in rows(
        env, f"SELECT content_json FROM \"nodes_{session_id}\" WHERE role = 'assistant' ORDER BY node_seq"
    ):
        out.append("".join(b.get("text", "") for b in json.loads(r["content_json"]) if b["type"] == "text"))
    return out


async def test_e2e_plain_run(soong_env: SoongEnv, wire: Wire) -> None:
    wire.server.enqueue(stream(wire.text("Hello ", "from ", wire.name), delay_s=0.005))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("say hello")
        events = await collect(run)
    assert run.status == RunStatus.completed and run.end_reason == EndReason.completed, run.error
    deltas = "".join(str(e.data["text"]) for e in events if e.event_type == EventType.message_delta)
    assert deltas == f"Hello from {wire.name}"
    assert assistant_texts(soong_env, run.session_id) == [f"Hello from {wire.name}"]
    (sent,) = wire.chats()
    assert sent.json["stream"] is True and sent.json["model"] == "test-model"
    assert "say hello" in json.dumps(sent.json["messages"])


async def test_e2e_tool_round_trip_with_code_read_file(soong_env: SoongEnv, wire: Wire) -> None:
    soong_env.write_project("notes/hello.txt", "the secret word is pineapple\n")

    def respond(request: ScriptedRequest) -> Response:
        if wire.answers_tool(request):
            return stream(wire.text("The word is pineapple."))
        return stream(wire.tool(request, "read_file", {"path": "notes/hello.txt"}, "call_read_1"))

    wire.server.handler(respond)
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("what is the word?")
        events = await collect(run)
    assert run.status == RunStatus.completed, run.error
    assert types(events).count("tool_completed") == 1
    started = next(e for e in events if e.event_type == EventType.tool_started)
    assert started.data["tool_name"] == "code.read_file"
    first, second = wire.chats()
    assert any("read_file" in json.dumps(t) for t in first.json["tools"])
    assert "pineapple" in json.dumps(second.json["messages"])
    assert assistant_texts(soong_env, run.session_id)[-1] == "The word is pineapple."
    tool_row = rows(soong_env, f"SELECT content_json FROM \"nodes_{run.session_id}\" WHERE role = 'tool'")[0]
    block = json.loads(tool_row["content_json"])[0]
    assert not block["is_error"] and "pineapple" in json.dumps(block)


async def test_e2e_queued_run(soong_env: SoongEnv, wire: Wire) -> None:
    wire.server.enqueue(
        stream(wire.text("first ", "answer"), delay_s=0.05),
        stream(wire.text("second answer")),
    )
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run1 = await rt.start("first question")
        run2 = await rt.start("second question", session_id=run1.session_id)
        assert run2.status == RunStatus.queued
        events1, events2 = await asyncio.gather(collect(run1), collect(run2))
    assert run1.status == run2.status == RunStatus.completed
    assert types(events2)[:3] == ["run_queued", "run_dequeued", "loop_started"]
    assert (events2[1].seq or 0) > (events1[-1].seq or 0)
    first, second = wire.chats()
    assert "second question" not in json.dumps(first.json["messages"])
    history = json.dumps(second.json["messages"])
    assert "first question" in history and "first answer" in history and "second question" in history
    assert assistant_texts(soong_env, run1.session_id) == ["first answer", "second answer"]


async def test_e2e_cancel_streaming_run_then_next_run_works(soong_env: SoongEnv, wire: Wire) -> None:
    wire.server.enqueue(hold_open(wire.partial("partial words")), stream(wire.text("fresh answer")))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("long answer please")
        seen = []
        async for event in run.events(debug=True):
            seen.append(event)
            if event.event_type == EventType.message_delta:
                result = await run.cancel()
                assert result.cancelled and not result.timed_out
        assert await wire.server.until_disconnected(1, timeout=2.0)
        names = types(seen)
        assert names[-3:] == ["aborted_streaming", "loop_aborted", "run_cancelled"]
        assert not [n for n in names[names.index("message_delta") + 1 :] if n.startswith("model_")]
        assert run.end_reason == EndReason.aborted_streaming
        later = await rt.start("try again", session_id=run.session_id)
        await collect(later)
    assert later.status == RunStatus.completed, later.error
    assert len(wire.chats()) == 2
    assert "partial words" not in json.dumps(wire.chats()[1].json["messages"])
    assert assistant_texts(soong_env, run.session_id) == ["partial words", "fresh answer"]


async def test_e2e_provider_failure_fails_run_with_error_json(soong_env: SoongEnv, wire: Wire) -> None:
    wire.server.enqueue(wire.bad_request())
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("hello")
        events = await collect(run)
    assert run.status == RunStatus.failed and run.end_reason == EndReason.failed
    assert types(events)[-2:] == ["error", "loop_failed"]
    assert len(wire.chats()) == 1  # a 400 is never retried
    row = rows(soong_env, "SELECT status, end_reason, error_json FROM runs WHERE run_id = ?", run.run_id)[0]
    error = json.loads(row["error_json"])
    assert (row["status"], row["end_reason"], error["code"]) == ("failed", "failed", "provider_error")
    assert error["details"]["provider"] == wire.name and error["details"]["status_code"] == 400
    assert error["redacted"] is True and KEY not in row["error_json"]


async def test_e2e_max_turns(soong_env: SoongEnv, wire: Wire) -> None:
    wire.server.handler(
        lambda req: stream(wire.tool(req, "list_dir", {"path": "."}, f"call_{len(wire.chats())}"))
    )
    async with open_runtime(soong_env, config=wire.config(runtime={"max_turns": 2})) as rt:
        run = await rt.start("loop")
        events = await collect(run)
    assert run.status == RunStatus.failed and run.end_reason == EndReason.max_turns
    assert len(wire.chats()) == 2 and types(events).count("tool_completed") == 2
    assert events[-1].event_type == EventType.loop_failed
