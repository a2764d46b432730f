"""``agent.list_workers``, ``agent.dispatch_worker`` and ``agent.plan_template``
(docs/multi-agent.md#agent-tools, docs/tools.md#built-in-tools, docs/context.md#plans-and-task-templates).

Definitions: permission ``readonly``; ``agent.list_workers`` and ``agent.plan_template`` are tagged
``agent`` + ``internal`` + ``readonly`` and run ``parallel``; ``agent.dispatch_worker`` is tagged ``agent``
+ ``internal`` with concurrency ``agent``. Input schemas forbid extra keys. Role checks repeat the effective
set (defense in depth): worker tools are Orchestrator-only, the plan tool is main/Orchestrator only; any
other caller gets ``tool_not_available``.

``agent.plan_template(goal?, suggested_dir?)`` loads ``template.plan.<plan.template_name>``, adds the goal
(default: the text of the run's root user message) and the suggested directory (default
``plan.default_dir``; a given one is resolved against ``<project>`` and must stay inside it), creates that
directory when missing, buffers one ``plan_instruction`` context node (metadata ``synthetic``,
``template_id``, ``template_version``, ``suggested_dir``, ``loaded_by_tool_call_id``) and returns
``{template_id, template_version, suggested_dir, plan_created: false}``. It never writes a plan file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import Field

from agent_core._orchestrator.dispatch import WorkerDispatcher
from agent_core._orchestrator.tool_definitions import (
    DISPATCH_WORKER_TOOL,
    LIST_WORKERS_TOOL,
    PLAN_TEMPLATE_TOOL,
    orchestrator_tool_definitions,
)
from agent_core._runtime.runs import RunManager
from agent_core._tasks.inputs import parse_input
from agent_core.errors import (
    ErrorCode,
    InvalidArgumentError,
    StorageError,
    ToolError,
    ToolNotAvailableError,
)
from agent_core.tools._paths import project_side_dir
from agent_core.tools.context import ContextNodeDraft, ToolContext
from agent_core.types.base import StrictModel
from agent_core.types.content import TextBlock, text_of
from agent_core.types.enums import AgentRole, MessageRole, NodeType
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition


class _ListWorkersInput(StrictModel):
    worker_pool_id: str | None = None


class _PlanTemplateInput(StrictModel):
    goal: str | None = None
    suggested_dir: str | None = Field(default=None, min_length=1)


def _not_available(name: str) -> ToolError:
    return ToolNotAvailableError(ErrorCode.tool_not_available, f"tool '{name}' is not available in this run")


class OrchestratorToolAdapter:
    """:class:`~agent_core.tools.adapter.ToolAdapter` for the worker tools and the plan tool."""

    def __init__(self, manager: RunManager, dispatcher: WorkerDispatcher) -> None:
        self.manager = manager
        self.dispatcher = dispatcher

    def definitions(self) -> list[ToolDefinition]:
        return orchestrator_tool_definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        role = ctx.scope.agent_role
        if call.name == PLAN_TEMPLATE_TOOL and role in (AgentRole.main, AgentRole.orchestrator):
            return self._plan_template(call, ctx)
        if role != AgentRole.orchestrator or call.name not in (LIST_WORKERS_TOOL, DISPATCH_WORKER_TOOL):
            raise _not_available(call.name)
        if call.name == LIST_WORKERS_TOOL:
            inp = parse_input(_ListWorkersInput, call.arguments)
            return self.dispatcher.list_workers(ctx.session_id, inp.worker_pool_id)
        return await self.dispatcher.dispatch(call, ctx)

    async def close(self) -> None:
        await self.dispatcher.close()

    # ---- agent.plan_template ------------------------------------------------------------------
    def _plan_template(self, call: ToolCall, ctx: ToolContext) -> dict[str, Any]:
        inp = parse_input(_PlanTemplateInput, call.arguments)
        services = self.manager.services
        settings = services.settings
        project = Path(os.path.normpath(services.config.project))
        if inp.suggested_dir is not None:
            raw = Path(inp.suggested_dir).expanduser()
            candidate = Path(os.path.normpath(raw if raw.is_absolute() else project / raw))
            if candidate != project and project not in candidate.parents:
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"suggested_dir must lie inside the project ({project})",
                    details={"suggested_dir": inp.suggested_dir},
                )
            config_key = None
        else:
            candidate = Path(os.path.normpath(settings.plan.default_dir))
            config_key = "plan.default_dir"
        try:
            # resolved and created without following a link out of the project (issue 14 item 2)
            target = project_side_dir(candidate, project, purpose="plan directory", config_key=config_key)
        except OSError as exc:
            raise StorageError(
                ErrorCode.storage_error, f"cannot create the plan directory {candidate}: {exc}"
            ) from exc
        asset = services.assets.template(settings.plan.template_name)
        goal = inp.goal if inp.goal is not None and inp.goal.strip() else self._root_message(ctx)
        sections = [asset.text.rstrip("\n")]
        if goal:
            sections.append(f"## Goal\n\n{goal}")
        sections.append(
            f"## Suggested plan directory\n\n{target}\n\nWrite the plan as a new Markdown file in this "
            "directory, named after its content."
        )
        ctx.add_context_node(
            ContextNodeDraft(
                node_type=NodeType.plan_instruction,
                role=MessageRole.user,
                content=[TextBlock(text="\n\n".join(sections) + "\n")],
                metadata={
                    "synthetic": True,
                    **asset.template_metadata,
                    "goal": goal,
                    "suggested_dir": str(target),
                    "loaded_by_tool_call_id": ctx.tool_call_id,
                },
            )
        )
        return {**asset.template_metadata, "suggested_dir": str(target), "plan_created": False}

    def _root_message(self, ctx: ToolContext) -> str | None:
        state = self.manager.runs.get(ctx.run_id)
        while state is not None and state.parent is not None:
            state = state.parent
        if state is None or state.message is None:
            return None
        return text_of(state.message.content) or None
