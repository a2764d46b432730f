"""Unit checks of the testing kit's pieces (docs/testing.md#testing-your-agents): argument generation, request
normalisation and diffs, cassette files, open_runtime guards, FunctionModel returns, structured-output
parsing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_core import AgentCoreError, ConfigError, ErrorCode, RunStatus, SchemaError
from agent_core._loop._output import OutputSchema, parse_text
from agent_core.testing import (
    CassetteMismatch,
    FunctionModel,
    ModelRequest,
    TestModel,
    example_value,
    normalise_request,
    open_runtime,
    record,
    replay,
)
from agent_core.testing._cassette import request_diff
from agent_core.tools._schema import schema_errors
from agent_core.types.content import TextBlock
from agent_core.types.model import ModelMessage, SystemBlock

SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 3, "maximum": 9}},
        "required": ["n"],
    },
    {"type": "object", "properties": {"x": {"type": "number", "exclusiveMinimum": 0.5}}},
    {"type": "object", "properties": {"s": {"type": "string", "minLength": 4}, "e": {"enum": ["b", "c"]}}},
    {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "boolean"}, "minItems": 2}}},
    {"type": "object", "properties": {"o": {"type": "object", "properties": {"d": {"type": "string"}}}}},
    {"type": "object", "properties": {"p": {"type": "string", "pattern": "^z+$", "examples": ["zz"]}}},
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_example_values_are_schema_valid(schema: dict[str, Any]) -> None:
    value = example_value(schema)
    assert schema_errors(schema, value) == []


def test_example_value_refuses_a_pattern_it_cannot_satisfy() -> None:
    with pytest.raises(AgentCoreError) as info:
        example_value({"type": "string", "pattern": "^[0-9]+$"})
    assert info.value.code == ErrorCode.validation_error


def _request(
    user: str, project: str = "/p/one", run: str = "run_20260101_000000_0123456789ab"
) -> ModelRequest:
    state = f"<runtime_state>\nproject_dir: {project}\nrun_id: {run}\ncurrent_date_utc: 2026-01-01\n</runtime_state>"
    return ModelRequest(
        model="m",
        system=[
            SystemBlock(block_id="core", source="core", content="be nice"),
            SystemBlock(block_id="runtime_state", source="rs", content=state, dynamic=True),
        ],
        messages=[
            ModelMessage(role="user", content=[TextBlock(text=user)], metadata={"source_node_id": run})
        ],
    )


def test_normalisation_masks_ids_paths_and_dates() -> None:
    a = normalise_request(_request("hi"))
    b = normalise_request(_request("hi", project="/elsewhere", run="run_20270202_111111_ba9876543210"))
    assert a == b
    assert request_diff(a, b) == ""
    changed = request_diff(a, normalise_request(_request("bye")))
    assert "--- recorded messages" in changed and "-  hi" in changed and "+  bye" in changed
    assert "system" not in changed


def test_diff_names_a_changed_system_prompt() -> None:
    a = normalise_request(_request("hi"))
    other = _request("hi")
    other.system[0] = SystemBlock(block_id="core", source="core", content="be terse")
    diff = request_diff(a, normalise_request(other))
    assert "--- recorded system" in diff and "-be nice" in diff and "+be terse" in diff


def test_replay_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(AgentCoreError, match="cannot read cassette"):
        replay(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "provider_key": "testing", "interactions": [{"x": 1}]}))
    with pytest.raises(AgentCoreError, match="invalid cassette"):
        replay(bad)
    bad.write_text("{")
    with pytest.raises(AgentCoreError) as info:
        replay(bad)
    assert info.value.code == ErrorCode.validation_error


async def test_extra_and_unused_calls_fail_verify(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    path = tmp_path / "c.json"
    async with open_runtime(record(path, FunctionModel(lambda r: "one")), project_dir=project) as rt:
        await (await rt.start("a")).wait()
        await (await rt.start("b")).wait()
    unused = replay(path)
    async with open_runtime(unused, project_dir=project) as rt:
        run = await rt.start("a")
        await run.wait()
    assert run.status == RunStatus.completed
    with pytest.raises(CassetteMismatch, match="1 recorded model call"):
        unused.verify()
    extra = replay(path)
    async with open_runtime(extra, project_dir=project) as rt:
        for text in ("a", "b", "c"):
            run = await rt.start(text, session_id=None)
            await run.wait()
    assert run.status == RunStatus.failed
    with pytest.raises(CassetteMismatch, match="model call #3 was not recorded"):
        extra.verify()


async def test_open_runtime_refuses_an_existing_config(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("[model]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="already exists"):
        async with open_runtime(TestModel(), project_dir=tmp_path, home_dir=tmp_path):
            pass
    assert (tmp_path / "config.toml").read_text(encoding="utf-8") == "[model]\n"


async def test_function_model_bad_return_fails_the_run(tmp_path: Path) -> None:
    async with open_runtime(FunctionModel(lambda r: 42), project_dir=tmp_path) as rt:  # type: ignore[arg-type,return-value]
        run = await rt.start("x")
        await run.wait()
    assert run.status == RunStatus.failed and run.error is not None
    assert "expected str or ModelReply" in run.error.message


async def test_async_function_model(tmp_path: Path) -> None:
    async def reply(request: ModelRequest) -> str:
        return "async hi"

    async with open_runtime(FunctionModel(reply), project_dir=tmp_path) as rt:
        run = await rt.start("x")
        await run.wait()
    assert run.status == RunStatus.completed


class Pair(BaseModel):
    a: int
    b: list[str]


def test_output_schema_validation_and_text_parsing() -> None:
    schema = OutputSchema(Pair)
    value, errors = schema.validate({"a": "x", "b": [1]})
    assert value is None and {e["path"] for e in errors} == {"$.a", "$.b[0]"}
    assert schema.validate({"a": 1, "b": ["y"]})[0] == Pair(a=1, b=["y"])
    assert parse_text('```json\n{"a": 1}\n```') == ({"a": 1}, None)
    assert parse_text("nope")[1] is not None and parse_text("  ")[1] is not None
    with pytest.raises(SchemaError):
        OutputSchema({"type": "string"})  # the root must be an object (core subset)
    with pytest.raises(AgentCoreError):
        OutputSchema(42)  # type: ignore[arg-type]


async def test_output_call_mixed_with_other_tools_is_not_the_answer(tmp_path: Path) -> None:
    from agent_core.testing import CallTool, ModelReply, tool_results

    def reply(request: ModelRequest) -> ModelReply | str:
        if "second" in request.messages[-1].model_dump_json():
            return "plain answer"  # a later run of the same session, without output_schema
        results = tool_results(request)
        if not results:
            return ModelReply(
                tool_calls=[CallTool("code.list_dir", {"path": "."}), CallTool("output", {"a": 1, "b": []})]
            )
        return ModelReply(tool_calls=[CallTool("output", {"a": 2, "b": ["z"]})])

    model = FunctionModel(reply)
    async with open_runtime(model, project_dir=tmp_path) as rt:
        run = await rt.start("first", output_schema=Pair)
        assert await run.output() == Pair(a=2, b=["z"])
        follow = await rt.start("second", session_id=run.session_id)
        await follow.wait()
    assert follow.status == RunStatus.completed, follow.error
    mixed = tool_results(model.requests[1])
    assert len(mixed) == 2 and any("not available" in text for text in mixed.values())
    # the history the next run sends answers every call, the accepted output call included
    calls = [b for m in model.requests[2].messages for b in m.content if b.type == "tool_call"]
    answered = {
        b.tool_call_id for m in model.requests[2].messages for b in m.content if b.type == "tool_result"
    }
    assert {c.tool_call_id for c in calls} == answered  # type: ignore[attr-defined]


async def test_output_in_the_limits_final_answer_call(tmp_path: Path) -> None:
    """A tool-call limit ends tool use; the final no-tools call may still answer through ``output``."""
    from agent_core.testing import CallTool, ModelReply

    def reply(request: ModelRequest) -> ModelReply:
        names = {t.name for t in request.tools}
        if names == {"output"}:  # the final call: only the output contract is left
            return ModelReply(tool_calls=[CallTool("output", {"a": 7, "b": []})])
        return ModelReply(tool_calls=[CallTool("code.list_dir", {"path": "."})])

    model = FunctionModel(reply)
    config = {"limits": {"max_tool_calls": 1, "repeat_tool_call_limit": 5}}
    async with open_runtime(model, project_dir=tmp_path, config=config) as rt:
        run = await rt.start("go", output_schema=Pair)
        await run.wait()
    assert [t.name for t in model.requests[-1].tools] == ["output"]
    assert run.status == RunStatus.completed, run.error
    assert await run.output() == Pair(a=7, b=[])


def test_public_surface_of_the_kit_and_cold_start() -> None:
    import subprocess
    import sys

    import agent_core.testing as kit

    assert set(kit.__all__) <= set(vars(kit)), "every exported name exists"
    for name in ("FunctionModel", "TestModel", "ScriptedServer", "record", "replay", "open_runtime"):
        assert name in kit.__all__
    code = "import sys, agent_core; print('agent_core.testing' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"  # importing agent_core does not pull the kit in
