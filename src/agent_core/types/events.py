"""The typed payload of every :class:`~agent_core.types.enums.EventType`: ``RuntimeEvent.payload``.

``RuntimeEvent.payload`` is the event's payload as one of these classes (:data:`RuntimeEventPayload`, a
union discriminated by the class attribute ``event_type``, which equals the event's ``event_type``), so a
consumer reads typed fields instead of dict keys::

    async for event in run.events():
        match event.payload:
            case MessageDelta(text=text):
                print(text, end="")
            case ToolStarted(tool_name=name, args_summary=args):
                print(f"[{name} {args}]")

``RuntimeEvent.data`` keeps the JSON form (the ``payload`` object of the event's JSON, of SSE frames and of
the stored event): :meth:`EventPayload.to_payload` of the payload, with keys in field order. A field whose
value is :data:`ABSENT` is left out of that mapping (a key some emitters add and others do not); ``None``
is written as ``null``. Nested values stay JSON-shaped (an error is the ``ErrorPayload`` object as a dict,
usage the usage record) so building a payload validates nothing: the per-delta path costs one small object.

The runtime builds every event from one of these classes. Reading an event back from its JSON form
(:meth:`EventPayload.from_data`) is lenient: a key the class does not declare is ignored (``data`` still has
it), a missing key of a field without a default reads ``None``.

Every class is a stdlib ``dataclass(slots=True, frozen=True)``: immutable, comparable, usable with
``match`` and ``dataclasses.fields``. :data:`PAYLOAD_MODELS` maps every event type to its class.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, TypeVar

from agent_core.types.enums import WAL_EVENT_TYPES, EventType

if TYPE_CHECKING:
    from agent_core._redaction import Redactor


class Absent(enum.Enum):
    """The type of :data:`ABSENT`."""

    ABSENT = "absent"

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = Absent.ABSENT
"""A field left out of the payload mapping."""

JsonObject = dict[str, Any]
"""A JSON object already in its serialised shape (e.g. ``ErrorPayload.model_dump(mode="json")``)."""

P = TypeVar("P", bound="EventPayload")

_FIELDS: dict[type[EventPayload], tuple[tuple[str, bool], ...]] = {}
"""Per class: its fields in order, each with whether it has a default (filled on first use)."""


def _fields_of(cls: type[EventPayload]) -> tuple[tuple[str, bool], ...]:
    known = _FIELDS.get(cls)
    if known is None:
        known = _FIELDS[cls] = tuple(
            (f.name, f.default is not MISSING or f.default_factory is not MISSING)
            for f in fields(cls)  # type: ignore[arg-type]  # every concrete payload class is a dataclass
        )
    return known


class EventPayload:
    """Base of the payload classes; the class attribute ``event_type`` names the event a payload is for.

    A plain class with empty slots: the records are its ``dataclass(slots=True, frozen=True)`` subclasses.
    Equality, hash and repr are the dataclass ones (same class, fields in order), written once here instead
    of being generated for each of the ~70 classes (``eq=False, repr=False`` on them): creating the classes
    is part of every cold start. A class without a docstring gets one naming its event type (``dataclass``
    would compute one from its signature, which is slow).
    """

    __slots__ = ()
    event_type: ClassVar[EventType]

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name, _ in _fields_of(type(self)))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, EventPayload)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name, _ in _fields_of(type(self)))
        return f"{type(self).__qualname__}({values})"

    def __init_subclass__(cls) -> None:
        if cls.__dict__.get("__doc__") is None:
            kind = cls.__dict__.get("event_type")
            cls.__doc__ = f"Payload of ``{kind.value}`` events." if kind is not None else cls.__name__

    def to_payload(self) -> dict[str, Any]:
        """The event's JSON payload mapping (fields in order, :data:`ABSENT` ones left out)."""
        out: dict[str, Any] = {}
        for name, _ in _fields_of(type(self)):
            value = getattr(self, name)
            if value is not ABSENT:
                out[name] = value
        return out

    @classmethod
    def from_data(cls: type[P], data: Mapping[str, Any]) -> P:
        """The payload of a JSON payload mapping (the inverse of :meth:`to_payload`; lenient: undeclared
        keys are ignored, a missing key of a field without a default reads ``None``)."""
        values: dict[str, Any] = {}
        for name, has_default in _fields_of(cls):
            if name in data:
                values[name] = data[name]
            elif not has_default:
                values[name] = None
        return cls(**values)

    def redacted(self: P, redactor: Redactor) -> P:
        """A copy whose strings have the secrets replaced (``Redactor.value`` over the fields)."""
        cls = type(self)
        copy = object.__new__(cls)
        for name, _ in _fields_of(cls):
            object.__setattr__(copy, name, redactor.value(getattr(self, name)))
        return copy


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class RunQueued(EventPayload):
    event_type = EventType.run_queued
    queue_position: int
    mode: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class RunDequeued(EventPayload):
    event_type = EventType.run_dequeued
    reason: Literal["started", "cancelled"]


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class RunCancelled(EventPayload):
    event_type = EventType.run_cancelled
    reason: str
    was_queued: bool
    end_reason: str | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class RunCompleted(EventPayload):
    event_type = EventType.run_completed
    end_reason: str
    turn_count: int
    usage: JsonObject
    final_node_id: str | None
    error: JsonObject | Absent = ABSENT
    """Set when a limit or a loop ended the run with a final answer."""


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class CancelTimeout(EventPayload):
    event_type = EventType.cancel_timeout
    cancel_timeout_ms: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class LoopStarted(EventPayload):
    event_type = EventType.loop_started
    mode: str
    agent_type: str
    max_turns: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class LoopCompleted(EventPayload):
    event_type = EventType.loop_completed
    end_reason: str
    turn_count: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class LoopAborted(EventPayload):
    event_type = EventType.loop_aborted
    end_reason: str
    abort_reason: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class LoopFailed(EventPayload):
    event_type = EventType.loop_failed
    end_reason: str | None
    error: JsonObject | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class AbortedStreaming(EventPayload):
    event_type = EventType.aborted_streaming
    abort_reason: str
    partial_node_id: str | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class AbortedTools(EventPayload):
    event_type = EventType.aborted_tools
    abort_reason: str
    tool_call_ids: list[str]


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class StopHookPrevented(EventPayload):
    event_type = EventType.stop_hook_prevented
    reason: str
    hook_summary: JsonObject | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class Error(EventPayload):
    """The ``error`` event: the fields of an ``ErrorPayload`` at the top level."""

    event_type = EventType.error
    error: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.error

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Error:
        return cls(dict(data))


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ContextBuilt(EventPayload):
    """The ``ContextBuildReport`` fields at the top level (``ContextBuildReport.model_validate(report)``
    reads them)."""

    event_type = EventType.context_built
    report: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.report

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ContextBuilt:
        return cls(dict(data))


