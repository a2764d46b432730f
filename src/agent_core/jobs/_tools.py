"""``internal.job_status`` and ``internal.job_cancel`` (docs/jobs-and-schedules.md#background-jobs);
registered only with offload on."""

from __future__ import annotations

from typing import Any

from agent_core.errors import ErrorCode, InvalidArgumentError
from agent_core.jobs._manager import JobManager
from agent_core.tools.context import ToolContext
from agent_core.types.content import JsonBlock
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "job_id": {"type": "string", "description": "The id from the background job placeholder."}
    },
    "required": ["job_id"],
    "additionalProperties": False,
}

JOB_STATUS = ToolDefinition(
    name="internal.job_status",
    description="Status of a background job of this session (running, completed, failed, cancelled), with a "
    "preview of its result and the artifact holding the whole result once it ended.",
    input_schema=_SCHEMA,
    permission="readonly",
    tags=["internal", "readonly"],
    metadata={"concurrency": "parallel", "source": "internal"},
)
JOB_CANCEL = ToolDefinition(
    name="internal.job_cancel",
    description="Cancel a running background job of this session (its process tree is killed).",
    input_schema=_SCHEMA,
    permission="readonly",
    tags=["internal"],
    metadata={"concurrency": "parallel", "source": "internal"},
)


class JobToolsAdapter:
    """Serves the two job tools; closing it cancels every live job (runtime close)."""

    def __init__(self, jobs: JobManager) -> None:
        self.jobs = jobs

    def definitions(self) -> list[ToolDefinition]:
        return [JOB_STATUS, JOB_CANCEL]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        job_id = call.arguments.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            raise InvalidArgumentError(ErrorCode.validation_error, "job_id must be a non-empty string")
        if call.name == JOB_STATUS.name:
            data = await self.jobs.status(job_id, ctx.session_id)
        else:
            data = await self.jobs.cancel(job_id, ctx.session_id)
        return ToolResult(tool_call_id=call.tool_call_id, tool_name=call.name, content=[JsonBlock(data=data)])

    async def close(self) -> None:
        await self.jobs.close()
