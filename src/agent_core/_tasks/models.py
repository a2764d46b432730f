"""Task DAG state models and the Task WAL record schema (docs/task-board.md#wal-records,
docs/task-board.md#data-model).

* :class:`Task` / :class:`TaskStep` are the in-memory DAG state (mutated only by ``TaskDag.apply``).
* :class:`TaskSnapshot` / :class:`StepSnapshot` are the fixed ``task_created`` snapshot shapes.
* :class:`TaskWalEvent` is one WAL line: exactly the ten common fields, ``extra="forbid"``. Each of the 17
  event types has its own subclass whose ``payload`` model holds exactly the docs/task-board.md#wal-records
  keys, all required (``null`` / ``[]`` where no value applies). :func:`parse_wal_event` validates a line
  against the discriminated union of the 17 subclasses; any other ``event_type`` is rejected.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, model_validator
from pydantic_core import SchemaValidator

from agent_core.types.base import StrictModel
from agent_core.types.enums import StepStatus, TaskStatus

TASK_ID_PATTERN = r"^[a-z0-9_-]{1,64}$"
"""Pattern shared by ``task_id`` and ``step_id`` (docs/task-board.md#data-model)."""
TaskIdStr = Annotated[str, StringConstraints(pattern=TASK_ID_PATTERN)]
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]
CORE_ACTOR = "core"
"""``actor_agent_id`` of records without a triggering run (restore-time reconciliation)."""

WalTimestamp = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|\+00:00)$")
]
"""UTC ISO 8601 (``Z`` or ``+00:00``); core writes millisecond precision with ``Z``."""

TERMINAL_TASK_STATUSES = frozenset({TaskStatus.completed, TaskStatus.failed, TaskStatus.cancelled})
CLOSED_STEP_STATUSES = frozenset({StepStatus.completed, StepStatus.failed, StepStatus.cancelled})
UNFINISHED_STEP_STATUSES = frozenset(
    {StepStatus.pending, StepStatus.ready, StepStatus.blocked, StepStatus.claimed, StepStatus.running}
)
HELD_STEP_STATUSES = frozenset({StepStatus.claimed, StepStatus.running})


# --------------------------------------------------------------------------------------------------
# In-memory state
# --------------------------------------------------------------------------------------------------


