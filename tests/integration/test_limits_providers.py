"""Limits hold on all three providers: the real adapters against the scripted wire-protocol servers.

A tool turn spends the budget; the final answer request goes out without tools (no ``tools`` key on the
wire) and carries the runtime note; the run ends ``limit_reached`` with ``error.details.limit``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core import EndReason, RunStatus
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import collect, open_runtime
from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ScriptedRequest,
    ScriptedServer,
    advertised_tool_name,
    stream,
)

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}


def tool_turn(provider: str, request: ScriptedRequest, call_id: str) -> Response:
    name = advertised_tool_name(request, "list_dir")
    args = {"path": "."}
    if provider == "openai":
        return stream(OpenAIWire.tool_stream([(call_id, name, args)]))
    if provider == "anthropic":
        return stream(AnthropicWire.tool_stream([(call_id, name, args)]))
    return stream([OllamaWire.tool_calls([(name, args)]), OllamaWire.done("stop", 10, 5)])


def text_turn(provider: str, reply: str) -> Response:
    if provider == "openai":
        return stream(OpenAIWire.text_stream(reply))
    if provider == "anthropic":
        return stream(AnthropicWire.text_stream(reply))
    return stream(OllamaWire.text_stream(reply))


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
@pytest.mark.parametrize(
    ("limits", "limit"),
    [
        ({"max_tool_calls": 1}, "max_tool_calls"),
        ({"max_total_tokens": 12}, "max_total_tokens"),
        ({"max_cost_usd": 0.000001}, "max_cost_usd"),
    ],
)
async def test_limit_reached_final_call_without_tools(
    soong_env: SoongEnv,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    limits: dict[str, Any],
    limit: str,
) -> None:
    server: ScriptedServer = request.getfixturevalue(f"scripted_{provider}")
    soong_env.write_project("a.txt", "a\n")
    counter = iter(range(100))

    def respond(req: ScriptedRequest) -> Response:
        if "tools" in (req.json or {}):
            return tool_turn(provider, req, f"call_{next(counter)}")
        return text_turn(provider, "Final: one file, a.txt.")

    server.handler(respond)
    model: dict[str, Any] = {"provider": provider, "base_url": server.base_url, "price_input_per_mtok": 1.0}
    if provider != "ollama":
        monkeypatch.setenv("SOONG_TEST_API_KEY", "sk-test-limits-0123456789")
        model["api_key_env"] = "SOONG_TEST_API_KEY"
    async with open_runtime(soong_env, config={"model": model, "limits": limits}) as rt:
        run = await rt.start("list the project")
        events = await collect(run)
    chats = server.requests_to(PATHS[provider])
    assert len(chats) == 2, [c.json for c in chats]
    assert "tools" in chats[0].json and "tools" not in chats[1].json and "tool_choice" not in chats[1].json
    final_messages = json.dumps(chats[1].json["messages"][-2:])
    assert "Runtime note" in final_messages and limit in final_messages
    assert run.status == RunStatus.completed and run.end_reason == EndReason.limit_reached
    assert run.error is not None and run.error.details["limit"] == limit
    usage = events[-1].data["usage"]
    assert usage["input_tokens"] >= 20 and usage["cost_usd"] == pytest.approx(usage["input_tokens"] / 1e6)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "ollama"])
async def test_loop_detected_on_each_provider(
    soong_env: SoongEnv, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, provider: str
) -> None:
    server: ScriptedServer = request.getfixturevalue(f"scripted_{provider}")
    soong_env.write_project("a.txt", "a\n")
    counter = iter(range(100))

    def respond(req: ScriptedRequest) -> Response:
        if "tools" in (req.json or {}):
            return tool_turn(provider, req, f"call_{next(counter)}")
        return text_turn(provider, "I keep listing the same directory.")

    server.handler(respond)
    model: dict[str, Any] = {"provider": provider, "base_url": server.base_url}
    if provider != "ollama":
        monkeypatch.setenv("SOONG_TEST_API_KEY", "sk-test-limits-0123456789")
        model["api_key_env"] = "SOONG_TEST_API_KEY"
    async with open_runtime(
        soong_env, config={"model": model, "limits": {"repeat_tool_call_limit": 2}}
    ) as rt:
        run = await rt.start("list the project")
        await collect(run)
    chats = server.requests_to(PATHS[provider])
    # 2 identical calls -> note; the 3rd -> loop_detected; then one final request without tools
    assert len(chats) == 4
    assert "times in a row" in json.dumps(chats[2].json["messages"][-2:]) and "tools" in chats[2].json
    assert "tools" not in chats[3].json
    assert run.status == RunStatus.completed and run.end_reason == EndReason.loop_detected
    assert run.error is not None and run.error.details["limit"] == "repeat_tool_call_limit"
