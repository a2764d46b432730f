"""The ``agent.task_*`` tools: a :class:`~agent_core.tools.adapter.ToolAdapter` over :class:`TaskService`.

Definitions follow tools.md §10 and contract.md §6.2: permission ``readonly``, tags ``agent`` + ``internal``
(read tools also ``readonly``), ``metadata.concurrency`` ``parallel`` for reads and ``serial`` for mutators,
input schemas in the core subset with ``additionalProperties: false``. Handlers derive the caller from
``ctx.scope`` (role, ids, ``extras["task_scope"]``), emit Task events through ``ctx.sink.emit`` and raise
:class:`AgentCoreError` for business errors (the pipeline turns them into error results).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from agent_core.assets.loader import Asset, AssetLoader
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.redaction import Redactor, default_redactor
from agent_core.tasks.dag import Actor
from agent_core.tasks.inputs import (
    MAX_OPERATIONS,
    MAX_PAGE,
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
from agent_core.tasks.scope import TaskCaller
from agent_core.tasks.service import TaskService
from agent_core.tasks.store import EmitFn
from agent_core.tools.context import ContextNodeDraft, ToolContext
from agent_core.types.content import JsonBlock, TextBlock
from agent_core.types.enums import AgentRole, EventType, MessageRole, NodeType, StepStatus, TaskStatus
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

TASK_TEMPLATE_ASSET = "template.task_dag.default"
READ_TOOLS = ("agent.task_template", "agent.task_get", "agent.task_list", "agent.task_query_steps")
WRITE_TOOLS = (
    "agent.task_create",
    "agent.task_update",
    "agent.task_claim_step",
    "agent.task_update_step",
    "agent.task_complete",
    "agent.task_fail",
    "agent.task_cancel",
)
TASK_TOOL_NAMES = READ_TOOLS + WRITE_TOOLS


class TaskServiceSource(Protocol):
    """Gives the (loaded) :class:`TaskService` of a session, e.g. :class:`TaskRegistry`."""

    async def get(self, session_id: str) -> TaskService: ...


# ------------------------------------------------------------------------------------------ schemas

_STR = {"type": "string"}
_ID = {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"}
_IDS = {"type": "array", "items": _ID}
_BOOL = {"type": "boolean"}


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_STEP = _obj(
    {
        "step_id": {**_ID, "description": "Model-chosen id, unique within the Task."},
        "title": {**_STR, "minLength": 1},
        "summary": {**_STR, "minLength": 1},
        "depends_on_step_ids": {**_IDS, "description": "Steps that must be completed first ([] for none)."},
        "required": {**_BOOL, "description": "Default true; optional steps do not block completion."},
        "worker_pool_id": {**_STR, "description": "Worker pool; omit for the default pool."},
    },
    ["step_id", "title", "summary", "depends_on_step_ids"],
)
_OPERATION = _obj(
    {
        "op": {
            "type": "string",
            "enum": [
                "update_task",
                "add_step",
                "update_step",
                "delete_step",
                "add_dependency",
                "remove_dependency",
                "cancel_step",
                "reopen_step",
            ],
        },
        "step_id": _ID,
        "title": {**_STR, "minLength": 1},
        "summary": {**_STR, "minLength": 1},
        "status": {"type": "string", "enum": ["blocked", "pending"]},
        "reason": _STR,
        "step": _STEP,
        "required": _BOOL,
        "worker_pool_id": _STR,
        "fields": {
            "type": "object",
            "properties": {
                "title": {**_STR, "minLength": 1},
                "summary": {**_STR, "minLength": 1},
                "depends_on_step_ids": _IDS,
                "required": _BOOL,
                "worker_pool_id": _STR,
            },
            "additionalProperties": False,
        },
        "depends_on_step_id": _ID,
    },
    ["op"],
)
_PAGE = {
    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
    "offset": {"type": "integer", "minimum": 0},
}
_STEP_STATUSES = [s.value for s in StepStatus]

_SPECS: dict[str, tuple[str, dict[str, Any]]] = {
    "agent.task_template": (
        "Load the Task DAG design instructions (optionally for a goal) as a context block for your next "
        "turn. Creates no Task.",
        _obj({"goal": _STR}, []),
    ),
    "agent.task_create": (
        "Create a Task DAG with its steps and bind it to a new WAL file <wal_name>.wal.jsonl.",
        _obj(
            {
                "task_id": _ID,
                "wal_name": {**_STR, "description": "File base name: 1-64 of a-z 0-9 - _."},
                "title": {**_STR, "minLength": 1},
                "summary": {**_STR, "minLength": 1},
                "steps": {"type": "array", "items": _STEP, "minItems": 1},
            },
            ["task_id", "wal_name", "title", "summary", "steps"],
        ),
    ),
    "agent.task_get": (
        "Read one Task with its steps (closed steps only when include_terminal_steps is true).",
        _obj({"task_id": _ID, "include_terminal_steps": _BOOL}, ["task_id"]),
    ),
    "agent.task_list": (
        "List Task summaries of this session (active Tasks; terminal ones with include_terminal).",
        _obj(
            {
                "status": {"type": "string", "enum": [s.value for s in TaskStatus]},
                "include_terminal": _BOOL,
                **_PAGE,
            },
            [],
        ),
    ),
    "agent.task_update": (
        "Change Task content or DAG topology with an ordered, atomic list of patch operations.",
        _obj(
            {
                "task_id": _ID,
                "operations": {
                    "type": "array",
                    "items": _OPERATION,
                    "minItems": 1,
                    "maxItems": MAX_OPERATIONS,
                },
            },
            ["task_id", "operations"],
        ),
    ),
    "agent.task_query_steps": (
        "Query steps of a Task by status, pool or claimer, ordered by creation time.",
        _obj(
            {
                "task_id": _ID,
                "statuses": {"type": "array", "items": {"type": "string", "enum": _STEP_STATUSES}},
                "worker_pool_id": _STR,
                "claimed_by_agent_id": _STR,
                "include_terminal_steps": _BOOL,
                **_PAGE,
            },
            ["task_id"],
        ),
    ),
    "agent.task_claim_step": (
        "Claim one ready step of your dispatch Task for this run (at most one claim per run).",
        _obj({"task_id": _ID, "step_id": _ID}, ["task_id", "step_id"]),
    ),
    "agent.task_update_step": (
        "Update the execution status and results of a step (never its content).",
        _obj(
            {
                "task_id": _ID,
                "step_id": _ID,
                "status": {"type": "string", "enum": [s for s in _STEP_STATUSES if s != "ready"]},
                "result_summary": _STR,
                "artifact_ids": {"type": "array", "items": _STR},
                "reason": _STR,
            },
            ["task_id", "step_id"],
        ),
    ),
    "agent.task_complete": (
        "Complete a Task once every required step is completed.",
        _obj({"task_id": _ID, "result_summary": _STR}, ["task_id"]),
    ),
    "agent.task_fail": (
        "Fail the whole Task: cancels its workers and fails every unfinished step.",
        _obj({"task_id": _ID, "reason": _STR}, ["task_id"]),
    ),
    "agent.task_cancel": (
        "Cancel the whole Task: cancels its workers and cancels every unfinished step.",
        _obj({"task_id": _ID, "reason": _STR}, ["task_id"]),
    ),
}


def task_tool_definitions() -> list[ToolDefinition]:
    """The eleven Task tool definitions (no ``agent.task_archive`` / ``agent.task_delete`` exists)."""
    out: list[ToolDefinition] = []
    for name in TASK_TOOL_NAMES:
        description, schema = _SPECS[name]
        read = name in READ_TOOLS
        out.append(
            ToolDefinition(
                name=name,
                description=description,
                input_schema=schema,
                permission="readonly",
                tags=["agent", "internal", "readonly"] if read else ["agent", "internal"],
                metadata={"concurrency": "parallel" if read else "serial", "source": "agent"},
            )
        )
    return out


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
                raise AgentCoreError(
                    ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
                )
            service = await self._services.get(ctx.session_id)

            async def emit(event_type: EventType, payload: dict[str, Any], actor: Actor) -> None:
                await ctx.sink.emit(event_type, payload, tool_call_id=ctx.tool_call_id)

            data = await handler(service, caller, call.arguments, emit)
        return ToolResult(tool_call_id=call.tool_call_id, tool_name=call.name, content=[JsonBlock(data=data)])

    async def close(self) -> None:
        return None

    def _template(self, call: ToolCall, ctx: ToolContext, caller: TaskCaller) -> dict[str, Any]:
        """``agent.task_template``: a ``task_instruction`` context node; no Task, no WAL (context.md §12)."""
        inp = parse_input(TaskTemplateInput, call.arguments)
        if caller.role != AgentRole.orchestrator:
            raise AgentCoreError(ErrorCode.permission_denied, "only the Orchestrator designs Tasks")
        try:
            asset = self._load_template(TASK_TEMPLATE_ASSET)
        except AgentCoreError as exc:
            raise AgentCoreError(
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
