"""Per-type event levels (docs/events.md#catalogue); visibility and persistence sets live in
``types.enums``."""

from __future__ import annotations

from agent_core.types.enums import EventLevel, EventType

_WARNING = {
    EventType.job_failed,
    EventType.run_cancelled,
    EventType.cancel_timeout,
    EventType.loop_aborted,
    EventType.aborted_streaming,
    EventType.aborted_tools,
    EventType.stop_hook_prevented,
    EventType.tool_failed,
    EventType.tool_denied,
    EventType.permission_failed,
    EventType.hook_failed,
    EventType.hook_denied,
    EventType.worker_dispatch_failed,
    EventType.child_agent_cancelled,
    EventType.child_agent_cancel_timeout,
    EventType.child_agent_failed,
    EventType.child_result_schema_validation_failed,
    EventType.compact_failed,
    EventType.memory_extraction_failed,
    EventType.mcp_server_failed,
    EventType.model_fallback,
    EventType.context_overflow,
}
_ERROR = {EventType.loop_failed, EventType.model_failed, EventType.error, EventType.task_wal_failed}
_DEBUG = {
    EventType.context_built,
    EventType.prompt_cache_break,
    EventType.model_text_delta,
    EventType.tool_call_delta,
    EventType.provider_debug,
    EventType.hook_started,
}


def level_of(event_type: EventType) -> EventLevel:
    """The catalogue level of ``event_type``."""
    if event_type in _ERROR:
        return EventLevel.error
    if event_type in _WARNING:
        return EventLevel.warning
    if event_type in _DEBUG:
        return EventLevel.debug
    return EventLevel.info
