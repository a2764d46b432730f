"""Every cross-layer StrEnum (docs/architecture.md#type-layers). Stored as value strings in SQLite, JSON and
the WAL."""

from __future__ import annotations

from enum import StrEnum

from agent_core.errors.codes import ErrorCode


class RunStatus(StrEnum):
    queued = "queued"
    pending = "pending"
    running = "running"
    completed = "completed"
    failed = "failed"
    aborted = "aborted"
    cancelled = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL_RUN


_TERMINAL_RUN = frozenset({RunStatus.completed, RunStatus.failed, RunStatus.aborted, RunStatus.cancelled})


class RunMode(StrEnum):
    normal = "normal"
    orchestrator = "orchestrator"


class EndReason(StrEnum):
    completed = "completed"
    max_turns = "max_turns"
    aborted_streaming = "aborted_streaming"
    aborted_tools = "aborted_tools"
    prompt_too_long = "prompt_too_long"
    max_output_tokens_recovery = "max_output_tokens_recovery"
    failed = "failed"
    limit_reached = "limit_reached"
    loop_detected = "loop_detected"


class SessionStatus(StrEnum):
    active = "active"
    archived = "archived"


class AgentStatus(StrEnum):
    idle = "idle"
    running = "running"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


class AgentType(StrEnum):
    main = "main"
    orchestrator = "orchestrator"
    sub = "sub"
    fork = "fork"


class AgentRole(StrEnum):
    """Tool-policy role of a run (docs/tools.md#effective-tool-sets); wider than :class:`AgentType`."""

    main = "main"
    orchestrator = "orchestrator"
    sub = "sub"
    fork = "fork"
    worker = "worker"
    compact = "compact"


class EventLevel(StrEnum):
    debug = "debug"
    info = "info"
    warning = "warning"
    error = "error"


class EventType(StrEnum):
    run_queued = "run_queued"
    run_dequeued = "run_dequeued"
    run_cancelled = "run_cancelled"
    run_completed = "run_completed"
    cancel_timeout = "cancel_timeout"
    loop_started = "loop_started"
    loop_completed = "loop_completed"
    loop_aborted = "loop_aborted"
    loop_failed = "loop_failed"
    aborted_streaming = "aborted_streaming"
    aborted_tools = "aborted_tools"
    stop_hook_prevented = "stop_hook_prevented"
    context_built = "context_built"
    prompt_cache_break = "prompt_cache_break"
    message_created = "message_created"
    message_delta = "message_delta"
    message_completed = "message_completed"
    model_started = "model_started"
    model_progress = "model_progress"
    model_text_delta = "model_text_delta"
    reasoning_delta = "reasoning_delta"
    tool_call_delta = "tool_call_delta"
    model_completed = "model_completed"
    model_failed = "model_failed"
    model_fallback = "model_fallback"
    context_overflow = "context_overflow"
    provider_debug = "provider_debug"
    tool_started = "tool_started"
    tool_progress = "tool_progress"
    tool_completed = "tool_completed"
    tool_failed = "tool_failed"
    tool_denied = "tool_denied"
    permission_failed = "permission_failed"
    hook_started = "hook_started"
    hook_completed = "hook_completed"
    hook_failed = "hook_failed"
    hook_denied = "hook_denied"
    child_agent_created = "child_agent_created"
    worker_dispatched = "worker_dispatched"
    worker_dispatch_failed = "worker_dispatch_failed"
    child_agent_cancel_requested = "child_agent_cancel_requested"
    child_agent_cancelled = "child_agent_cancelled"
    child_agent_cancel_timeout = "child_agent_cancel_timeout"
    child_agent_completed = "child_agent_completed"
    child_agent_failed = "child_agent_failed"
    child_result_schema_validation_failed = "child_result_schema_validation_failed"
    compact_pending = "compact_pending"
    compact_started = "compact_started"
    compact_completed = "compact_completed"
    compact_failed = "compact_failed"
    memory_extraction_started = "memory_extraction_started"
    memory_extraction_completed = "memory_extraction_completed"
    memory_extraction_failed = "memory_extraction_failed"
    mcp_server_failed = "mcp_server_failed"
    error = "error"
    # Background jobs of offloaded tool calls (docs/jobs-and-schedules.md#background-jobs)
    job_started = "job_started"
    job_completed = "job_completed"
    job_failed = "job_failed"
    # The durable per-agent inbox and teammates (issue 36)
    inbox_delivered = "inbox_delivered"
    inbox_drained = "inbox_drained"
    teammate_spawned = "teammate_spawned"
    teammate_stopped = "teammate_stopped"
    # The 17 WAL-mirroring task events (docs/task-board.md#wal-records)
    task_created = "task_created"
    task_running = "task_running"
    task_updated = "task_updated"
    task_reopened = "task_reopened"
    task_completed = "task_completed"
    task_failed = "task_failed"
    task_cancelled = "task_cancelled"
    task_step_ready = "task_step_ready"
    task_step_claimed = "task_step_claimed"
    task_step_started = "task_step_started"
    task_step_updated = "task_step_updated"
    task_step_blocked = "task_step_blocked"
    task_step_completed = "task_step_completed"
    task_step_failed = "task_step_failed"
    task_step_cancelled = "task_step_cancelled"
    task_step_reopened = "task_step_reopened"
    task_step_lease_expired = "task_step_lease_expired"
    # Task runtime events (never written to a WAL)
    task_step_claim_skipped = "task_step_claim_skipped"
    task_wal_replayed = "task_wal_replayed"
    task_wal_failed = "task_wal_failed"


