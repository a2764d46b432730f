"""The testing kit as a user sees it (docs/testing.md#testing-your-agents): only ``agent_core`` and
``agent_core.testing``.

FunctionModel and TestModel runs, a record-then-replay round trip, and a replay whose prompt changed
failing with a diff. No private import, no config file, no model server.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_core import RunStatus, ToolDefinition
from agent_core.testing import (
    CallTool,
    CassetteMismatch,
    FunctionModel,
    ModelReply,
    ModelRequest,
    TestModel,
    last_user_text,
    open_runtime,
    record,
    replay,
    tool_results,
)

WEATHER = ToolDefinition(
    name="demo.weather",
    description="Current weather of a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
        "required": ["city"],
    },
    permission="readonly",
)


async def weather(args: dict[str, Any], ctx: Any) -> str:
    return f"sunny in {args['city']}"


def weather_agent(request: ModelRequest) -> str | ModelReply:
    """Asks the weather tool once, then answers with its result."""
    results = tool_results(request)
    if results:
        return f"Report: {next(iter(results.values()))}"
    city = last_user_text(request).rsplit(" ", 1)[-1]
    return ModelReply(text="Checking.", tool_calls=[CallTool("demo.weather", {"city": city})])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    (path / "README.md").write_text("# demo\n", encoding="utf-8")
    return path


async def test_function_model_drives_a_run_with_a_tool(project: Path) -> None:
    model = FunctionModel(weather_agent)
    async with open_runtime(model, project_dir=project) as runtime:
        runtime.register_tool(WEATHER, weather)
        run = await runtime.start("weather in Paris")
        texts = [e.data["text"] async for e in run.events() if e.event_type == "message_delta"]
    assert run.status == RunStatus.completed, run.error
    assert "".join(texts) == "Checking.Report: sunny in Paris"
    assert len(model.requests) == 2
    assert [t.name for t in model.requests[0].tools].count("demo.weather") == 1


async def test_test_model_calls_every_offered_tool_once_with_valid_arguments(project: Path) -> None:
    seen: list[dict[str, Any]] = []

    async def record_call(args: dict[str, Any], ctx: Any) -> str:
        seen.append(args)
        return "ok"

    model = TestModel(final_text="all tools called")
    async with open_runtime(model, project_dir=project) as runtime:
        runtime.register_tool(WEATHER, record_call)
        run = await runtime.start("try everything")
        await run.wait()
    assert run.status == RunStatus.completed, run.error
    offered = model.requests[0].tools
    assert sorted(name for name, _ in model.calls) == sorted(t.name for t in offered)
    assert len(offered) > 5  # the built-in tools too, not only ours
    assert seen == [{"city": "a", "days": 1}]  # our handler ran, with schema-valid arguments
    # it answered after seeing one result per call
    assert len(tool_results(model.requests[1])) == len(offered)


async def test_record_then_replay_round_trip(tmp_path: Path, project: Path) -> None:
    cassette_path = tmp_path / "weather.json"
    live = FunctionModel(weather_agent)
    async with open_runtime(record(cassette_path, live), project_dir=project) as runtime:
        runtime.register_tool(WEATHER, weather)
        first = await runtime.start("weather in Oslo")
        await first.wait()
    assert first.status == RunStatus.completed, first.error
    stored = json.loads(cassette_path.read_text(encoding="utf-8"))
    assert len(stored["interactions"]) == 2

    other = tmp_path / "elsewhere"  # another project directory: still matches
    other.mkdir()
    cassette = replay(cassette_path)
    async with open_runtime(cassette, project_dir=other) as runtime:
        runtime.register_tool(WEATHER, weather)
        again = await runtime.start("weather in Oslo")
        texts = [e.data["text"] async for e in again.events() if e.event_type == "message_delta"]
    assert again.status == RunStatus.completed, again.error
    assert "".join(texts) == "Checking.Report: sunny in Oslo"
    cassette.verify()
    assert len(live.requests) == 2  # the replay never called the function


async def test_replay_with_a_changed_prompt_fails_with_the_diff(tmp_path: Path, project: Path) -> None:
    cassette_path = tmp_path / "weather.json"
    async with open_runtime(record(cassette_path, FunctionModel(weather_agent)), project_dir=project) as rt:
        rt.register_tool(WEATHER, weather)
        await (await rt.start("weather in Oslo")).wait()

    cassette = replay(cassette_path)
    async with open_runtime(cassette, project_dir=project) as runtime:
        runtime.register_tool(WEATHER, weather)
        run = await runtime.start("weather in Rome")
        await run.wait()
    assert run.status == RunStatus.failed
    assert run.error is not None and "differs from the recording" in run.error.message
    with pytest.raises(CassetteMismatch) as info:
        cassette.verify()
    diff = str(info.value)
    assert "--- recorded messages" in diff and "+++ actual messages" in diff
    assert "-  weather in Oslo" in diff and "+  weather in Rome" in diff
    assert "recorded system" not in diff  # only what changed is shown


class Forecast(BaseModel):
    city: str
    celsius: int


async def test_structured_output_with_function_model(project: Path) -> None:
    def answer(request: ModelRequest) -> ModelReply:
        if not tool_results(request):
            return ModelReply(tool_calls=[CallTool("demo.weather", {"city": "Lima"})])
        return ModelReply(tool_calls=[CallTool("output", {"city": "Lima", "celsius": 21})])

    async with open_runtime(FunctionModel(answer), project_dir=project) as runtime:
        runtime.register_tool(WEATHER, weather)
        run = await runtime.start("forecast for Lima", output_schema=Forecast)
        assert await run.output() == Forecast(city="Lima", celsius=21)
