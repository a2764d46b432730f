"""Typed outcomes of one loop step and of a whole loop (docs/architecture.md#one-loop-driver)."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.model import ModelCompleted, ProviderErrorPayload, Usage


@dataclass(frozen=True, slots=True)
class StreamCompleted:
    event: ModelCompleted
    latency_ms: int
    first_token_ms: int | None = None
    """Milliseconds from the request to the first streamed token (text or tool call), when one arrived."""


@dataclass(frozen=True, slots=True)
class StreamFailed:
    error: ProviderErrorPayload
    partial_text: str
    partial_tool_calls: list[str] = field(default_factory=list)
    usage: Usage | None = None
    exc: BaseException | None = None
    """The unexpected exception behind an ``internal`` failure (its traceback is a debug artifact)."""


@dataclass(frozen=True, slots=True)
class StreamAborted:
    partial_text: str
    reason: str


StreamResult = StreamCompleted | StreamFailed | StreamAborted


@dataclass(slots=True)
class LoopOutcome:
    status: RunStatus
    end_reason: EndReason | None
    error: ErrorPayload | None = None
    final_node_id: str | None = None
    turn_count: int = 0
    usage: Usage = field(default_factory=Usage)
    final_text: str = ""
    usage_by_model: dict[str, Usage] = field(default_factory=dict)
    """``provider/model`` → the usage of that model's calls, when the run used more than one model."""

    @property
    def terminal(self) -> bool:
        return self.status.terminal
