"""One typed payload per :class:`EventType` (runtime.md §9.7): the only way events are built.

Each class is a frozen dataclass naming its ``event_type``; :meth:`EventPayload.to_payload` gives the
``RuntimeEvent.payload`` mapping, with the keys in field order. A field whose value is :data:`ABSENT` is
left out of the mapping (a key some emitters add and others do not); ``None`` is written as ``null``.
Values are already JSON-shaped (dumped errors, usage records): building a payload validates nothing, so the
per-delta path costs one small object. :data:`PAYLOAD_MODELS` maps every event type to its class.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar

from agent_core.types.enums import WAL_EVENT_TYPES, EventType

if TYPE_CHECKING:
    from agent_core._redaction import Redactor


class Absent(enum.Enum):
    """The type of :data:`ABSENT`."""

    ABSENT = "absent"


ABSENT: Final = Absent.ABSENT
"""A field left out of the payload mapping."""

JsonObject = dict[str, Any]
"""A JSON object already in its serialised shape (e.g. ``ErrorPayload.model_dump(mode="json")``)."""

P = TypeVar("P", bound="EventPayload")


@dataclass(frozen=True, eq=False, repr=False)
class EventPayload:
    """Base of the payload classes; ``event_type`` names the event a payload is for.

    Equality, hash and repr are the dataclass ones (fields in order), written once here instead of being
    generated for each of the ~80 classes (``eq=False, repr=False`` on them): creating the classes is part
    of every cold start (issue 16). A class without a docstring gets one naming its event type (else
    ``dataclass`` would compute one from its signature).
    """

    event_type: ClassVar[EventType]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("__doc__") is None:
            kind = cls.__dict__.get("event_type")
            cls.__doc__ = f"Payload of ``{kind.value}`` events." if kind is not None else cls.__name__

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(tuple(self.__dict__.values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items())
        return f"{type(self).__qualname__}({fields})"

    def to_payload(self) -> dict[str, Any]:
        """The event's payload mapping (fields in order, :data:`ABSENT` ones left out)."""
        return {k: v for k, v in self.__dict__.items() if v is not ABSENT}

    def redacted(self: P, redactor: Redactor) -> P:
        """A copy whose strings have the secrets replaced (``Redactor.value`` over the fields)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(redactor.value(self.__dict__))
        return copy


@dataclass(frozen=True, eq=False, repr=False)
class RunQueued(EventPayload):
    event_type = EventType.run_queued
    queue_position: int
    mode: str


@dataclass(frozen=True, eq=False, repr=False)
class RunDequeued(EventPayload):
    event_type = EventType.run_dequeued
    reason: Literal["started", "cancelled"]


@dataclass(frozen=True, eq=False, repr=False)
class RunCancelled(EventPayload):
    event_type = EventType.run_cancelled
    reason: str
    was_queued: bool
    end_reason: str | None


@dataclass(frozen=True, eq=False, repr=False)
class RunCompleted(EventPayload):
    event_type = EventType.run_completed
    end_reason: str
    turn_count: int
    usage: JsonObject
    final_node_id: str | None
    error: JsonObject | Absent = ABSENT
    """Set when a limit or a loop ended the run with a final answer."""


@dataclass(frozen=True, eq=False, repr=False)
class CancelTimeout(EventPayload):
    event_type = EventType.cancel_timeout
    cancel_timeout_ms: int


@dataclass(frozen=True, eq=False, repr=False)
class LoopStarted(EventPayload):
    event_type = EventType.loop_started
    mode: str
    agent_type: str
    max_turns: int


@dataclass(frozen=True, eq=False, repr=False)
class LoopCompleted(EventPayload):
    event_type = EventType.loop_completed
    end_reason: str
    turn_count: int


@dataclass(frozen=True, eq=False, repr=False)
class LoopAborted(EventPayload):
    event_type = EventType.loop_aborted
    end_reason: str
    abort_reason: str


@dataclass(frozen=True, eq=False, repr=False)
class LoopFailed(EventPayload):
    event_type = EventType.loop_failed
    end_reason: str | None
    error: JsonObject | None


@dataclass(frozen=True, eq=False, repr=False)
class AbortedStreaming(EventPayload):
    event_type = EventType.aborted_streaming
    abort_reason: str
    partial_node_id: str | None


@dataclass(frozen=True, eq=False, repr=False)
class AbortedTools(EventPayload):
    event_type = EventType.aborted_tools
    abort_reason: str
    tool_call_ids: list[str]


@dataclass(frozen=True, eq=False, repr=False)
class StopHookPrevented(EventPayload):
    event_type = EventType.stop_hook_prevented
    reason: str
    hook_summary: JsonObject | None


@dataclass(frozen=True, eq=False, repr=False)
class Error(EventPayload):
    """The ``error`` event: the fields of an ``ErrorPayload`` at the top level."""

    event_type = EventType.error
    error: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.error


@dataclass(frozen=True, eq=False, repr=False)
class ContextBuilt(EventPayload):
    """The ``ContextBuildReport`` fields at the top level (runtime.md §9.8)."""

    event_type = EventType.context_built
    report: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.report


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class MessageCreated(EventPayload):
    event_type = EventType.message_created
    role: str = "user"
    text_preview: str


@dataclass(frozen=True, eq=False, repr=False)
class MessageDelta(EventPayload):
    event_type = EventType.message_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)
class MessageCompleted(EventPayload):
    event_type = EventType.message_completed
    role: str = "assistant"
    text: str
    has_tool_calls: bool


@dataclass(frozen=True, eq=False, repr=False)
class ModelStarted(EventPayload):
    event_type = EventType.model_started
    provider: str
    model: str
    turn: int


@dataclass(frozen=True, eq=False, repr=False)
class ModelTextDelta(EventPayload):
    event_type = EventType.model_text_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(frozen=True, eq=False, repr=False)
class ToolCallDelta(EventPayload):
    event_type = EventType.tool_call_delta
    index: int
    phase: str
    tool_call_id: str | None
    name: str | None
    arguments_delta: str | None


@dataclass(frozen=True, eq=False, repr=False)
class ModelCompleted(EventPayload):
    event_type = EventType.model_completed
    stop_reason: str
    raw_stop_reason: str | None
    usage: JsonObject
    tool_call_count: int
    latency_ms: Any
    """The adapter's reported latency when it gave one, else the measured milliseconds."""
    retries: int


