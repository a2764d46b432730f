"""Runtime/domain layer types used by SDK callers, the loop and the event stream (docs/runs.md).

The result types of the cancel, list-sessions, delete and cleanup APIs are defined in
:mod:`agent_core.types._results` and importable from here too: they are loaded on first access (cold
start: a run creates none of them before its first model request).
"""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

import importlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from agent_core.types.base import StrictModel, empty_list, utc_now
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    DocumentBlock,
    ErrorPayload,
    ImageBlock,
    JsonBlock,
    TextBlock,
)
from agent_core.types.enums import (
    DEBUG_ONLY_EVENTS,
    AgentType,
    EndReason,
    EventLevel,
    EventType,
    MessageRole,
    NodeType,
    RunStatus,
    TaskStatus,
)

if TYPE_CHECKING:
    from agent_core.types._results import CancelResult as CancelResult
    from agent_core.types._results import CleanupFailure as CleanupFailure
    from agent_core.types._results import CleanupItem as CleanupItem
    from agent_core.types._results import CleanupResult as CleanupResult
    from agent_core.types._results import DeleteCounts as DeleteCounts
    from agent_core.types._results import DeleteFailure as DeleteFailure
    from agent_core.types._results import DeleteSessionResult as DeleteSessionResult
    from agent_core.types._results import RewindResult as RewindResult
    from agent_core.types._results import RewindSkip as RewindSkip
    from agent_core.types._results import SessionSummary as SessionSummary
    from agent_core.types._results import SkillSummary as SkillSummary
    from agent_core.types._results import TaskWalSummary as TaskWalSummary
    from agent_core.types.events import RuntimeEventPayload

_RESULTS = frozenset(
    {
        "CancelResult",
        "CleanupFailure",
        "CleanupItem",
        "CleanupResult",
        "DeleteCounts",
        "DeleteFailure",
        "DeleteSessionResult",
        "RewindResult",
        "RewindSkip",
        "SessionSummary",
        "SkillSummary",
        "TaskWalSummary",
    }
)
"""The names :mod:`agent_core.types._results` defines and this module re-exports on first access."""


def __getattr__(name: str) -> Any:
    if name not in _RESULTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("agent_core.types._results"), name)
    globals()[name] = value
    return value


class Attachment(StrictModel):
    """An image or PDF sent with a :class:`UserMessage`: the runtime stores the bytes as an artifact (never
    inline in the session database) and the message carries an :class:`ImageBlock` / :class:`DocumentBlock`
    referencing it. ``mime_type`` is sniffed from the bytes when not given; an image larger than
    ``[model] image_max_edge_px`` / ``image_max_bytes`` is downscaled when it is stored."""

    data: bytes
    mime_type: str = ""
    filename: str | None = None
    detail: Literal["auto", "low", "high"] | None = None

    @classmethod
    def from_path(
        cls, path: "str | Path", *, detail: 'Literal["auto", "low", "high"] | None' = None
    ) -> "Attachment":
        """Reads ``path`` (an image or a PDF; the type comes from its bytes, else its extension)."""
        from pathlib import Path as _Path

        file = _Path(path)
        return cls(data=file.read_bytes(), filename=file.name, detail=detail)

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        mime_type: str = "",
        *,
        filename: str | None = None,
        detail: 'Literal["auto", "low", "high"] | None' = None,
    ) -> "Attachment":
        return cls(data=data, mime_type=mime_type, filename=filename, detail=detail)


