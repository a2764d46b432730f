"""Redacted replay (docs/runs.md#replay-and-inspect): the captured output of hook events is replaced by a
marker; other events read with their keys masked already are kept as they are."""

from __future__ import annotations

from agent_core._api.replay import _redacted
from agent_core._redaction import REDACTED
from agent_core.types.enums import EventType
from agent_core.types.runtime import ReplayResult, RuntimeEvent


def _event(event_type: EventType, **payload: object) -> RuntimeEvent:
    return RuntimeEvent(
        event_id=f"evt_{event_type.value}", session_id="sess_1", event_type=event_type, payload=payload
    )


def test_hook_output_is_masked_and_other_events_are_kept() -> None:
    plain = _event(EventType.tool_completed, tool_name="x", stderr_summary="kept")
    failed = _event(EventType.hook_failed, phase="PreToolUse", stderr_summary="boom", logs="l")
    completed = _event(EventType.hook_completed, stdout_summary="out", reason="fine")
    result = ReplayResult(session_id="sess_1", events=[plain, failed, completed])
    events = _redacted(result, keys_masked=True).events
    assert events[0] is plain and plain.data["stderr_summary"] == "kept"
    assert events[1].data == {"phase": "PreToolUse", "stderr_summary": REDACTED, "logs": REDACTED}
    assert events[2].data == {"stdout_summary": REDACTED, "reason": "fine"}
    unmasked = _redacted(ReplayResult(session_id="sess_1", events=[plain, failed]), keys_masked=False)
    assert unmasked.events[1].data["stderr_summary"] == REDACTED


def test_without_hook_events_the_events_are_unchanged() -> None:
    events = [
        _event(EventType.tool_completed, tool_name="x", stderr_summary="s"),
        _event(EventType.loop_started),
    ]
    result = _redacted(ReplayResult(session_id="sess_1", events=events), keys_masked=True)
    assert result.events == events and all(a is b for a, b in zip(result.events, events, strict=True))
