"""The child result contract (docs/multi-agent.md#child-results): structured output, ``ChildAgentResult`` and
the mapping of a child run's end onto the parent's tool result.

* The **structured output** is the child's final assistant text when that whole text is a JSON object,
  otherwise the last fenced ``json`` block when it is one (an invalid last block means no output).
* ``status``: ``cancelled`` for a cancelled run; ``failed`` for a failed or timed-out run or an output
  saying ``"status": "failed"``; otherwise ``completed``. ``summary``: the output's string ``summary``,
  else the final text truncated to 4000 characters (else the run error's message).
* Tool-result errors: a completed run (even with a self-reported ``failed``) is no error; a failed run
  carries the run's error code, a timeout ``timeout``, a cancellation ``cancelled``; a missing output or an
  ``expected_output_schema`` violation is ``schema_error``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from agent_core.errors import ErrorCode
from agent_core.tools._schema import schema_errors
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import RunStatus
from agent_core.types.runtime import ChildAgentResult

SUMMARY_LIMIT = 4000
_FENCE = re.compile(r"```[ \t]*json[ \t]*\r?\n(.*?)```", re.DOTALL | re.IGNORECASE)


def structured_output(text: str) -> dict[str, Any] | None:
    """The JSON object the child ended with, or ``None``."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    blocks = _FENCE.findall(text)
    if not blocks:
        return None
    try:
        value = json.loads(blocks[-1])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def result_status(
    run_status: RunStatus, output: Mapping[str, Any] | None
) -> Literal["completed", "failed", "cancelled"]:
    if run_status == RunStatus.cancelled:
        return "cancelled"
    if run_status != RunStatus.completed:
        return "failed"
    if output is not None and output.get("status") == "failed":
        return "failed"
    return "completed"


def output_artifact_ids(output: Mapping[str, Any] | None) -> list[str]:
    """Artifact ids the structured output lists (``[{artifact_id}]`` items or bare id strings)."""
    if output is None or not isinstance(output.get("artifacts"), list):
        return []
    ids: list[str] = []
    for item in output["artifacts"]:
        value = item.get("artifact_id") if isinstance(item, dict) else item
        if isinstance(value, str) and value and value not in ids:
            ids.append(value)
    return ids


def build_result(
    *,
    run_status: RunStatus,
    final_text: str,
    output: Mapping[str, Any] | None,
    error: ErrorPayload | None,
    artifacts: Sequence[dict[str, Any]],
    metadata: Mapping[str, Any],
    step_id: str | None = None,
) -> ChildAgentResult:
    """Assembles the ``ChildAgentResult`` (``metadata.output`` holds the full structured output)."""
    summary = output.get("summary") if output is not None else None
    if not isinstance(summary, str):
        summary = final_text[:SUMMARY_LIMIT]
        if not summary.strip() and error is not None:
            summary = error.message[:SUMMARY_LIMIT]
    meta = dict(metadata)
    if output is not None:
        meta["output"] = dict(output)
    findings = output.get("findings") if output is not None else None
    actions = output.get("proposed_actions") if output is not None else None
    return ChildAgentResult(
        status=result_status(run_status, output),
        summary=summary,
        findings=list(findings) if isinstance(findings, list) else [],
        artifacts=list(artifacts),
        step_id=step_id,
        proposed_actions=list(actions) if isinstance(actions, list) else [],
        metadata=meta,
    )


def schema_problems(schema: Mapping[str, Any], output: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """Validation errors of ``output`` against ``expected_output_schema`` (``[]`` when it conforms)."""
    if output is None:
        return [{"path": "$", "message": "the child produced no structured JSON output"}]
    return schema_errors(schema, dict(output))


def run_error(
    run_status: RunStatus, error: ErrorPayload | None, *, timed_out: bool, end_reason: str | None
) -> ErrorPayload | None:
    """The parent's tool-result error for a child run that ended (or was abandoned) this way."""
    if timed_out:
        return ErrorPayload(code=ErrorCode.timeout, message="the child run exceeded its timeout_ms")
    if run_status == RunStatus.completed:
        return None
    if run_status == RunStatus.cancelled:
        return ErrorPayload(code=ErrorCode.cancelled, message="the child run was cancelled")
    if run_status == RunStatus.aborted:
        return error or ErrorPayload(code=ErrorCode.cancelled, message="the child run was aborted")
    if error is not None:
        return error
    return ErrorPayload(
        code=ErrorCode.internal_error, message=f"the child run failed (end_reason={end_reason or 'unknown'})"
    )
