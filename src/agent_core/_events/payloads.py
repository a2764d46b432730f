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
from dataclasses import field
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar

from agent_core._events._frozen import Frozen, frozen_dataclass
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


@frozen_dataclass
class EventPayload(Frozen):
    """Base of the payload classes; ``event_type`` names the event a payload is for.

    Equality, hash and repr are the dataclass ones (fields in order), written once here instead of being
    generated for each of the ~80 classes (``eq=False, repr=False`` on them): creating the classes is part
    of every cold start (issue 16), as is compiling their ``__init__``: :func:`frozen_dataclass` compiles it
    when a class is first instantiated. A class without a docstring gets one naming its event type (else
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


@frozen_dataclass
class RunQueued(EventPayload):
    event_type = EventType.run_queued
    queue_position: int
    mode: str


@frozen_dataclass
class RunDequeued(EventPayload):
    event_type = EventType.run_dequeued
    reason: Literal["started", "cancelled"]


@frozen_dataclass
class RunCancelled(EventPayload):
    event_type = EventType.run_cancelled
    reason: str
    was_queued: bool
    end_reason: str | None


@frozen_dataclass
class RunCompleted(EventPayload):
    event_type = EventType.run_completed
    end_reason: str
    turn_count: int
    usage: JsonObject
    final_node_id: str | None
    error: JsonObject | Absent = ABSENT
    """Set when a limit or a loop ended the run with a final answer."""


@frozen_dataclass
class CancelTimeout(EventPayload):
    event_type = EventType.cancel_timeout
    cancel_timeout_ms: int


@frozen_dataclass
class LoopStarted(EventPayload):
    event_type = EventType.loop_started
    mode: str
    agent_type: str
    max_turns: int


@frozen_dataclass
class LoopCompleted(EventPayload):
    event_type = EventType.loop_completed
    end_reason: str
    turn_count: int


@frozen_dataclass
class LoopAborted(EventPayload):
    event_type = EventType.loop_aborted
    end_reason: str
    abort_reason: str


@frozen_dataclass
class LoopFailed(EventPayload):
    event_type = EventType.loop_failed
    end_reason: str | None
    error: JsonObject | None


@frozen_dataclass
class AbortedStreaming(EventPayload):
    event_type = EventType.aborted_streaming
    abort_reason: str
    partial_node_id: str | None


@frozen_dataclass
class AbortedTools(EventPayload):
    event_type = EventType.aborted_tools
    abort_reason: str
    tool_call_ids: list[str]


@frozen_dataclass
class StopHookPrevented(EventPayload):
    event_type = EventType.stop_hook_prevented
    reason: str
    hook_summary: JsonObject | None


@frozen_dataclass
class Error(EventPayload):
    """The ``error`` event: the fields of an ``ErrorPayload`` at the top level."""

    event_type = EventType.error
    error: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.error


@frozen_dataclass
class ContextBuilt(EventPayload):
    """The ``ContextBuildReport`` fields at the top level (runtime.md §9.8)."""

    event_type = EventType.context_built
    report: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.report


@frozen_dataclass(kw_only=True)
class PromptCacheBreak(EventPayload):
    """A request whose prompt prefix diverges from the agent's previous request (issue 33): the part
    (``tools``, ``system``, ``messages``), the first item that changed, the messages both share, and
    why the context was rebuilt when it was (``compaction``, ``rebuild``, ``rewind``; else ``null``)."""

    event_type = EventType.prompt_cache_break
    part: str
    first_changed: str
    reused_messages: int
    previous_messages: int
    cause: str | None
    turn: int


@frozen_dataclass(kw_only=True)
class MessageCreated(EventPayload):
    event_type = EventType.message_created
    role: str = "user"
    text_preview: str


@frozen_dataclass
class MessageDelta(EventPayload):
    event_type = EventType.message_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}


@frozen_dataclass(kw_only=True)
class MessageCompleted(EventPayload):
    event_type = EventType.message_completed
    role: str = "assistant"
    text: str
    has_tool_calls: bool
    reasoning: str | Absent = ABSENT
    """The message's reasoning text (its reasoning blocks joined), when it has any (issue 34)."""


