"""Typed public results (issue 35 item 3): ``RunHandle[M]`` for ``start(output_schema=M)``, node roles and
types, agent types and roles, child and Task statuses as the enums, whichever path (live write or replay)
built them."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agent_core import (
    AgentRuntime,
    HookContext,
    PermissionDecision,
    PermissionRequest,
    PreToolUseHook,
    PreToolUseInput,
    RunHandle,
    RunStatus,
)
from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime
from agent_core.types.enums import AgentRole, AgentType, MessageRole, NodeType, RunMode, TaskStatus
from agent_core.types.model import ModelRequest
from agent_core.types.runtime import (
    ChildAgentResult,
    ChildSummary,
    InspectAgent,
    Node,
    RunInfo,
    SyntheticBlockReport,
    TaskInspectView,
)


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
    for cls in (RunInfo, ChildSummary, InspectAgent):
        assert typing.get_type_hints(cls)["agent_type"] == AgentType | None, cls
    assert typing.get_type_hints(SyntheticBlockReport)["source_node_type"] is NodeType
    assert typing.get_type_hints(PermissionRequest)["agent_role"] is AgentRole
    context = typing.get_type_hints(HookContext)
    assert context["agent_role"] is AgentRole and context["mode"] is RunMode


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


async def test_agent_types_and_roles_are_members_where_callers_get_them(tmp_path: Path) -> None:
    """The replayed runs' agent type, the permission request's and the hook context's role and mode."""

    def reply(request: ModelRequest) -> str | ModelReply:
        if not any(m.role == "tool" for m in request.messages):
            call = CallTool("code.write_file", {"path": "a.txt", "content": "x"}, tool_call_id="w1")
            return ModelReply(tool_calls=[call])
        return "written"

    requests: list[PermissionRequest] = []
    contexts: list[HookContext] = []

    async def allow(request: PermissionRequest) -> PermissionDecision:
        requests.append(request)
        return PermissionDecision(decision="allow_once")

    def seen(event: PreToolUseInput) -> None:
        contexts.append(event.context)

    (tmp_path / "p").mkdir()
    async with open_runtime(
        FunctionModel(reply),
        project_dir=tmp_path / "p",
        home_dir=tmp_path / "h",
        permission_callback=allow,
        hooks=[PreToolUseHook(seen)],
    ) as rt:
        run = await rt.start("write it")
        await run.wait()
        replay = await rt.replay_session(run.session_id)
    assert run.status is RunStatus.completed
    assert [type(r.agent_type) for r in replay.runs] == [AgentType]
    assert replay.runs[0].agent_type is AgentType.main
    (request,) = requests
    assert type(request.agent_role) is AgentRole and request.agent_role is AgentRole.main
    (context,) = contexts
    assert context.agent_role is AgentRole.main and context.mode is RunMode.normal
