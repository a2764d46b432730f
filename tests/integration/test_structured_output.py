"""Structured output (docs/runs.md#structured-output) through the real adapters on the scripted OpenAI,
Anthropic and Ollama wire protocols: valid on the first try, invalid then corrected, invalid past the retry
bound, a tool call before the answer, with a Pydantic model class and with a plain JSON schema; the CLI's
--output-schema.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel, Field

from agent_core import AgentCoreError, ErrorCode, RunStatus, SchemaError
from agent_core.testing import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ScriptedRequest,
    ScriptedServer,
    advertised_tool_name,
    stream,
)
from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import open_runtime

KEY = "sk-test-0a1b2c3d4e5f60718293a4b5"
CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["city", "population"],
}


class City(BaseModel):
    city: str
    population: int = Field(ge=0)


@dataclass
class Wire:
    name: str
    server: ScriptedServer

    def config(self) -> dict[str, Any]:
        key_env = "" if self.name == "ollama" else "SOONG_TEST_API_KEY"
        return {"model": {"provider": self.name, "base_url": self.server.base_url, "api_key_env": key_env}}

    def chats(self) -> list[ScriptedRequest]:
        path = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}
        return self.server.requests_to(path[self.name])

    def answer(self, request: ScriptedRequest, value: Any) -> Response:
        """The final answer the way each protocol gives it: JSON text (native mode) or an output call."""
        if self.name == "anthropic":
            name = advertised_tool_name(request, "output")
            return stream(AnthropicWire.tool_stream([("toolu_out", name, value)]))
        body = value if isinstance(value, str) else json.dumps(value)
        if self.name == "openai":
            return stream(OpenAIWire.text_stream(*_split(body)))
        return stream(OllamaWire.text_stream(*_split(body)))

    def read_file(self, request: ScriptedRequest, path: str) -> Response:
        name = advertised_tool_name(request, "read_file")
        if self.name == "openai":
            return stream(OpenAIWire.tool_stream([("call_read", name, {"path": path})]))
        if self.name == "anthropic":
            return stream(AnthropicWire.tool_stream([("toolu_read", name, {"path": path})]))
        return stream([OllamaWire.tool_calls([(name, {"path": path})]), OllamaWire.done("stop")])


def _split(text: str) -> list[str]:
    third = max(1, len(text) // 3)
    return [text[:third], text[third : 2 * third], text[2 * third :]] if len(text) > 2 else [text]


def sent_text(request: ScriptedRequest) -> str:
    return json.dumps(request.json)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)


@pytest.fixture(params=["openai", "anthropic", "ollama"])
def wire(request: pytest.FixtureRequest) -> Iterator[Wire]:
    yield Wire(request.param, request.getfixturevalue(f"scripted_{request.param}"))


def assert_native_or_tool(wire: Wire, sent: dict[str, Any]) -> None:
    """OpenAI response_format json_schema, Ollama format, Anthropic a final output tool."""
    if wire.name == "openai":
        assert sent["response_format"]["type"] == "json_schema"
        assert sent["response_format"]["json_schema"]["schema"]["required"] == ["city", "population"]
    elif wire.name == "ollama":
        assert sent["format"]["required"] == ["city", "population"]
    else:
        output = [t for t in sent["tools"] if t["name"] == "output"]
        assert output and output[0]["input_schema"]["required"] == ["city", "population"]
        assert "response_format" not in sent and "format" not in sent


async def test_valid_first_try_pydantic_model(soong_env: SoongEnv, wire: Wire) -> None:
    wire.server.handler(lambda r: wire.answer(r, {"city": "Oslo", "population": 700000}))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("How big is Oslo?", output_schema=City)
        value = await run.output()
    assert run.status == RunStatus.completed, run.error
    assert value == City(city="Oslo", population=700000)
    (sent,) = wire.chats()
    assert_native_or_tool(wire, sent.json)
    assert "Structured output" in sent_text(sent)


async def test_invalid_then_corrected_json_schema(soong_env: SoongEnv, wire: Wire) -> None:
    answers = iter([{"city": "Oslo", "population": "many"}, {"city": "Oslo", "population": 5}])
    wire.server.handler(lambda r: wire.answer(r, next(answers)))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("How big is Oslo?", output_schema=CITY_SCHEMA)
        value = await run.output()
    assert run.status == RunStatus.completed, run.error
    assert value == {"city": "Oslo", "population": 5}
    first, second = wire.chats()
    assert "does not match the required output schema" not in sent_text(first)
    assert "does not match the required output schema" in sent_text(second)
    assert "$.population" in sent_text(second)  # the validation error went back to the model


async def test_invalid_past_the_retry_bound_fails_with_the_last_output(
    soong_env: SoongEnv, wire: Wire
) -> None:
    bad = iter([{"city": "Oslo"}, {"city": "Oslo", "population": -1}])
    wire.server.handler(lambda r: wire.answer(r, next(bad)))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("How big is Oslo?", output_schema=City, output_retries=1)
        with pytest.raises(AgentCoreError) as info:
            await run.output()
    assert run.status == RunStatus.failed
    assert info.value.code == ErrorCode.validation_error
    assert run.error is not None and run.error.code == ErrorCode.validation_error
    details = run.error.details
    assert details["attempts"] == 2 and details["max_retries"] == 1
    last = details["last_output"]
    assert (json.loads(last) if isinstance(last, str) else last) == {"city": "Oslo", "population": -1}
    assert any(e["path"] == "$.population" for e in details["errors"])
    assert len(wire.chats()) == 2


async def test_tool_call_before_the_answer(soong_env: SoongEnv, wire: Wire) -> None:
    soong_env.write_project("facts.txt", "Bergen has 290000 people.\n")

    def respond(request: ScriptedRequest) -> Response:
        if "Bergen has 290000" in sent_text(request):
            return wire.answer(request, {"city": "Bergen", "population": 290000})
        return wire.read_file(request, "facts.txt")

    wire.server.handler(respond)
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("How big is Bergen? Read facts.txt.", output_schema=CITY_SCHEMA)
        value = await run.output()
    assert run.status == RunStatus.completed, run.error
    assert value == {"city": "Bergen", "population": 290000}
    first, second = wire.chats()
    assert_native_or_tool(wire, first.json)
    assert_native_or_tool(wire, second.json)  # the other tools and the output contract in one request
    tools = json.dumps(first.json.get("tools"))
    assert "read_file" in tools


async def test_text_in_a_code_fence_is_accepted(soong_env: SoongEnv, scripted_openai: ScriptedServer) -> None:
    wire = Wire("openai", scripted_openai)
    scripted_openai.handler(lambda r: wire.answer(r, '```json\n{"city": "Rome", "population": 3}\n```'))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        run = await rt.start("Rome?", output_schema=City)
        assert await run.output() == City(city="Rome", population=3)


async def test_bad_schemas_and_no_schema(soong_env: SoongEnv, scripted_openai: ScriptedServer) -> None:
    wire = Wire("openai", scripted_openai)
    scripted_openai.handler(lambda r: stream(OpenAIWire.text_stream("free text")))
    async with open_runtime(soong_env, config=wire.config()) as rt:
        with pytest.raises(SchemaError) as schema_info:
            await rt.start("x", output_schema={"type": "object", "anyOf": [{"type": "object"}]})
        assert schema_info.value.code == ErrorCode.schema_error
        with pytest.raises(AgentCoreError) as retries_info:
            await rt.start("x", output_schema=City, output_retries=-1)
        assert retries_info.value.code == ErrorCode.validation_error
        run = await rt.start("x")
        with pytest.raises(AgentCoreError, match="without output_schema"):
            await run.output()
    assert run.status == RunStatus.completed
    assert len(wire.chats()) == 1  # the rejected starts sent nothing


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_cli_output_schema_prints_the_validated_json(
    soong_env: SoongEnv, request: pytest.FixtureRequest, provider: str
) -> None:
    wire = Wire(provider, request.getfixturevalue(f"scripted_{provider}"))
    answers = iter([{"city": "Oslo"}, {"city": "Oslo", "population": 7}])
    wire.server.handler(lambda r: wire.answer(r, next(answers)))
    soong_env.write_config(**wire.config())
    schema_file = soong_env.home / "city.schema.json"
    schema_file.write_text(json.dumps(CITY_SCHEMA), encoding="utf-8")
    result = run_cli(
        ["run", "--path", str(soong_env.project), "--output-schema", str(schema_file), "How big is Oslo?"],
        env={"SOONG_TEST_API_KEY": KEY},
    )
    assert result.exit_code == 0, result
    assert json.loads(result.stdout) == {"city": "Oslo", "population": 7}
    assert "session_id:" in result.stderr


def test_cli_output_schema_file_errors(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    missing = run_cli(["run", "--path", str(soong_env.project), "--output-schema", "/nonexistent.json", "x"])
    assert missing.exit_code == 1 and "cannot read --output-schema file" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = soong_env.home / "bad.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    result = run_cli(["run", "--path", str(soong_env.project), "--output-schema", str(bad), "x"])
    assert result.exit_code == 1 and "must hold a JSON object" in result.stderr