@frozen_dataclass
class ReasoningDelta(EventPayload):
    """A fragment of the model's reasoning as it streams (live only, like ``message_delta``)."""

    event_type = EventType.reasoning_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}


@frozen_dataclass
class ModelStarted(EventPayload):
    event_type = EventType.model_started
    provider: str
    model: str
    turn: int


@frozen_dataclass(kw_only=True)
class ModelProgress(EventPayload):
    """Where one model call stands, for a status line (live only, never stored).

    ``waiting``: the request is sent (``prompt_tokens`` is the composer's estimate); ``streaming``: the first
    token arrived after ``waited_ms``; ``done``: the answer is complete (``prompt_tokens`` and
    ``output_tokens`` as the provider reported them, ``tokens_per_second`` over the generation time, and the
    answer's ``stop_reason``: ``max_tokens`` means a continuation follows).
    """

    event_type = EventType.model_progress
    phase: Literal["waiting", "streaming", "done"]
    provider: str
    model: str
    turn: int
    prompt_tokens: int | None = None
    context_window: int | Absent | None = ABSENT
    waited_ms: int | Absent = ABSENT
    output_tokens: int | Absent = ABSENT
    tokens_per_second: float | Absent | None = ABSENT
    stop_reason: str | Absent = ABSENT


@frozen_dataclass
class ModelTextDelta(EventPayload):
    event_type = EventType.model_text_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}


@frozen_dataclass
class ToolCallDelta(EventPayload):
    event_type = EventType.tool_call_delta
    index: int
    phase: str
    tool_call_id: str | None
    name: str | None
    arguments_delta: str | None


@frozen_dataclass
class ModelCompleted(EventPayload):
    event_type = EventType.model_completed
    stop_reason: str
    raw_stop_reason: str | None
    usage: JsonObject
    tool_call_count: int
    latency_ms: Any
    """The adapter's reported latency when it gave one, else the measured milliseconds."""
    retries: int


@frozen_dataclass
class ModelFailed(EventPayload):
    event_type = EventType.model_failed
    error: JsonObject
    partial_node_id: str | None


@frozen_dataclass(kw_only=True)
class ModelFallback(EventPayload):
    """A model call failed after its retries (retriable error) or for a capability the model lacks, and
    the same request goes to the next ``[model] fallback_profiles`` profile (issue 34)."""

    event_type = EventType.model_fallback
    from_provider: str
    from_model: str
    to_provider: str
    to_model: str
    profile: str
    error: JsonObject
    turn: int


@frozen_dataclass(kw_only=True)
class ContextOverflow(EventPayload):
    """The provider said the prompt exceeds the model's window although the estimate fit: the runtime
    compacts once and retries the request (issue 34). ``prompt_tokens`` / ``context_window`` are the
    provider's figures (``null`` when it gave none); ``estimate_factor`` is the estimate's correction learned
    from them."""

    event_type = EventType.context_overflow
    provider: str
    model: str
    estimated_tokens: int
    prompt_tokens: int | None
    context_window: int | None
    estimate_factor: float
    compacted: bool
    turn: int


