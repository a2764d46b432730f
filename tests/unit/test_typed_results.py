"""Typed public results (issue 35 item 3): ``RunHandle[M]`` for ``start(output_schema=M)``, node roles and
types, child and Task statuses as the enums, whichever path (live write or replay) built them."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent_core import AgentRuntime, RunHandle, RunStatus
from agent_core.testing import FunctionModel, open_runtime
from agent_core.types.enums import MessageRole, NodeType, TaskStatus
from agent_core.types.runtime import ChildAgentResult, ChildSummary, Node, TaskInspectView


class Answer(BaseModel):
    city: str


def test_start_is_generic_on_the_output_schema() -> None:
    overloads = typing.get_overloads(AgentRuntime.start)
    returns = [typing.get_type_hints(f)["return"] for f in overloads]
    schemas = [typing.get_type_hints(f)["output_schema"] for f in overloads]
    model_overload = next(r for r, s in zip(returns, schemas, strict=True) if typing.get_origin(s) is type)
    (model_var,) = typing.get_args(model_overload)
    assert typing.get_origin(model_overload) is RunHandle and isinstance(model_var, typing.TypeVar)
    assert model_var.__bound__ is BaseModel
    assert typing.get_args(typing.get_type_hints(RunHandle.output)["return"]) == ()  # OutputT itself
    assert RunHandle.__parameters__ and RunHandle[Answer].__origin__ is RunHandle  # type: ignore[attr-defined]


def test_result_fields_are_the_enums() -> None:
    hints = {
        cls: typing.get_type_hints(cls) for cls in (Node, ChildSummary, TaskInspectView, ChildAgentResult)
    }
    assert hints[Node]["role"] is MessageRole and hints[Node]["node_type"] is NodeType
    assert hints[ChildSummary]["status"] is RunStatus
    assert hints[TaskInspectView]["status"] == TaskStatus | None
    assert set(typing.get_args(hints[ChildAgentResult]["status"])) == {"completed", "failed", "cancelled"}


async def test_roles_are_members_on_the_live_and_the_replay_path(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    model = FunctionModel(lambda request: '{"city": "Oslo"}')
    async with open_runtime(model, project_dir=tmp_path / "p", home_dir=tmp_path / "h") as rt:
        run = await rt.start("where?", output_schema=Answer)
        answer: Answer = await run.output()
        assert answer == Answer(city="Oslo")
        replay = await rt.replay_session(run.session_id)
        path = await rt.get_node_path(replay.nodes[-1].node_id)
    nodes: list[Any] = [*replay.nodes, *path]
    assert nodes and all(type(n.role) is MessageRole and type(n.node_type) is NodeType for n in nodes)
    assert [n.role for n in replay.nodes] == [MessageRole.user, MessageRole.assistant]
    assert all(type(r.status) is RunStatus for r in replay.runs)
