"""The outcome of one tool call and its terminal event (docs/tools.md): pure builders.

A :class:`CallOutcome` is what the pipeline commits for a call: the :class:`ToolResult` plus how it ended
(``completed`` / ``failed`` / ``denied``) and the event fields. :func:`terminal_event` turns it into the
``tool_completed`` / ``tool_denied`` / ``tool_failed`` event; the other functions answer calls that never
ran (unavailable, skipped after a failed write, aborted by cancellation).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core._redaction import Redactor
from agent_core.errors import ErrorCode
from agent_core.tools._effective import TASK_MUTATORS
from agent_core.tools._normalize import artifact_ids, error_result, normalize_return, result_summary
from agent_core.tools.preflight import Preflight
from agent_core.types import events as ev
from agent_core.types.content import ContentBlock, TextBlock
from agent_core.types.enums import AgentRole
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolResult

SKIP_REASON_WRITE_FAILED = "previous_write_failed"
ABORT_REASON = "run_cancelled"
"""``metadata.abort_reason`` of the results of calls a cancellation aborted or skipped."""


@dataclass(slots=True)
class CallOutcome:
    """The answer to one call, ready to commit."""

    result: ToolResult
    kind: Literal["completed", "failed", "denied"]
    extra: dict[str, Any] = field(default_factory=dict)
    """Event fields beyond the result (``duration_ms``, ``reason``, ``denied_by``, ...)."""
    executed: bool = False
    aborted: bool = False
    call: ToolCall | None = None
    """The validated call (set for executed calls; PostToolUse input)."""
    preflight: Preflight | None = None


def failed(call: ToolCall, code: ErrorCode, message: str, reason: str, **details: Any) -> CallOutcome:
    """A call answered with an error before it ran (``reason`` goes to the ``tool_failed`` event)."""
    result = error_result(call.tool_call_id, call.name, code, message, details=details or None)
    return CallOutcome(result, "failed", {"aborted": False, "reason": reason})


def unavailable(
    call: ToolCall, role: AgentRole | str | None, permission_mode: str = "default"
) -> CallOutcome:
    """A call of a tool that is not in the run's effective set (a worker's Task mutation is a denial)."""
    if role == AgentRole.worker and call.name in TASK_MUTATORS:
        message = f"workers may not call '{call.name}': Task content is modified only by the Orchestrator"
        result = error_result(call.tool_call_id, call.name, ErrorCode.permission_denied, message)
        audit = {
            "decided_by": "policy",
            "decision": "deny",
            "rule": None,
            "reasons": ["worker_role"],
            "permission_mode": permission_mode,
        }
        extra = {
            "denied_by": "permission",
            "reason": message,
            "hook_summary": None,
            "permission_audit": audit,
        }
        return CallOutcome(result, "denied", extra)
    message = f"tool '{call.name}' is not available in this run"
    if permission_mode == "plan":
        message += " (plan mode offers read-only tools only: finish with the plan for the user to approve)"
    return failed(call, ErrorCode.tool_not_available, message, "tool_not_available")


def skipped_after_failed_write(call: ToolCall) -> CallOutcome:
    """A call after a failed ``serial`` call of the same turn (``cancelled`` + ``metadata.skipped``)."""
    result = error_result(
        call.tool_call_id,
        call.name,
        ErrorCode.cancelled,
        "skipped: an earlier write call in this turn failed",
        metadata={"skipped": True, "skip_reason": SKIP_REASON_WRITE_FAILED},
    )
    extra = {"aborted": False, "skipped": True, "reason": SKIP_REASON_WRITE_FAILED}
    return CallOutcome(result, "failed", extra)


def aborted(call: ToolCall, *, started: bool, partial_value: Any = None) -> CallOutcome:
    """A call cancelled with the run: ``aborted`` when its handler had started (with any partial output
    it returned), else ``skipped``."""
    reason = ABORT_REASON
    partial: list[ContentBlock] = []
    has_partial = False
    if partial_value is not None:
        late = normalize_return(partial_value, call.tool_call_id, call.name)
        own_message = late.error.message if late.error is not None else None
        partial = [b for b in late.content if not (isinstance(b, TextBlock) and b.text == own_message)]
        flag = late.metadata.get("partial")
        has_partial = flag if isinstance(flag, bool) else bool(partial)
    metadata: dict[str, Any] = {"aborted": True, "partial": has_partial, "abort_reason": reason}
    extra: dict[str, Any] = {"aborted": True, "reason": reason}
    if started:
        message = f"tool call aborted: {reason}"
    else:
        message = f"tool call skipped: {reason}"
        metadata["skipped"] = True
        extra["skipped"] = True
    result = error_result(
        call.tool_call_id,
        call.name,
        ErrorCode.cancelled,
        message,
        metadata=metadata,
        extra_content=partial,
    )
    return CallOutcome(result, "failed", extra, aborted=True)


def terminal_event(
    tool_name: str,
    result: ToolResult,
    outcome: CallOutcome,
    redactor: Redactor,
    internal: bool | ev.Absent = ev.ABSENT,
) -> ev.ToolResultEvent:
    """The call's ``tool_completed`` / ``tool_denied`` / ``tool_failed`` event (``result`` is redacted)."""
    extra = outcome.extra
    if outcome.kind == "completed":
        return ev.ToolCompleted(
            tool_name=tool_name,
            duration_ms=extra.get("duration_ms", 0),
            summary=result_summary(result),
            artifact_ids=artifact_ids(result),
            internal=internal,
        )
    if outcome.kind == "denied":
        audit = extra.get("permission_audit", ev.ABSENT)  # who decided, and the rule (issue 14 item 10)
        return ev.ToolDenied(
            tool_name=tool_name,
            denied_by=extra["denied_by"],
            reason=redactor.text(str(extra.get("reason") or "")),
            hook_summary=redactor.value(extra.get("hook_summary")),
            permission_audit=redactor.value(audit) if audit is not ev.ABSENT else audit,
            internal=internal,
        )
    return ev.ToolFailed(
        tool_name=tool_name,
        error=result.error.model_dump(mode="json") if result.error is not None else None,
        aborted=extra.get("aborted", False),
        reason=extra.get("reason", ev.ABSENT),
        skipped=extra.get("skipped", ev.ABSENT),
        duration_ms=extra.get("duration_ms", ev.ABSENT),
        internal=internal,
    )