class TaskStep(BaseModel):
    """One schedulable step (docs/task-board.md#data-model). ``created_at``, ``status_reason`` and
    ``metadata`` are runtime fields rebuilt by replay and never part of the ``task_created`` snapshot."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    step_id: str
    title: str
    summary: str
    status: StepStatus = StepStatus.pending
    depends_on_step_ids: list[str] = Field(default_factory=list)
    required: bool = True
    worker_pool_id: str | None = None
    claimed_by_agent_id: str | None = None
    claimed_by_run_id: str | None = None
    lease_expires_at: str | None = None
    result_summary: str | None = None
    artifact_ids: list[str] = Field(default_factory=list)
    updated_at: str
    created_at: str
    status_reason: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    """``dispatch_snapshot`` and ``updated_after_dispatch`` while the step is held; ``{}`` otherwise."""

    def to_snapshot(self) -> StepSnapshot:
        return StepSnapshot(
            step_id=self.step_id,
            title=self.title,
            summary=self.summary,
            status=self.status,
            depends_on_step_ids=list(self.depends_on_step_ids),
            required=self.required,
            worker_pool_id=self.worker_pool_id,
            claimed_by_agent_id=self.claimed_by_agent_id,
            claimed_by_run_id=self.claimed_by_run_id,
            lease_expires_at=self.lease_expires_at,
            result_summary=self.result_summary,
            artifact_ids=list(self.artifact_ids),
            updated_at=self.updated_at,
        )

    def reset_execution(self) -> None:
        """Clears claim, lease, results, reason and metadata (any transition back to ``pending``)."""
        self.claimed_by_agent_id = None
        self.claimed_by_run_id = None
        self.lease_expires_at = None
        self.result_summary = None
        self.artifact_ids = []
        self.status_reason = None
        self.metadata = {}


class Task(BaseModel):
    """One Task DAG (docs/task-board.md#data-model); ``steps`` are kept in step creation order."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    task_id: str
    wal_path: str
    title: str
    summary: str
    status: TaskStatus = TaskStatus.pending
    root_step_ids: list[str] = Field(default_factory=list)
    steps: list[TaskStep] = Field(default_factory=list)
    created_by_agent_id: str
    created_by_run_id: str
    created_at: str
    updated_at: str

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_TASK_STATUSES


# --------------------------------------------------------------------------------------------------
# The task_created snapshot (docs/task-board.md#wal-records Decisions)
# --------------------------------------------------------------------------------------------------


class StepSnapshot(StrictModel):
    step_id: TaskIdStr
    title: NonEmptyStr
    summary: NonEmptyStr
    status: StepStatus
    depends_on_step_ids: list[str]
    required: bool
    worker_pool_id: str | None
    claimed_by_agent_id: str | None
    claimed_by_run_id: str | None
    lease_expires_at: str | None
    result_summary: str | None
    artifact_ids: list[str]
    updated_at: str


class TaskSnapshot(StrictModel):
    task_id: TaskIdStr
    wal_path: str
    title: NonEmptyStr
    summary: NonEmptyStr
    status: TaskStatus
    root_step_ids: list[str]
    steps: list[StepSnapshot]
    created_by_agent_id: str
    created_by_run_id: str
    created_at: str
    updated_at: str


class TaskSummaryPayload(StrictModel):
    """``task_updated.payload.task_summary``."""

    task_id: str
    title: str
    status: TaskStatus
    step_status_counts: dict[str, int]


# --------------------------------------------------------------------------------------------------
# Payloads: exactly the docs/task-board.md#wal-records keys, every key required
# --------------------------------------------------------------------------------------------------


class TaskCreatedPayload(StrictModel):
    task: TaskSnapshot


class TaskRunningPayload(StrictModel):
    previous_status: TaskStatus
    status: Literal["running"]
    reason: str | None


class TaskUpdatedPayload(StrictModel):
    operations: list[dict[str, Any]]
    updated_after_dispatch_step_ids: list[str]
    task_summary: TaskSummaryPayload


class TaskReopenedPayload(StrictModel):
    previous_status: TaskStatus
    status: Literal["pending"]
    reason: str | None


class TaskCompletedPayload(StrictModel):
    result_summary: str | None
    cancelled_optional_step_ids: list[str]


class TaskFailedPayload(StrictModel):
    reason: str | None
    failed_step_ids: list[str]


class TaskCancelledPayload(StrictModel):
    reason: str | None
    cancelled_step_ids: list[str]


class StepReadyPayload(StrictModel):
    previous_status: StepStatus
    status: Literal["ready"]
    depends_on_step_ids: list[str]


class StepClaimedPayload(StrictModel):
    previous_status: StepStatus
    claimed_by_agent_id: str
    claimed_by_run_id: str
    lease_expires_at: str


class StepStartedPayload(StrictModel):
    previous_status: StepStatus
    status: Literal["running"]
    lease_expires_at: str


class StepUpdatedPayload(StrictModel):
    previous_status: StepStatus
    status: StepStatus
    result_summary: str | None
    artifact_ids: list[str]
    lease_expires_at: str | None


class StepBlockedPayload(StrictModel):
    previous_status: StepStatus
    reason: str | None
    result_summary: str | None
    artifact_ids: list[str]


class StepCompletedPayload(StrictModel):
    previous_status: StepStatus
    result_summary: str | None
    artifact_ids: list[str]


class StepFailedPayload(StrictModel):
    previous_status: StepStatus
    reason: str | None
    result_summary: str | None
    artifact_ids: list[str]


class StepCancelledPayload(StrictModel):
    previous_status: StepStatus
    reason: str | None
    result_summary: str | None


class StepReopenedPayload(StrictModel):
    previous_status: StepStatus
    status: Literal["pending"]
    reason: str | None


class StepLeaseExpiredPayload(StrictModel):
    previous_status: StepStatus
    claimed_by_agent_id: str
    claimed_by_run_id: str
    expired_at: str


WalPayload = (
    TaskCreatedPayload
    | TaskRunningPayload
    | TaskUpdatedPayload
    | TaskReopenedPayload
    | TaskCompletedPayload
    | TaskFailedPayload
    | TaskCancelledPayload
    | StepReadyPayload
    | StepClaimedPayload
    | StepStartedPayload
    | StepUpdatedPayload
    | StepBlockedPayload
    | StepCompletedPayload
    | StepFailedPayload
    | StepCancelledPayload
    | StepReopenedPayload
    | StepLeaseExpiredPayload
)

WalEventType = Literal[
    "task_created",
    "task_running",
    "task_updated",
    "task_reopened",
    "task_completed",
    "task_failed",
    "task_cancelled",
    "task_step_ready",
    "task_step_claimed",
    "task_step_started",
    "task_step_updated",
    "task_step_blocked",
    "task_step_completed",
    "task_step_failed",
    "task_step_cancelled",
    "task_step_reopened",
    "task_step_lease_expired",
]

PAYLOAD_MODELS: dict[str, type[StrictModel]] = {
    "task_created": TaskCreatedPayload,
    "task_running": TaskRunningPayload,
    "task_updated": TaskUpdatedPayload,
    "task_reopened": TaskReopenedPayload,
    "task_completed": TaskCompletedPayload,
    "task_failed": TaskFailedPayload,
    "task_cancelled": TaskCancelledPayload,
    "task_step_ready": StepReadyPayload,
    "task_step_claimed": StepClaimedPayload,
    "task_step_started": StepStartedPayload,
    "task_step_updated": StepUpdatedPayload,
    "task_step_blocked": StepBlockedPayload,
    "task_step_completed": StepCompletedPayload,
    "task_step_failed": StepFailedPayload,
    "task_step_cancelled": StepCancelledPayload,
    "task_step_reopened": StepReopenedPayload,
    "task_step_lease_expired": StepLeaseExpiredPayload,
}
"""``event_type`` → payload model (the 17 WAL record types, in contract order)."""

TERMINAL_EVENT_STATUS: dict[str, TaskStatus] = {
    "task_completed": TaskStatus.completed,
    "task_failed": TaskStatus.failed,
    "task_cancelled": TaskStatus.cancelled,
}


# --------------------------------------------------------------------------------------------------
# WAL records
# --------------------------------------------------------------------------------------------------


def _common_rules(event: TaskWalEvent) -> TaskWalEvent:
    """:class:`TaskWalEvent`'s after-validator (a module function, so the WAL replay's fast path can find it
    in the core schema: :func:`unchecked_actor_validator`)."""
    if (event.actor_run_id is None) != (event.actor_agent_id == CORE_ACTOR):
        raise ValueError('actor_run_id may be null only (and must be null) when actor_agent_id is "core"')
    if type(event) is TaskWalEvent:  # subclasses enforce these through their field types
        if type(event.payload) is not PAYLOAD_MODELS[event.event_type]:
            raise ValueError(f"payload does not match event_type {event.event_type!r}")
        if event.event_type.startswith("task_step_") != (event.step_id is not None) or event.step_id == "":
            raise ValueError("step_id is required for task_step_* events and null for task-level events")
    return event


class TaskWalEvent(StrictModel):
    """One WAL line: exactly the ten common fields of docs/task-board.md#wal-records.

    Use the per-type subclasses (or :func:`parse_wal_event`) to build and read records; the base class
    checks that its ``payload`` model matches ``event_type`` when used directly.
    """

    wal_seq: int = Field(ge=1, strict=True)
    session_id: NonEmptyStr
    event_id: Annotated[str, StringConstraints(pattern=r"^evt_[A-Za-z0-9_]+$")]
    event_type: WalEventType
    actor_agent_id: NonEmptyStr
    actor_run_id: str | None
    task_id: NonEmptyStr
    step_id: str | None
    payload: WalPayload
    created_at: WalTimestamp

    _common_rules = model_validator(mode="after")(_common_rules)

    def to_line(self) -> bytes:
        """The record as one JSON line terminated by ``\\n``."""
        return self.model_dump_json().encode("utf-8") + b"\n"

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class _TaskLevelEvent(TaskWalEvent):
    step_id: None


class _StepLevelEvent(TaskWalEvent):
    step_id: NonEmptyStr


class TaskCreatedEvent(_TaskLevelEvent):
    event_type: Literal["task_created"]
    payload: TaskCreatedPayload


class TaskRunningEvent(_TaskLevelEvent):
    event_type: Literal["task_running"]
    payload: TaskRunningPayload


class TaskUpdatedEvent(_TaskLevelEvent):
    event_type: Literal["task_updated"]
    payload: TaskUpdatedPayload


class TaskReopenedEvent(_TaskLevelEvent):
    event_type: Literal["task_reopened"]
    payload: TaskReopenedPayload


class TaskCompletedEvent(_TaskLevelEvent):
    event_type: Literal["task_completed"]
    payload: TaskCompletedPayload


class TaskFailedEvent(_TaskLevelEvent):
    event_type: Literal["task_failed"]
    payload: TaskFailedPayload


class TaskCancelledEvent(_TaskLevelEvent):
    event_type: Literal["task_cancelled"]
    payload: TaskCancelledPayload


class StepReadyEvent(_StepLevelEvent):
    event_type: Literal["task_step_ready"]
    payload: StepReadyPayload


class StepClaimedEvent(_StepLevelEvent):
    event_type: Literal["task_step_claimed"]
    payload: StepClaimedPayload


class StepStartedEvent(_StepLevelEvent):
    event_type: Literal["task_step_started"]
    payload: StepStartedPayload


class StepUpdatedEvent(_StepLevelEvent):
    event_type: Literal["task_step_updated"]
    payload: StepUpdatedPayload


class StepBlockedEvent(_StepLevelEvent):
    event_type: Literal["task_step_blocked"]
    payload: StepBlockedPayload


class StepCompletedEvent(_StepLevelEvent):
    event_type: Literal["task_step_completed"]
    payload: StepCompletedPayload


class StepFailedEvent(_StepLevelEvent):
    event_type: Literal["task_step_failed"]
    payload: StepFailedPayload


class StepCancelledEvent(_StepLevelEvent):
    event_type: Literal["task_step_cancelled"]
    payload: StepCancelledPayload


class StepReopenedEvent(_StepLevelEvent):
    event_type: Literal["task_step_reopened"]
    payload: StepReopenedPayload


class StepLeaseExpiredEvent(_StepLevelEvent):
    event_type: Literal["task_step_lease_expired"]
    payload: StepLeaseExpiredPayload


EVENT_CLASSES: dict[str, type[TaskWalEvent]] = {
    "task_created": TaskCreatedEvent,
    "task_running": TaskRunningEvent,
    "task_updated": TaskUpdatedEvent,
    "task_reopened": TaskReopenedEvent,
    "task_completed": TaskCompletedEvent,
    "task_failed": TaskFailedEvent,
    "task_cancelled": TaskCancelledEvent,
    "task_step_ready": StepReadyEvent,
    "task_step_claimed": StepClaimedEvent,
    "task_step_started": StepStartedEvent,
    "task_step_updated": StepUpdatedEvent,
    "task_step_blocked": StepBlockedEvent,
    "task_step_completed": StepCompletedEvent,
    "task_step_failed": StepFailedEvent,
    "task_step_cancelled": StepCancelledEvent,
    "task_step_reopened": StepReopenedEvent,
    "task_step_lease_expired": StepLeaseExpiredEvent,
}

AnyWalEvent = Annotated[
    TaskCreatedEvent
    | TaskRunningEvent
    | TaskUpdatedEvent
    | TaskReopenedEvent
    | TaskCompletedEvent
    | TaskFailedEvent
    | TaskCancelledEvent
    | StepReadyEvent
    | StepClaimedEvent
    | StepStartedEvent
    | StepUpdatedEvent
    | StepBlockedEvent
    | StepCompletedEvent
    | StepFailedEvent
    | StepCancelledEvent
    | StepReopenedEvent
    | StepLeaseExpiredEvent,
    Field(discriminator="event_type"),
]

wal_event_adapter: TypeAdapter[TaskWalEvent] = TypeAdapter(AnyWalEvent, config=ConfigDict(defer_build=True))
"""Validates one WAL record (dict or JSON) into its per-type subclass."""


@cache
def unchecked_actor_validator() -> SchemaValidator:
    """:data:`wal_event_adapter`'s validator without the per-record Python actor rule (replay's fast path).

    It accepts a superset of what the adapter accepts: exactly the records that also satisfy the actor rule
    (``actor_run_id`` is null iff ``actor_agent_id`` is ``"core"``) are the ones the adapter accepts, as the same per-type subclass instances
    (the model schemas are shared; only the ``function-after`` wrappers calling ``_common_rules`` are
    dropped, which for subclasses checks only the actor rule). Built on first use.
    """

    def strip(node: Any) -> Any:
        if isinstance(node, dict):
            if node.get("type") == "function-after" and node["function"].get("function") is _common_rules:
                return strip(node["schema"])
            return {key: strip(value) for key, value in node.items()}
        if isinstance(node, list):
            return [strip(value) for value in node]
        return node

    wal_event_adapter.rebuild()  # a no-op once built; the deferred adapter has only a placeholder schema
    return SchemaValidator(strip(wal_event_adapter.core_schema))


def parse_wal_event(data: bytes | str | dict[str, Any]) -> TaskWalEvent:
    """Validates one WAL line; raises :class:`pydantic.ValidationError` on any schema violation."""
    if isinstance(data, dict):
        return wal_event_adapter.validate_python(data)
    return wal_event_adapter.validate_json(data)


def make_wal_event(
    event_type: str,
    *,
    wal_seq: int,
    session_id: str,
    event_id: str,
    actor_agent_id: str,
    actor_run_id: str | None,
    task_id: str,
    step_id: str | None,
    payload: StrictModel,
    created_at: str,
) -> TaskWalEvent:
    """Builds a validated record of ``event_type`` (its subclass chosen from :data:`EVENT_CLASSES`)."""
    cls = EVENT_CLASSES[event_type]
    return cls(
        wal_seq=wal_seq,
        session_id=session_id,
        event_id=event_id,
        event_type=event_type,
        actor_agent_id=actor_agent_id,
        actor_run_id=actor_run_id,
        task_id=task_id,
        step_id=step_id,
        payload=payload,
        created_at=created_at,
    )
