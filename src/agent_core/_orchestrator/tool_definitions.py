"""The static definitions of the worker and plan tools (docs/multi-agent.md#worker-pools,
docs/multi-agent.md#agentlist_workers, docs/multi-agent.md#dispatching-a-worker): registered at open without
importing the orchestrator, which loads on the first call (``orchestrator/feature.py``)."""

from __future__ import annotations

from typing import Any

from agent_core.types.tools import ToolDefinition

LIST_WORKERS_TOOL = "agent.list_workers"
DISPATCH_WORKER_TOOL = "agent.dispatch_worker"
PLAN_TEMPLATE_TOOL = "agent.plan_template"
ORCHESTRATOR_TOOL_NAMES = (LIST_WORKERS_TOOL, DISPATCH_WORKER_TOOL, PLAN_TEMPLATE_TOOL)

_STR = {"type": "string"}
_STRINGS = {"type": "array", "items": {"type": "string"}}


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def orchestrator_tool_definitions() -> list[ToolDefinition]:
    """``agent.list_workers``, ``agent.dispatch_worker`` and ``agent.plan_template``."""
    read_tags = ["agent", "internal", "readonly"]
    return [
        ToolDefinition(
            name=LIST_WORKERS_TOOL,
            description="List the workers of the configured worker pools with their definition, suggested "
            "tools and current status (idle/busy/unavailable).",
            input_schema=_obj(
                {"worker_pool_id": {**_STR, "description": "Only this pool (default: every valid pool)."}}, []
            ),
            permission="readonly",
            tags=read_tags,
            metadata={"concurrency": "parallel", "source": "agent"},
        ),
        ToolDefinition(
            name=DISPATCH_WORKER_TOOL,
            description="Start one run of a pool worker for a Task and wait for its result. The worker "
            "claims at most one ready step itself (limit it with allowed_step_ids); the step status in the "
            "Task DAG is authoritative.",
            input_schema=_obj(
                {
                    "task_id": {**_STR, "description": "The Task the worker may see."},
                    "worker_pool_id": {**_STR, "description": "Pool (default pool when omitted)."},
                    "worker_agent_id": {**_STR, "description": "Worker to start (first idle when omitted)."},
                    "allowed_step_ids": {**_STRINGS, "description": "Hard scope of steps it may claim."},
                    "instruction": {**_STR, "minLength": 1, "description": "What the worker should do."},
                    "context": {**_STR, "description": "Everything the worker needs to know."},
                    "constraints": {**_STRINGS, "description": "Rules the worker must follow."},
                    "allowed_tools": {**_STRINGS, "description": "Narrows the worker's tools."},
                    "expected_output_schema": {
                        "type": "object",
                        "description": "JSON Schema (core subset) the worker's final JSON must match.",
                    },
                    "timeout_ms": {"type": "integer", "minimum": 1, "description": "Maximum run time in ms."},
                },
                ["task_id", "instruction"],
            ),
            permission="readonly",
            tags=["agent", "internal"],
            metadata={"concurrency": "agent", "source": "agent"},
        ),
        ToolDefinition(
            name=PLAN_TEMPLATE_TOOL,
            description="Load the plan-writing instructions (for a goal) as a context block for your next "
            "turn and make sure the plan directory exists. Writes no plan; write it with code.write_file.",
            input_schema=_obj(
                {
                    "goal": {**_STR, "description": "The goal to plan (default: the user's request)."},
                    "suggested_dir": {**_STR, "description": "Plan directory inside the project."},
                },
                [],
            ),
            permission="readonly",
            tags=read_tags,
            metadata={"concurrency": "parallel", "source": "agent"},
        ),
    ]
