"""The static definitions of the eleven ``agent.task_*`` tools (docs/task-board.md#status-model): registered
at open without importing the Task DAG, which loads on the first call (``orchestrator/feature.py``)."""

from __future__ import annotations

from typing import Any

from agent_core.types.enums import StepStatus, TaskStatus
from agent_core.types.tools import ToolDefinition

MAX_OPERATIONS = 100
"""At most this many operations in one ``agent.task_update``."""
MAX_PAGE = 200
"""The largest page of ``agent.task_list`` / ``agent.task_query_steps``."""

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
