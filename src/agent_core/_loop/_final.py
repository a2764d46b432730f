"""The nodes a limit or a detected loop adds to a run: runtime notes and results of calls that never ran.

Both keep the session well-formed: a runtime note is a synthetic ``system_note`` user node (like a Stop
hook's), and every tool call of a persisted assistant node gets exactly one ``tool_result`` even when the
budget stops it from running (``is_error=true``, ``error.details.limit`` names the limit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_core._loop._limits import Breach
from agent_core._loop.recorder import RunRecorder
from agent_core.errors import ErrorCode
from agent_core.tools._normalize import error_result
from agent_core.types import events as ev
from agent_core.types.content import TextBlock
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.model import ToolCall


async def write_runtime_note(rec: RunRecorder, text: str, *, source: str, **metadata: Any) -> None:
    """Appends a runtime note to the run's path; the next request carries it to the model."""
    await rec.write_node(
        role=MessageRole.user,
        node_type=NodeType.system_note,
        content=[TextBlock(text=text)],
        metadata={"synthetic": True, "source": source, **metadata},
    )


async def skip_tool_calls(rec: RunRecorder, calls: Sequence[ToolCall], breach: Breach) -> None:
    """Closes calls the budget does not run: one error result and one ``tool_failed`` event each."""
    error = breach.error()
    for call in calls:
        result = error_result(
            call.tool_call_id,
            call.name,
            ErrorCode.validation_error,
            f"not run: {error.message}",
            error_type=breach.end_reason.value,
            details=dict(error.details),
            metadata={"skipped": True},
        )
        event = ev.ToolFailed(
            tool_name=call.name,
            error=result.error.model_dump(mode="json") if result.error else None,
            reason=breach.end_reason.value,
        )
        await rec.commit_tool_result(result, event=event)