DEBUG_ONLY_EVENTS: frozenset[EventType] = frozenset(
    {
        EventType.context_built,
        EventType.prompt_cache_break,
        EventType.model_started,
        EventType.model_text_delta,
        EventType.tool_call_delta,
        EventType.model_completed,
        EventType.provider_debug,
        EventType.permission_failed,
        EventType.hook_started,
        EventType.hook_completed,
        EventType.hook_failed,
        EventType.child_agent_cancel_requested,
        EventType.child_agent_cancel_timeout,
        EventType.child_result_schema_validation_failed,
        EventType.compact_pending,
        EventType.compact_started,
        EventType.compact_completed,
        EventType.compact_failed,
        EventType.memory_extraction_started,
        EventType.memory_extraction_completed,
        EventType.memory_extraction_failed,
        EventType.mcp_server_failed,
    }
    | {e for e in EventType if e.value.startswith("task_")}
)
"""Event types delivered only by ``events(debug=True)`` (docs/events.md#catalogue visibility D)."""

TRANSIENT_EVENTS: frozenset[EventType] = frozenset(
    {
        EventType.message_delta,
        EventType.model_text_delta,
        EventType.reasoning_delta,
        EventType.tool_call_delta,
        EventType.provider_debug,
        EventType.tool_progress,
        EventType.model_progress,
    }
)
"""Live-only event types (never persisted by default; ``seq is None``)."""

_TASK_RUNTIME_EVENTS = frozenset(
    {EventType.task_step_claim_skipped, EventType.task_wal_replayed, EventType.task_wal_failed}
)
WAL_EVENT_TYPES: tuple[str, ...] = tuple(
    e.value for e in EventType if e.value.startswith("task_") and e not in _TASK_RUNTIME_EVENTS
)
"""The 17 Task WAL record types in contract order (docs/task-board.md#wal-records); the ``task_*`` events they
mirror."""


class PermissionKind(StrEnum):
    readonly = "readonly"
    write = "write"


class PermissionDecisionKind(StrEnum):
    allow_once = "allow_once"
    allow_for_session = "allow_for_session"
    deny = "deny"


class HookPhase(StrEnum):
    SessionStart = "SessionStart"
    UserPromptSubmit = "UserPromptSubmit"
    PreToolUse = "PreToolUse"
    PostToolUse = "PostToolUse"
    Stop = "Stop"


class ToolKind(StrEnum):
    code = "code"
    mcp = "mcp"
    agent = "agent"
    internal = "internal"
    declarative = "declarative"


class MessageRole(StrEnum):
    system = "system"
    user = "user"
    assistant = "assistant"
    tool = "tool"


class NodeType(StrEnum):
    message = "message"
    skill_context = "skill_context"
    memory_context = "memory_context"
    compaction = "compaction"
    child_result = "child_result"
    plan_instruction = "plan_instruction"
    task_instruction = "task_instruction"
    task_board = "task_board"
    system_note = "system_note"
    instruction_context = "instruction_context"
    hook_context = "hook_context"


class StopReasonKind(StrEnum):
    end_turn = "end_turn"
    tool_use = "tool_use"
    max_tokens = "max_tokens"
    stop_sequence = "stop_sequence"
    content_filter = "content_filter"
    error = "error"


StopReason = StopReasonKind
"""Alias under the docs/architecture.md#type-layers enum name (the protocol model of the same name is in
types.model)."""


class TaskStatus(StrEnum):
    pending = "pending"
    running = "running"
    blocked = "blocked"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


class StepStatus(StrEnum):
    pending = "pending"
    ready = "ready"
    claimed = "claimed"
    running = "running"
    blocked = "blocked"
    completed = "completed"
    failed = "failed"
    cancelled = "cancelled"


class ContentBlockType(StrEnum):
    text = "text"
    json = "json"
    tool_call = "tool_call"
    tool_result = "tool_result"
    artifact_ref = "artifact_ref"


__all__ = [
    "DEBUG_ONLY_EVENTS",
    "TRANSIENT_EVENTS",
    "WAL_EVENT_TYPES",
    "AgentRole",
    "AgentStatus",
    "AgentType",
    "ContentBlockType",
    "EndReason",
    "ErrorCode",
    "EventLevel",
    "EventType",
    "HookPhase",
    "MessageRole",
    "NodeType",
    "PermissionDecisionKind",
    "PermissionKind",
    "RunMode",
    "RunStatus",
    "SessionStatus",
    "StepStatus",
    "StopReason",
    "StopReasonKind",
    "TaskStatus",
    "ToolKind",
]