class UserMessage(StrictModel):
    """A user input; a bare ``str`` becomes ``[TextBlock(text=...)]`` (docs/runs.md#starting-a-run).

    ``attachments`` (images, PDFs) are stored as artifacts when the message is written and become
    :class:`ImageBlock` / :class:`DocumentBlock` content after the text; a message may consist of
    attachments only. :meth:`with_files` builds one from a text and file paths or bytes.
    """

    content: list[ContentBlock] = Field(default_factory=empty_list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    attachments: list[Attachment] = Field(default_factory=empty_list)

    @classmethod
    def with_files(
        cls,
        text: str | None,
        *files: "str | Path | bytes | Attachment",
        detail: 'Literal["auto", "low", "high"] | None' = None,
    ) -> "UserMessage":
        """``text`` plus images or PDFs given as paths, bytes or :class:`Attachment` s."""
        attachments: list[Attachment] = []
        for item in files:
            if isinstance(item, Attachment):
                attachments.append(item)
            elif isinstance(item, bytes | bytearray):
                attachments.append(Attachment(data=bytes(item), detail=detail))
            else:
                attachments.append(Attachment.from_path(item, detail=detail))
        content = [TextBlock(text=text)] if text and text.strip() else []
        return cls(content=content, attachments=attachments)

    @field_validator("content", mode="before")
    @classmethod
    def _from_str(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        return value

    @field_validator("content")
    @classmethod
    def _allowed_blocks(cls, blocks: list[ContentBlock]) -> list[ContentBlock]:
        for block in blocks:
            if not isinstance(block, TextBlock | JsonBlock | ArtifactRefBlock | ImageBlock | DocumentBlock):
                raise ValueError(f"{block.type!r} blocks are not allowed in a user message")
        texts = [b for b in blocks if isinstance(b, TextBlock)]
        if texts and all(not b.text.strip() for b in texts) and len(texts) == len(blocks):
            raise ValueError("a user message text must not be empty or whitespace-only")
        for block in texts:
            if not block.text.strip():
                raise ValueError("a user message text block must not be empty or whitespace-only")
        return blocks

    @model_validator(mode="after")
    def _not_empty(self) -> "UserMessage":
        if not self.content and not self.attachments:
            raise ValueError("a user message needs at least one content block or attachment")
        return self


TASK_TOOL_PREFIX = "agent.task_"
"""The Task board tools' name prefix: their tool events are debug-only."""
_TOOL_EVENTS = frozenset(
    {
        EventType.tool_started,
        EventType.tool_progress,
        EventType.tool_completed,
        EventType.tool_failed,
        EventType.tool_denied,
    }
)


class RuntimeEvent(StrictModel):
    """One event of a run: live on ``run.events()``, stored (``seq`` set) unless transient.

    ``payload`` is the typed payload of the event's type (:data:`agent_core.types.events.RuntimeEventPayload`:
    ``MessageDelta``, ``ToolStarted`` ...), built from ``data`` when read. ``data`` is the payload in its JSON
    form: the ``payload`` object of the event's JSON (``model_dump``, SSE frames, the stored event), and the
    name to construct an event with (``RuntimeEvent(..., payload={...})`` and ``data={...}`` both work).
    """

    model_config = ConfigDict(
        extra="forbid",
        defer_build=True,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )

    event_id: str
    seq: int | None = None
    run_seq: int | None = None
    session_id: str
    agent_id: str | None = None
    run_id: str | None = None
    level: Literal["debug", "info", "warning", "error"] = EventLevel.info.value
    event_type: EventType
    node_id: str | None = None
    tool_call_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict, alias="payload")
    """The payload as a JSON object (``payload`` in the JSON form)."""
    created_at: datetime = Field(default_factory=utc_now)

    @property
    def user_visible(self) -> bool:
        """Whether ``run.events(debug=False)`` (and a non-debug SSE stream) delivers this event: not a
        debug-only type, and not a tool event of an ``agent.task_*`` tool (Task internals are debug-only)."""
        event_type = self.event_type
        if event_type in DEBUG_ONLY_EVENTS:
            return False
        if event_type in _TOOL_EVENTS:
            name = self.data.get("tool_name")
            return not (isinstance(name, str) and name.startswith(TASK_TOOL_PREFIX))
        return True

    @property
    def payload(self) -> "RuntimeEventPayload":
        """The typed payload (a new object on each access, read from ``data``)."""
        from agent_core.types.events import payload_from_data  # off the import path of this module

        return payload_from_data(self.event_type, self.data)


class NestedRuntimeEvent(RuntimeEvent):
    """A descendant run's live event on an ancestor's ``events(include_children=True)`` stream."""

    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    """The parent's agent-tool call that started the emitting run (``None`` for compaction forks)."""


class AgentDefinition(StrictModel):
    agent_definition_id: str
    name: str
    description: str
    body: str = ""
    model_profile: str | dict[str, Any] | None = None
    suggested_tools: list[str] = Field(default_factory=empty_list)
    tags: list[str] = Field(default_factory=empty_list)
    overrides: str | None = None
    source: Literal["builtin", "user", "code"]
    metadata: dict[str, Any] = Field(default_factory=dict)


class Node(StrictModel):
    node_id: str
    node_seq: int
    session_id: str
    parent_id: str | None = None
    agent_id: str
    run_id: str | None = None
    role: MessageRole
    node_type: NodeType
    content: list[ContentBlock]
    metadata: dict[str, Any] = Field(default_factory=dict)
    token_count: int | None = None
    created_at: datetime


class ArtifactRef(StrictModel):
    artifact_id: str
    session_id: str
    agent_id: str | None = None
    run_id: str | None = None
    node_id: str | None = None
    tool_call_id: str | None = None
    path: str
    filename: str | None = None
    mime_type: str | None = None
    size_bytes: int | None = None
    summary: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime


class RunInfo(StrictModel):
    run_id: str
    session_id: str
    agent_id: str
    agent_type: AgentType | None = None
    purpose: str | None = None
    parent_run_id: str | None = None
    status: RunStatus
    end_reason: EndReason | None = None
    turn_count: int | None = None
    usage: dict[str, Any] | None = None
    error: ErrorPayload | None = None
    permission_mode: str | None = None
    """The run's permission mode (``None`` for runs stored before modes existed)."""
    created_at: datetime
    updated_at: datetime


class UsageTotals(StrictModel):
    """Token usage and cost summed over runs (docs/runs.md#usage-and-cost); optional counters stay ``None``
    unless a provider reported them, ``cost_usd`` unless a price is configured."""

    runs: int = 0
    input_tokens: int = 0
    """The whole prompt: ``uncached_input_tokens`` + ``cache_read_tokens`` + ``cache_write_tokens``."""
    output_tokens: int = 0
    total_tokens: int = 0
    uncached_input_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def from_records(cls, records: Sequence[Mapping[str, Any] | None]) -> "UsageTotals":
        """Sums run usage records (``runs.usage_json`` objects); ``None`` records are skipped."""
        totals = cls()
        for record in records:
            if not record:
                continue
            totals.runs += 1
            for name in ("input_tokens", "output_tokens", "total_tokens"):
                value = record.get(name)
                if isinstance(value, int):
                    setattr(totals, name, getattr(totals, name) + value)
            for name in ("cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd"):
                value = record.get(name)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    setattr(totals, name, (getattr(totals, name) or 0) + value)
            uncached = record.get("uncached_input_tokens")
            if not isinstance(uncached, int) or isinstance(uncached, bool):  # a record from before the split
                uncached = _count(record, "input_tokens")
                uncached -= _count(record, "cache_read_tokens") + _count(record, "cache_write_tokens")
            totals.uncached_input_tokens += max(0, uncached)
        if totals.cost_usd is not None:
            totals.cost_usd = round(totals.cost_usd, 9)
        return totals


def _count(record: Mapping[str, Any], name: str) -> int:
    value = record.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class ChildAgentResult(StrictModel):
    status: Literal["completed", "failed", "cancelled"]
    summary: str = ""
    findings: list[Any] = Field(default_factory=empty_list)
    artifacts: list[Any] = Field(default_factory=empty_list)
    step_id: str | None = None
    proposed_actions: list[Any] = Field(default_factory=empty_list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class ChildSummary(StrictModel):
    child_run_id: str
    child_agent_id: str
    agent_type: AgentType | None = None
    purpose: str | None = None
    status: RunStatus
    result_summary: str | None = None


class TaskInspectView(StrictModel):
    task_id: str | None = None
    wal_path: str
    status: TaskStatus | None = None
    task: dict[str, Any] | None = None
    wal_events: list[dict[str, Any]] = Field(default_factory=empty_list)
    error: ErrorPayload | None = None


class ReplayResult(StrictModel):
    session_id: str
    run_id: str | None = None
    runs: list[RunInfo] = Field(default_factory=empty_list)
    nodes: list[Node] = Field(default_factory=empty_list)
    events: list[RuntimeEvent] = Field(default_factory=empty_list)
    artifacts: list[ArtifactRef] = Field(default_factory=empty_list)
    children: list[ChildSummary] = Field(default_factory=empty_list)
    tasks: list[TaskInspectView] = Field(default_factory=empty_list)
    usage: UsageTotals | None = None
    """The session's usage: every run of the session (children and compaction included)."""
    redacted: bool = True


class InspectAgent(StrictModel):
    agent_id: str
    agent_type: AgentType | None = None
    purpose: str | None = None
    agent_definition_id: str | None = None
    parent_agent_id: str | None = None


class InspectResult(StrictModel):
    run: RunInfo
    agent: InspectAgent
    nodes: list[Node] = Field(default_factory=empty_list)
    events: list[RuntimeEvent] = Field(default_factory=empty_list)
    artifacts: list[ArtifactRef] = Field(default_factory=empty_list)
    result: ChildAgentResult | None = None
    model_request: dict[str, Any] | None = None
    redacted: bool = True


class TokenBudget(StrictModel):
    context_window: int
    reserve_output_tokens: int
    static_system_tokens: int
    dynamic_system_budget: int
    dynamic_system_tokens: int
    non_system_budget: int
    non_system_tokens: int
    total_tokens: int


class SystemBlockReport(StrictModel):
    block_id: str
    source: str
    dynamic: bool
    priority: int
    token_count: int
    selected: bool
    reason: str | None = None


class SyntheticBlockReport(StrictModel):
    source_node_id: str
    source_node_type: NodeType
    token_count: int


class ArtifactDegradation(StrictModel):
    node_id: str
    artifact_id: str
    action: Literal["artifact_ref", "summary"]


class ContextBuildReport(StrictModel):
    run_id: str
    agent_id: str
    turn: int
    provider: str
    model: str
    token_budget: TokenBudget
    included_node_ids: list[str] = Field(default_factory=empty_list)
    excluded_node_ids: list[str] = Field(default_factory=empty_list)
    excluded_reasons: dict[str, str] = Field(default_factory=dict)
    compaction_node_id: str | None = None
    system_blocks: list[SystemBlockReport] = Field(default_factory=empty_list)
    synthetic_blocks: list[SyntheticBlockReport] = Field(default_factory=empty_list)
    artifact_degradations: list[ArtifactDegradation] = Field(default_factory=empty_list)
    recovery_compact: bool = False
    detail_artifact_id: str | None = None
    unpaired_tool_call_ids: list[str] = Field(default_factory=empty_list)
    compact_triggered: Literal["none", "auto", "recovery"] = "none"
    """docs/compaction.md#budget-and-trimming extra payload key: which compact (if any) this build
    triggered."""
    task_board: str | None = None
    """The ephemeral task board text of this build (docs/context.md#the-task-board-summary), so requests can
    be rebuilt."""
    estimate_factor: float = 1.0
    """The model's learned real-tokens-per-estimated-token factor; ``token_budget`` is in estimated
    tokens, the window it was compared with is the model's divided by this factor (issue 34)."""
    reasoning_dropped: dict[str, str] = Field(default_factory=dict)
    """Included node id → why its reasoning blocks were not sent: reasoning goes back only to the
    provider and model that produced it (issue 34)."""
