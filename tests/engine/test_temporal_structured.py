"""Structured output (``output_schema``, docs/runs.md#structured-output) of a run on the temporal engine: the
worker judges the answers in its model steps as the local loop does (the schema travels in the run row), and
the starting runtime's ``RunHandle.output()`` returns the caller's model instance; events and nodes are the
local engine's for the same script, also when an invalid answer is sent back or the retries run out."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel, Field

from agent_core import AgentCoreError, ErrorCode, RunStatus
from tests.engine.test_temporal_engine import _env, engine_config, stored, worker
from tests.fixtures.fake_provider import FakeProvider, tool_calls
from tests.fixtures.runtime import open_runtime
from tests.fixtures.temporal_server import TemporalServer

pytestmark = pytest.mark.temporal


class City(BaseModel):
    city: str
    population: int = Field(ge=0)


CORRECTED = [{"city": "Oslo", "population": "many"}, {"city": "Oslo", "population": 5}]
SPENT = [{"city": "Oslo"}, {"city": "Oslo", "population": -1}]


def script(answers: list[dict[str, Any]]) -> FakeProvider:
    return FakeProvider(*(tool_calls(("output", a, f"call_o{i}")) for i, a in enumerate(answers, 1)))


async def outcome(rt: Any) -> tuple[Any, Any]:
    run = await rt.start("How big is Oslo?", output_schema=City, output_retries=1)
    try:
        value: Any = await asyncio.wait_for(run.output(), 90)
    except AgentCoreError as exc:
        value = (exc.code, exc.details.get("attempts"), exc.details.get("last_output"))
    return run, value


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (CORRECTED, City(city="Oslo", population=5)),
        (SPENT, (ErrorCode.validation_error, 2, {"city": "Oslo", "population": -1})),
    ],
    ids=["corrected", "retries_spent"],
)
async def test_a_run_with_an_output_schema_matches_the_local_engine(
    tmp_path: Any,
    temporal_server: TemporalServer,
    monkeypatch: pytest.MonkeyPatch,
    answers: list[dict[str, Any]],
    expected: Any,
) -> None:
    local_env = _env(tmp_path / "local", monkeypatch)
    async with open_runtime(local_env, script(answers)) as rt:
        local_run, local_value = await outcome(rt)
    assert local_value == expected

    env = _env(tmp_path / "temporal", monkeypatch)
    env.write_config(**engine_config(temporal_server))
    async with worker(env, script(answers), lambda _rt: None):
        async with open_runtime(env, FakeProvider(), write_config=False) as rt:
            run, value = await outcome(rt)
    assert value == expected
    assert (run.status, run.end_reason) == (local_run.status, local_run.end_reason)
    assert run.status == (RunStatus.completed if answers is CORRECTED else RunStatus.failed)
    assert stored(env, run.session_id) == stored(local_env, local_run.session_id)