@dataclass(frozen=True, eq=False, repr=False)
class ModelFailed(EventPayload):
    event_type = EventType.model_failed
    error: JsonObject
    partial_node_id: str | None


@dataclass(frozen=True, eq=False, repr=False)
class ProviderDebug(EventPayload):
    event_type = EventType.provider_debug
    provider: str
    kind: str
    data: Any
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further keys written at the top level (MCP discovery repeats its data there)."""

    def to_payload(self) -> dict[str, Any]:
        return {"provider": self.provider, "kind": self.kind, "data": self.data, **self.extra}


@dataclass(frozen=True, eq=False, repr=False)
class ToolStarted(EventPayload):
    event_type = EventType.tool_started
    tool_name: str
    args_summary: str
    permission: str
    tags: list[str]
    permission_outcome: Any
    permission_audit: Any
    internal: bool | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class ToolProgress(EventPayload):
    event_type = EventType.tool_progress
    tool_name: str
    progress: JsonObject


@dataclass(frozen=True, eq=False, repr=False)
class ToolCompleted(EventPayload):
    event_type = EventType.tool_completed
    tool_name: str
    duration_ms: int
    summary: str
    artifact_ids: list[str]
    internal: bool | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class ToolFailed(EventPayload):
    event_type = EventType.tool_failed
    tool_name: str
    error: JsonObject | None
    aborted: bool = False
    reason: str | Absent = ABSENT
    """Why the call did not run or did not finish (``validation_error``, ``interrupted``, ...)."""
    skipped: bool | Absent = ABSENT
    duration_ms: int | Absent = ABSENT
    internal: bool | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class ToolDenied(EventPayload):
    event_type = EventType.tool_denied
    tool_name: str
    denied_by: str
    reason: str
    hook_summary: JsonObject | None
    permission_audit: JsonObject | Absent = ABSENT
    internal: bool | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class PermissionFailed(EventPayload):
    event_type = EventType.permission_failed
    tool_name: str
    request_id: str | None
    error: JsonObject
    internal: bool | Absent = ABSENT


ToolResultEvent = ToolCompleted | ToolFailed | ToolDenied
"""The event committed with a tool result node."""


@dataclass(frozen=True, eq=False, repr=False)
class _HookRun(EventPayload):
    """Which hook of which rule ran, for which phase."""

    phase: str
    hook_index: int
    rule_index: int


@dataclass(frozen=True, eq=False, repr=False)
class HookStarted(_HookRun):
    event_type = EventType.hook_started
    command: str


@dataclass(frozen=True, eq=False, repr=False)
class HookCompleted(_HookRun):
    event_type = EventType.hook_completed
    decision: str | None
    duration_ms: int
    reason: str | None
    logs: list[str]
    stderr_summary: str | None
    ignored: bool | Absent = ABSENT
    """A ``deny`` of a non-blocking phase, which has no effect."""


@dataclass(frozen=True, eq=False, repr=False)
class HookFailed(_HookRun):
    event_type = EventType.hook_failed
    error: JsonObject | None
    stderr_summary: str | None
    duration_ms: int
    decision: str | None
    reason: str | None


@dataclass(frozen=True, eq=False, repr=False)
class HookDenied(EventPayload):
    event_type = EventType.hook_denied
    phase: str
    reason: str
    hook_summary: JsonObject | None
    internal: bool | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class ChildAgentCreated(EventPayload):
    event_type = EventType.child_agent_created
    child_agent_id: str
    child_run_id: str
    agent_type: str
    purpose: str | None
    agent_definition_id: str
    definition_source: str
    tool_call_id: str | None
    fork_from_node_id: str | Absent = ABSENT
    worker_agent_id: str | Absent = ABSENT
    worker_pool_id: str | Absent | None = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class WorkerDispatched(EventPayload):
    event_type = EventType.worker_dispatched
    worker_agent_id: str
    worker_pool_id: str | None
    child_agent_id: str
    child_run_id: str
    task_id: str
    allowed_step_ids: list[str] | None
    selection_reason: str
    tool_call_id: str


@dataclass(frozen=True, eq=False, repr=False)
class WorkerDispatchFailed(EventPayload):
    event_type = EventType.worker_dispatch_failed
    error: JsonObject
    task_id: str | None
    worker_pool_id: str | None
    worker_agent_id: str | None
    tool_call_id: str


@dataclass(frozen=True, eq=False, repr=False)
class _ChildIds(EventPayload):
    """The child agent and run an event is about."""

    child_agent_id: str
    child_run_id: str


@dataclass(frozen=True, eq=False, repr=False)
class ChildAgentCancelRequested(_ChildIds):
    event_type = EventType.child_agent_cancel_requested
    reason: str


@dataclass(frozen=True, eq=False, repr=False)
class ChildAgentCancelled(_ChildIds):
    event_type = EventType.child_agent_cancelled


@dataclass(frozen=True, eq=False, repr=False)
class ChildAgentCancelTimeout(_ChildIds):
    event_type = EventType.child_agent_cancel_timeout
    child_cancel_timeout_ms: int


@dataclass(frozen=True, eq=False, repr=False)
class ChildAgentCompleted(_ChildIds):
    event_type = EventType.child_agent_completed
    status: str
    summary: str


@dataclass(frozen=True, eq=False, repr=False)
class ChildAgentFailed(_ChildIds):
    event_type = EventType.child_agent_failed
    error: JsonObject
    summary: str


@dataclass(frozen=True, eq=False, repr=False)
class ChildResultSchemaValidationFailed(_ChildIds):
    event_type = EventType.child_result_schema_validation_failed
    errors: list[dict[str, str]]


@dataclass(frozen=True, eq=False, repr=False)
class CompactPending(EventPayload):
    event_type = EventType.compact_pending
    tokens_estimate: int
    threshold: int
    target_agent_id: str


@dataclass(frozen=True, eq=False, repr=False)
class CompactStarted(EventPayload):
    event_type = EventType.compact_started
    mode: str
    child_run_id: str
    compact_agent_id: str
    target_agent_id: str
    covered_tip_node_id: str | None
    first_kept_node_id: str | None
    tokens_before: int
    split_turn: bool


@dataclass(frozen=True, eq=False, repr=False)
class CompactCompleted(EventPayload):
    event_type = EventType.compact_completed
    stale: bool
    tokens_before: int
    first_kept_node_id: str | None
    summary_tokens: int
    mode: str
    compact_run_id: str
    compaction_node_id: str


@dataclass(frozen=True, eq=False, repr=False)
class CompactFailed(EventPayload):
    event_type = EventType.compact_failed
    error: JsonObject | None
    stale: bool
    reason: str
    mode: str
    compact_run_id: str
    target_agent_id: str
    message: str | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class _Extraction(EventPayload):
    """Why an extraction ran and the node range it read."""

    reason: str
    source_range: JsonObject


@dataclass(frozen=True, eq=False, repr=False)
class MemoryExtractionStarted(_Extraction):
    event_type = EventType.memory_extraction_started


@dataclass(frozen=True, eq=False, repr=False)
class MemoryExtractionCompleted(_Extraction):
    event_type = EventType.memory_extraction_completed
    created_memory_ids: list[str]
    updated_memory_ids: list[str]
    ignored_candidates: list[JsonObject]
    duplicate_decisions: list[JsonObject]
    conflicts: list[JsonObject]
    source_node_ids: list[str]
    files_changed: list[str]
    scan_cursor: JsonObject


@dataclass(frozen=True, eq=False, repr=False)
class MemoryExtractionFailed(_Extraction):
    event_type = EventType.memory_extraction_failed
    error: JsonObject


@dataclass(frozen=True, eq=False, repr=False)
class McpServerFailed(EventPayload):
    event_type = EventType.mcp_server_failed
    server_id: str
    phase: str
    error: JsonObject


@dataclass(frozen=True, eq=False, repr=False)
class JobStarted(EventPayload):
    event_type = EventType.job_started
    job_id: str
    tool_name: str
    offload_after_ms: int


@dataclass(frozen=True, eq=False, repr=False)
class JobCompleted(EventPayload):
    event_type = EventType.job_completed
    job_id: str
    tool_name: str
    status: str
    artifact_id: str | None


@dataclass(frozen=True, eq=False, repr=False)
class JobFailed(EventPayload):
    event_type = EventType.job_failed
    job_id: str
    tool_name: str
    status: str
    artifact_id: str | Absent | None = ABSENT
    error: JsonObject | Absent = ABSENT
    reason: str | Absent = ABSENT


@dataclass(frozen=True, eq=False, repr=False)
class TaskWalMirror(EventPayload):
    """A runtime event mirroring one WAL record (``tasks.views.event_payload``): the record's ids,
    ``wal_path`` and its payload fields at the top level. One subclass per WAL record type."""

    fields: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.fields


def _wal_mirror(event_type: EventType) -> type[TaskWalMirror]:
    name = "".join(part.title() for part in event_type.value.split("_"))
    cls = type(name, (TaskWalMirror,), {"event_type": event_type, "__module__": __name__})
    return dataclass(frozen=True, eq=False, repr=False)(cls)


_WAL_MIRROR_CLASSES = tuple(_wal_mirror(EventType(t)) for t in WAL_EVENT_TYPES)
"""``TaskCreated`` … ``TaskStepLeaseExpired``: one class per WAL record type (contract.md §7.2)."""


@dataclass(frozen=True, eq=False, repr=False)
class TaskStepClaimSkipped(EventPayload):
    event_type = EventType.task_step_claim_skipped
    task_id: str
    step_id: str | None
    code: str
    worker_agent_id: str | None
    worker_run_id: str | None


@dataclass(frozen=True, eq=False, repr=False)
class TaskWalReplayed(EventPayload):
    event_type = EventType.task_wal_replayed
    task_id: str
    wal_path: str
    records: int
    last_wal_seq: int
    torn_tail_truncated: bool


@dataclass(frozen=True, eq=False, repr=False)
class TaskWalFailed(EventPayload):
    event_type = EventType.task_wal_failed
    wal_path: str
    task_id: Any
    phase: str
    error: JsonObject


def _concrete(cls: type[EventPayload]) -> list[type[EventPayload]]:
    found: list[type[EventPayload]] = []
    for sub in cls.__subclasses__():
        if "event_type" in sub.__dict__:
            found.append(sub)
        found.extend(_concrete(sub))
    return found


PAYLOAD_CLASSES: Sequence[type[EventPayload]] = tuple(_concrete(EventPayload))
"""Every payload class (a test checks there is exactly one per event type)."""
PAYLOAD_MODELS: Mapping[EventType, type[EventPayload]] = {c.event_type: c for c in PAYLOAD_CLASSES}
"""``event_type`` → its payload class."""
WAL_MIRRORS: Mapping[str, type[TaskWalMirror]] = {
    c.event_type.value: c for c in PAYLOAD_CLASSES if issubclass(c, TaskWalMirror)
}
"""WAL record type → the class of the runtime event mirroring it."""
