"""``AgentRuntime.start(model_profile=..., max_turns=...)`` (issue 37 item 5, the SDK side of ``run
--model`` / ``--max-turns``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core import AgentCoreError
from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime
from agent_core.types.model import ModelRequest


def always_list(request: ModelRequest) -> ModelReply:
    return ModelReply(tool_calls=[CallTool("code.list_dir", {"path": "."})])


async def test_max_turns_ends_the_run_after_that_many_model_turns(tmp_path: Path) -> None:
    model = FunctionModel(always_list)
    async with open_runtime(model, project_dir=tmp_path) as rt:
        run = await rt.start("go", max_turns=2)
        await run.wait()
        replay = await rt.replay_run(run.run_id)
    assert run.end_reason is not None and run.end_reason.value == "max_turns"
    assert len(model.requests) == 2
    started = [e for e in replay.events if e.event_type.value == "loop_started"]
    assert started[0].payload["max_turns"] == 2


async def test_model_profile_overlays_the_named_table(tmp_path: Path) -> None:
    model = FunctionModel(lambda request: "ok")
    config = {"model_overrides": {"quick": {"name": "other-name", "max_output_tokens": 123}}}
    async with open_runtime(model, project_dir=tmp_path, config=config) as rt:
        run = await rt.start("go", model_profile="quick")
        await run.wait()
    assert run.status.value == "completed"
    assert model.requests[0].model == "other-name" and model.requests[0].max_output_tokens == 123


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"model_profile": "missing"}, "config_error"),
        ({"max_turns": 0}, "validation_error"),
        ({"max_turns": True}, "validation_error"),
    ],
)
async def test_bad_run_options_are_refused_before_a_run_exists(
    tmp_path: Path, kwargs: dict[str, object], code: str
) -> None:
    model = FunctionModel(lambda request: "ok")
    async with open_runtime(model, project_dir=tmp_path) as rt:
        with pytest.raises(AgentCoreError) as caught:
            await rt.start("go", **kwargs)  # type: ignore[arg-type]
        assert await rt.list_sessions() == []
    assert caught.value.code.value == code
    assert model.requests == []