@dataclass(slots=True, frozen=True, kw_only=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, kw_only=True, eq=False, repr=False)
class MessageCreated(EventPayload):
    event_type = EventType.message_created
    role: str = "user"
    text_preview: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class MessageDelta(EventPayload):
    event_type = EventType.message_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> MessageDelta:
        return cls(data.get("text"))  # type: ignore[arg-type]  # per streamed delta: no field walk


@dataclass(slots=True, frozen=True, kw_only=True, eq=False, repr=False)
class MessageCompleted(EventPayload):
    event_type = EventType.message_completed
    role: str = "assistant"
    text: str
    has_tool_calls: bool
    reasoning: str | Absent = ABSENT
    """The message's reasoning text (its reasoning blocks joined), when it has any (issue 34)."""


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ReasoningDelta(EventPayload):
    """A fragment of the model's reasoning as it streams (live only, like ``message_delta``)."""

    event_type = EventType.reasoning_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ReasoningDelta:
        return cls(data.get("text"))  # type: ignore[arg-type]  # per streamed delta: no field walk


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ModelStarted(EventPayload):
    event_type = EventType.model_started
    provider: str
    model: str
    turn: int


@dataclass(slots=True, frozen=True, kw_only=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ModelTextDelta(EventPayload):
    event_type = EventType.model_text_delta
    text: str

    def to_payload(self) -> dict[str, Any]:
        return {"text": self.text}


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ToolCallDelta(EventPayload):
    event_type = EventType.tool_call_delta
    index: int
    phase: str
    tool_call_id: str | None
    name: str | None
    arguments_delta: str | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ModelCompleted(EventPayload):
    event_type = EventType.model_completed
    stop_reason: str
    raw_stop_reason: str | None
    usage: JsonObject
    tool_call_count: int
    latency_ms: Any
    """The adapter's reported latency when it gave one, else the measured milliseconds."""
    retries: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ModelFailed(EventPayload):
    event_type = EventType.model_failed
    error: JsonObject
    partial_node_id: str | None


@dataclass(slots=True, frozen=True, kw_only=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, kw_only=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ProviderDebug(EventPayload):
    event_type = EventType.provider_debug
    provider: str
    kind: str
    data: Any
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Further keys written at the top level (MCP discovery repeats its data there)."""

    def to_payload(self) -> dict[str, Any]:
        return {"provider": self.provider, "kind": self.kind, "data": self.data, **self.extra}

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ProviderDebug:
        extra = {k: v for k, v in data.items() if k not in ("provider", "kind", "data")}
        return cls(data.get("provider"), data.get("kind"), data.get("data"), extra)  # type: ignore[arg-type]


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ToolStarted(EventPayload):
    event_type = EventType.tool_started
    tool_name: str
    args_summary: str
    permission: str
    tags: list[str]
    permission_outcome: Any
    permission_audit: Any
    internal: bool | Absent = ABSENT


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ToolProgress(EventPayload):
    event_type = EventType.tool_progress
    tool_name: str
    progress: JsonObject


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ToolCompleted(EventPayload):
    event_type = EventType.tool_completed
    tool_name: str
    duration_ms: int
    summary: str
    artifact_ids: list[str]
    internal: bool | Absent = ABSENT


@dataclass(slots=True, frozen=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ToolDenied(EventPayload):
    event_type = EventType.tool_denied
    tool_name: str
    denied_by: str
    reason: str
    hook_summary: JsonObject | None
    permission_audit: JsonObject | Absent = ABSENT
    internal: bool | Absent = ABSENT


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class PermissionFailed(EventPayload):
    event_type = EventType.permission_failed
    tool_name: str
    request_id: str | None
    error: JsonObject
    internal: bool | Absent = ABSENT


ToolResultEvent = ToolCompleted | ToolFailed | ToolDenied
"""The event committed with a tool result node."""


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class _HookRun(EventPayload):
    """Which hook of which rule ran, for which phase."""

    phase: str
    hook_index: int
    rule_index: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class HookStarted(_HookRun):
    event_type = EventType.hook_started
    command: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class HookCompleted(_HookRun):
    event_type = EventType.hook_completed
    decision: str | None
    duration_ms: int
    reason: str | None
    logs: list[str]
    stderr_summary: str | None
    ignored: bool | Absent = ABSENT
    """A ``deny`` of a non-blocking phase, which has no effect."""


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class HookFailed(_HookRun):
    event_type = EventType.hook_failed
    error: JsonObject | None
    stderr_summary: str | None
    duration_ms: int
    decision: str | None
    reason: str | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class HookDenied(EventPayload):
    event_type = EventType.hook_denied
    phase: str
    reason: str
    hook_summary: JsonObject | None
    internal: bool | Absent = ABSENT


@dataclass(slots=True, frozen=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class WorkerDispatchFailed(EventPayload):
    event_type = EventType.worker_dispatch_failed
    error: JsonObject
    task_id: str | None
    worker_pool_id: str | None
    worker_agent_id: str | None
    tool_call_id: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class _ChildIds(EventPayload):
    """The child agent and run an event is about."""

    child_agent_id: str
    child_run_id: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ChildAgentCancelRequested(_ChildIds):
    event_type = EventType.child_agent_cancel_requested
    reason: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ChildAgentCancelled(_ChildIds):
    event_type = EventType.child_agent_cancelled


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ChildAgentCancelTimeout(_ChildIds):
    event_type = EventType.child_agent_cancel_timeout
    child_cancel_timeout_ms: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ChildAgentCompleted(_ChildIds):
    event_type = EventType.child_agent_completed
    status: str
    summary: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ChildAgentFailed(_ChildIds):
    event_type = EventType.child_agent_failed
    error: JsonObject
    summary: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class ChildResultSchemaValidationFailed(_ChildIds):
    event_type = EventType.child_result_schema_validation_failed
    errors: list[dict[str, str]]


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class CompactPending(EventPayload):
    event_type = EventType.compact_pending
    tokens_estimate: int
    threshold: int
    target_agent_id: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class CompactCompleted(EventPayload):
    event_type = EventType.compact_completed
    stale: bool
    tokens_before: int
    first_kept_node_id: str | None
    summary_tokens: int
    mode: str
    compact_run_id: str
    compaction_node_id: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class CompactFailed(EventPayload):
    event_type = EventType.compact_failed
    error: JsonObject | None
    stale: bool
    reason: str
    mode: str
    compact_run_id: str
    target_agent_id: str
    message: str | Absent = ABSENT


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class _Extraction(EventPayload):
    """Why an extraction ran and the node range it read."""

    reason: str
    source_range: JsonObject


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class MemoryExtractionStarted(_Extraction):
    event_type = EventType.memory_extraction_started


@dataclass(slots=True, frozen=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class MemoryExtractionFailed(_Extraction):
    event_type = EventType.memory_extraction_failed
    error: JsonObject


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class McpServerFailed(EventPayload):
    event_type = EventType.mcp_server_failed
    server_id: str
    phase: str
    error: JsonObject


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class JobStarted(EventPayload):
    event_type = EventType.job_started
    job_id: str
    tool_name: str
    offload_after_ms: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class JobCompleted(EventPayload):
    event_type = EventType.job_completed
    job_id: str
    tool_name: str
    status: str
    artifact_id: str | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class JobFailed(EventPayload):
    event_type = EventType.job_failed
    job_id: str
    tool_name: str
    status: str
    artifact_id: str | Absent | None = ABSENT
    error: JsonObject | Absent = ABSENT
    reason: str | Absent = ABSENT


@dataclass(slots=True, frozen=True, eq=False, repr=False)
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


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class InboxDrained(EventPayload):
    """Entries reached the model in one ``<inbox>`` note (written with the note node, which acknowledges
    them)."""

    event_type = EventType.inbox_drained
    entry_ids: list[str]
    kinds: list[str]
    count: int


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class TeammateSpawned(EventPayload):
    event_type = EventType.teammate_spawned
    name: str
    teammate_agent_id: str
    teammate_session_id: str
    resident: bool
    isolation: str
    autonomous: bool


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class TeammateStopped(EventPayload):
    event_type = EventType.teammate_stopped
    name: str
    teammate_agent_id: str
    teammate_session_id: str
    reason: str


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class TaskWalMirror(EventPayload):
    """A runtime event mirroring one WAL record (``tasks.views.event_payload``): the record's ids,
    ``wal_path`` and its payload fields at the top level. One subclass per WAL record type."""

    fields: JsonObject

    def to_payload(self) -> dict[str, Any]:
        return self.fields

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TaskWalMirror:
        return cls(dict(data))


def _wal_mirror(event_type: EventType) -> type[TaskWalMirror]:
    name = "".join(part.title() for part in event_type.value.split("_"))
    cls = type(name, (TaskWalMirror,), {"event_type": event_type, "__module__": __name__})
    return dataclass(slots=True, frozen=True, eq=False, repr=False)(cls)


_WAL_MIRROR_CLASSES = tuple(_wal_mirror(EventType(t)) for t in WAL_EVENT_TYPES)
"""``TaskCreated`` … ``TaskStepLeaseExpired``: one class per WAL record type (``types.enums.WAL_EVENT_TYPES``),
bound in this module under their names (so they pickle like the others)."""
globals().update((cls.__name__, cls) for cls in _WAL_MIRROR_CLASSES)


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class TaskStepClaimSkipped(EventPayload):
    event_type = EventType.task_step_claim_skipped
    task_id: str
    step_id: str | None
    code: str
    worker_agent_id: str | None
    worker_run_id: str | None


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class TaskWalReplayed(EventPayload):
    event_type = EventType.task_wal_replayed
    task_id: str
    wal_path: str
    records: int
    last_wal_seq: int
    torn_tail_truncated: bool


@dataclass(slots=True, frozen=True, eq=False, repr=False)
class TaskWalFailed(EventPayload):
    event_type = EventType.task_wal_failed
    wal_path: str
    task_id: Any
    phase: str
    error: JsonObject


def _concrete(cls: type[EventPayload]) -> list[type[EventPayload]]:
    found: list[type[EventPayload]] = []
    for sub in cls.__subclasses__():
        if "__slots__" not in sub.__dict__:
            continue  # the class a ``dataclass(slots=True)`` replaced (until the collector frees it)
        if "event_type" in sub.__dict__:
            found.append(sub)
        found.extend(_concrete(sub))
    return found


RuntimeEventPayload = (
    RunQueued | RunDequeued | RunCancelled | RunCompleted | CancelTimeout
    | LoopStarted | LoopCompleted | LoopAborted | LoopFailed | AbortedStreaming | AbortedTools
    | StopHookPrevented | Error | ContextBuilt | PromptCacheBreak
    | MessageCreated | MessageDelta | MessageCompleted | ReasoningDelta
    | ModelStarted | ModelProgress | ModelTextDelta | ToolCallDelta | ModelCompleted | ModelFailed | ProviderDebug
    | ModelFallback | ContextOverflow
    | ToolStarted | ToolProgress | ToolCompleted | ToolFailed | ToolDenied | PermissionFailed
    | HookStarted | HookCompleted | HookFailed | HookDenied
    | ChildAgentCreated | WorkerDispatched | WorkerDispatchFailed | ChildAgentCancelRequested
    | ChildAgentCancelled | ChildAgentCancelTimeout | ChildAgentCompleted | ChildAgentFailed
    | ChildResultSchemaValidationFailed
    | CompactPending | CompactStarted | CompactCompleted | CompactFailed
    | MemoryExtractionStarted | MemoryExtractionCompleted | MemoryExtractionFailed | McpServerFailed
    | JobStarted | JobCompleted | JobFailed
    | InboxDelivered | InboxDrained | TeammateSpawned | TeammateStopped
    | TaskWalMirror | TaskStepClaimSkipped | TaskWalReplayed | TaskWalFailed
)  # fmt: skip
"""``RuntimeEvent.payload``: one class per event type, told apart by the class attribute ``event_type``
(``isinstance`` / ``match`` narrow it). The 17 Task WAL events share :class:`TaskWalMirror` (one subclass
each, e.g. ``TaskCreated``, named after the event type)."""

PAYLOAD_CLASSES: Sequence[type[EventPayload]] = tuple(_concrete(EventPayload))
"""Every payload class (a test checks there is exactly one per event type)."""
PAYLOAD_MODELS: Mapping[EventType, type[EventPayload]] = {c.event_type: c for c in PAYLOAD_CLASSES}
"""``event_type`` → its payload class."""
WAL_MIRRORS: Mapping[str, type[TaskWalMirror]] = {
    c.event_type.value: c for c in PAYLOAD_CLASSES if issubclass(c, TaskWalMirror)
}
"""WAL record type → the class of the runtime event mirroring it."""


def payload_class(event_type: EventType | str) -> type[EventPayload]:
    """The payload class of ``event_type``."""
    return PAYLOAD_MODELS[EventType(event_type)]


def payload_from_data(event_type: EventType | str, data: Mapping[str, Any]) -> RuntimeEventPayload:
    """The typed payload of an event of ``event_type`` whose JSON payload is ``data``."""
    known = PAYLOAD_MODELS.get(event_type)  # type: ignore[arg-type]  # a member, or its value (same hash)
    cls = known if known is not None else PAYLOAD_MODELS[EventType(event_type)]
    payload: RuntimeEventPayload = cls.from_data(data)  # type: ignore[assignment]
    return payload  # every payload class is a member of the union


__all__ = [
    *(cls.__name__ for cls in PAYLOAD_CLASSES),
    *(
        "ABSENT",
        "Absent",
        "EventPayload",
        "JsonObject",
        "PAYLOAD_MODELS",
        "RuntimeEventPayload",
        "TaskWalMirror",
    ),
    *("payload_class", "payload_from_data"),
]
