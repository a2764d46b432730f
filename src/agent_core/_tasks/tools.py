"""The ``agent.task_*`` tools: a :class:`~agent_core.tools.adapter.ToolAdapter` over :class:`TaskService`.

Definitions follow docs/tools.md#built-in-tools and docs/task-board.md#task-tools: permission ``readonly``,
tags ``agent`` + ``internal`` (read tools also ``readonly``), ``metadata.concurrency`` ``parallel`` for reads
and ``serial`` for mutators, input schemas in the core subset with ``additionalProperties: false``. Handlers
derive the caller from ``ctx.scope`` (role, ids, ``task_scope``), emit Task events through ``ctx.sink.emit``
and raise :class:`AgentCoreError` for business errors (the pipeline turns them into error results).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent_core._asset_loader import Asset, AssetLoader
from agent_core._redaction import Redactor, default_redactor
from agent_core._tasks.dag import Actor
from agent_core._tasks.inputs import (
    TaskClaimStepInput,
    TaskCompleteInput,
    TaskCreateInput,
    TaskGetInput,
    TaskListInput,
    TaskQueryStepsInput,
    TaskTemplateInput,
    TaskTerminateInput,
    TaskUpdateInput,
    TaskUpdateStepInput,
    parse_input,
)
from agent_core._tasks.scope import TaskCaller
from agent_core._tasks.service import TaskService
from agent_core._tasks.store import EmitFn
from agent_core._tasks.tool_definitions import task_tool_definitions
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InternalError,
    PermissionDeniedError,
    ToolNotAvailableError,
)
from agent_core.tools.context import ContextNodeDraft, ToolContext
from agent_core.types import events as ev
from agent_core.types.content import JsonBlock, TextBlock
from agent_core.types.enums import AgentRole, MessageRole, NodeType
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

TASK_TEMPLATE_ASSET = "template.task_dag.default"


class TaskServiceSource(Protocol):
    """Gives the (loaded) :class:`TaskService` of a session, e.g. :class:`TaskRegistry`."""

    async def get(self, session_id: str) -> TaskService: ...


def board_session(ctx: ToolContext) -> str:
    """The session whose Task board a call uses: the run's own, or the one its scope names
    (``RunScope.task_session_id``)."""
    return ctx.scope.task_session_id or ctx.session_id


# ------------------------------------------------------------------------------------------ schemas

# ------------------------------------------------------------------------------------------ adapter

_Handler = Callable[[TaskService, TaskCaller, dict[str, Any], EmitFn], Awaitable[dict[str, Any]]]


class TaskToolAdapter:
    """Serves every ``agent.task_*`` tool; one instance per runtime."""

    def __init__(
        self,
        services: TaskServiceSource,
        *,
        template_loader: Callable[[str], Asset] | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self._services = services
        self._load_template = template_loader or AssetLoader().load
        self._redactor = redactor or default_redactor
        self._handlers: dict[str, _Handler] = {
            "agent.task_create": lambda s, c, a, e: s.create_task(c, parse_input(TaskCreateInput, a), emit=e),
            "agent.task_get": lambda s, c, a, e: s.get_task(c, parse_input(TaskGetInput, a), emit=e),
            "agent.task_list": lambda s, c, a, e: s.list_tasks(c, parse_input(TaskListInput, a)),
            "agent.task_update": lambda s, c, a, e: s.update_task(c, parse_input(TaskUpdateInput, a), emit=e),
            "agent.task_query_steps": lambda s, c, a, e: s.query_steps(
                c, parse_input(TaskQueryStepsInput, a), emit=e
            ),
            "agent.task_claim_step": lambda s, c, a, e: s.claim_step(
                c, parse_input(TaskClaimStepInput, a), emit=e
            ),
            "agent.task_update_step": lambda s, c, a, e: s.update_step(
                c, parse_input(TaskUpdateStepInput, a), emit=e
            ),
            "agent.task_complete": lambda s, c, a, e: s.complete_task(
                c, parse_input(TaskCompleteInput, a), emit=e
            ),
            "agent.task_fail": lambda s, c, a, e: s.terminate_task(
                c, parse_input(TaskTerminateInput, a), "failed", emit=e
            ),
            "agent.task_cancel": lambda s, c, a, e: s.terminate_task(
                c, parse_input(TaskTerminateInput, a), "cancelled", emit=e
            ),
        }

    def definitions(self) -> list[ToolDefinition]:
        return task_tool_definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        """Runs one Task tool. Arguments pass the write-time redactor first, so secret values never reach
        a WAL line (ids are unaffected: secrets are long and ids are validated afterwards)."""
        caller = TaskCaller.from_run_scope(ctx.scope)
        call = call.model_copy(update={"arguments": self._redactor.value(call.arguments)})
        if call.name == "agent.task_template":
            data = self._template(call, ctx, caller)
        else:
            handler = self._handlers.get(call.name)
            if handler is None:
                raise ToolNotAvailableError(
                    ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
                )
            service = await self._services.get(board_session(ctx))

            async def emit(event: ev.EventPayload, actor: Actor) -> None:
                await ctx.sink.emit(event, tool_call_id=ctx.tool_call_id)

            data = await handler(service, caller, call.arguments, emit)
        return ToolResult(tool_call_id=call.tool_call_id, tool_name=call.name, content=[JsonBlock(data=data)])

    async def close(self) -> None:
        return None

    def _template(self, call: ToolCall, ctx: ToolContext, caller: TaskCaller) -> dict[str, Any]:
        """``agent.task_template``: a ``task_instruction`` context node; no Task, no WAL
        (docs/context.md#plans-and-task-templates)."""
        inp = parse_input(TaskTemplateInput, call.arguments)
        if caller.role != AgentRole.orchestrator:
            raise PermissionDeniedError(ErrorCode.permission_denied, "only the Orchestrator designs Tasks")
        try:
            asset = self._load_template(TASK_TEMPLATE_ASSET)
        except AgentCoreError as exc:
            raise InternalError(
                ErrorCode.internal_error, f"cannot load {TASK_TEMPLATE_ASSET}: {exc.message}"
            ) from exc
        text = asset.text.rstrip("\n")
        if inp.goal:
            text += f"\n\n## Goal\n\n{inp.goal}\n"
        ctx.add_context_node(
            ContextNodeDraft(
                node_type=NodeType.task_instruction,
                role=MessageRole.user,
                content=[TextBlock(text=text)],
                metadata={
                    "synthetic": True,
                    **asset.template_metadata,
                    "goal": inp.goal,
                    "loaded_by_tool_call_id": ctx.tool_call_id,
                },
            )
        )
        return {**asset.template_metadata, "task_instruction_added": True, "task_created": False}