@frozen_dataclass
class ProviderDebug(EventPayload):
    event_type = EventType.provider_debug
    provider: str
    kind: str
    data: Any
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further keys written at the top level (MCP discovery repeats its data there)."""

    def to_payload(self) -> dict[str, Any]:
        return {"provider": self.provider, "kind": self.kind, "data": self.data, **self.extra}


@frozen_dataclass
class ToolStarted(EventPayload):
    event_type = EventType.tool_started
    tool_name: str
    args_summary: str
    permission: str
    tags: list[str]
    permission_outcome: Any
    permission_audit: Any
    internal: bool | Absent = ABSENT


@frozen_dataclass
class ToolProgress(EventPayload):
    event_type = EventType.tool_progress
    tool_name: str
    progress: JsonObject


@frozen_dataclass
class ToolCompleted(EventPayload):
    event_type = EventType.tool_completed
    tool_name: str
    duration_ms: int
    summary: str
    artifact_ids: list[str]
    internal: bool | Absent = ABSENT


@frozen_dataclass
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


@frozen_dataclass
class ToolDenied(EventPayload):
    event_type = EventType.tool_denied
    tool_name: str
    denied_by: str
    reason: str
    hook_summary: JsonObject | None
    permission_audit: JsonObject | Absent = ABSENT
    internal: bool | Absent = ABSENT


@frozen_dataclass
class PermissionFailed(EventPayload):
    event_type = EventType.permission_failed
    tool_name: str
    request_id: str | None
    error: JsonObject
    internal: bool | Absent = ABSENT


ToolResultEvent = ToolCompleted | ToolFailed | ToolDenied
"""The event committed with a tool result node."""


@frozen_dataclass
class _HookRun(EventPayload):
    """Which hook of which rule ran, for which phase."""

    phase: str
    hook_index: int
    rule_index: int


@frozen_dataclass
class HookStarted(_HookRun):
    event_type = EventType.hook_started
    command: str


@frozen_dataclass
class HookCompleted(_HookRun):
    event_type = EventType.hook_completed
    decision: str | None
    duration_ms: int
    reason: str | None
    logs: list[str]
    stderr_summary: str | None
    ignored: bool | Absent = ABSENT
    """A ``deny`` of a non-blocking phase, which has no effect."""


@frozen_dataclass
class HookFailed(_HookRun):
    event_type = EventType.hook_failed
    error: JsonObject | None
    stderr_summary: str | None
    duration_ms: int
    decision: str | None
    reason: str | None


@frozen_dataclass
class HookDenied(EventPayload):
    event_type = EventType.hook_denied
    phase: str
    reason: str
    hook_summary: JsonObject | None
    internal: bool | Absent = ABSENT


@frozen_dataclass
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


@frozen_dataclass
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


@frozen_dataclass
class WorkerDispatchFailed(EventPayload):
    event_type = EventType.worker_dispatch_failed
    error: JsonObject
    task_id: str | None
    worker_pool_id: str | None
    worker_agent_id: str | None
    tool_call_id: str


@frozen_dataclass
class _ChildIds(EventPayload):
    """The child agent and run an event is about."""

    child_agent_id: str
    child_run_id: str


@frozen_dataclass
class ChildAgentCancelRequested(_ChildIds):
    event_type = EventType.child_agent_cancel_requested
    reason: str


@frozen_dataclass
class ChildAgentCancelled(_ChildIds):
    event_type = EventType.child_agent_cancelled


@frozen_dataclass
class ChildAgentCancelTimeout(_ChildIds):
    event_type = EventType.child_agent_cancel_timeout
    child_cancel_timeout_ms: int


@frozen_dataclass
class ChildAgentCompleted(_ChildIds):
    event_type = EventType.child_agent_completed
    status: str
    summary: str


@frozen_dataclass
class ChildAgentFailed(_ChildIds):
    event_type = EventType.child_agent_failed
    error: JsonObject
    summary: str


@frozen_dataclass
class ChildResultSchemaValidationFailed(_ChildIds):
    event_type = EventType.child_result_schema_validation_failed
    errors: list[dict[str, str]]


@frozen_dataclass
class CompactPending(EventPayload):
    event_type = EventType.compact_pending
    tokens_estimate: int
    threshold: int
    target_agent_id: str


@frozen_dataclass
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


@frozen_dataclass
class CompactCompleted(EventPayload):
    event_type = EventType.compact_completed
    stale: bool
    tokens_before: int
    first_kept_node_id: str | None
    summary_tokens: int
    mode: str
    compact_run_id: str
    compaction_node_id: str


@frozen_dataclass
class CompactFailed(EventPayload):
    event_type = EventType.compact_failed
    error: JsonObject | None
    stale: bool
    reason: str
    mode: str
    compact_run_id: str
    target_agent_id: str
    message: str | Absent = ABSENT


@frozen_dataclass
class _Extraction(EventPayload):
    """Why an extraction ran and the node range it read."""

    reason: str
    source_range: JsonObject


@frozen_dataclass
class MemoryExtractionStarted(_Extraction):
    event_type = EventType.memory_extraction_started


@frozen_dataclass
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


@frozen_dataclass
class MemoryExtractionFailed(_Extraction):
    event_type = EventType.memory_extraction_failed
    error: JsonObject


@frozen_dataclass
class McpServerFailed(EventPayload):
    event_type = EventType.mcp_server_failed
    server_id: str
    phase: str
    error: JsonObject


@frozen_dataclass
class JobStarted(EventPayload):
    event_type = EventType.job_started
    job_id: str
    tool_name: str
    offload_after_ms: int


@frozen_dataclass
class JobCompleted(EventPayload):
    event_type = EventType.job_completed
    job_id: str
    tool_name: str
    status: str
    artifact_id: str | None


@frozen_dataclass
class JobFailed(EventPayload):
    event_type = EventType.job_failed
    job_id: str
    tool_name: str
    status: str
    artifact_id: str | Absent | None = ABSENT
    error: JsonObject | Absent = ABSENT
    reason: str | Absent = ABSENT


@frozen_dataclass
class InboxDelivered(EventPayload):
    """An entry reached an agent's inbox (written on the recipient's session; its run, if one is live)."""

    event_type = EventType.inbox_delivered
    entry_id: str
    kind: str
    sender: str
    depth: int
    """Unread entries of the recipient after this one."""
    request_id: str | Absent = ABSENT
    woke_run_id: str | Absent = ABSENT
    """The wake-up run this delivery started (the recipient was idle)."""


@frozen_dataclass
class InboxDrained(EventPayload):
    """Entries reached the model in one ``<inbox>`` note (written with the note node, which acknowledges
    them)."""

    event_type = EventType.inbox_drained
    entry_ids: list[str]
    kinds: list[str]
    count: int


@frozen_dataclass
class TeammateSpawned(EventPayload):
    event_type = EventType.teammate_spawned
    name: str
    teammate_agent_id: str
    teammate_session_id: str
    resident: bool
    isolation: str
    autonomous: bool


@frozen_dataclass
class TeammateStopped(EventPayload):
    event_type = EventType.teammate_stopped
    name: str
    teammate_agent_id: str
    teammate_session_id: str
    reason: str


@frozen_dataclass
class TaskWalMirror(EventPayload):
    """A runtime event mirroring one WAL record (``tasks.views.event_payload``): the record's ids,
    ``wal_path`` and its payload fields at the top level. One subclass per WAL record type."""

    fields: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.fields


def _wal_mirror(event_type: EventType) -> type[TaskWalMirror]:
    name = "".join(part.title() for part in event_type.value.split("_"))
    cls = type(name, (TaskWalMirror,), {"event_type": event_type, "__module__": __name__})
    return frozen_dataclass(cls)


_WAL_MIRROR_CLASSES = tuple(_wal_mirror(EventType(t)) for t in WAL_EVENT_TYPES)
"""``TaskCreated`` … ``TaskStepLeaseExpired``: one class per WAL record type (contract.md §7.2)."""


@frozen_dataclass
class TaskStepClaimSkipped(EventPayload):
    event_type = EventType.task_step_claim_skipped
    task_id: str
    step_id: str | None
    code: str
    worker_agent_id: str | None
    worker_run_id: str | None


@frozen_dataclass
class TaskWalReplayed(EventPayload):
    event_type = EventType.task_wal_replayed
    task_id: str
    wal_path: str
    records: int
    last_wal_seq: int
    torn_tail_truncated: bool


@frozen_dataclass
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
