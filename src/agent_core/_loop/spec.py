"""What the loop driver needs from its run: collaborators, the loop specification and its state."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agent_core._context.cache_watch import CacheWatch
from agent_core._context.calibration import TokenCalibration
from agent_core._context.composer import Composition
from agent_core._hooks.base import HookDispatcher
from agent_core._loop._limits import Breach, RunLimits
from agent_core._loop._output import OutputPolicy
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.recorder import RunRecorder
from agent_core._redaction import Redactor
from agent_core.config._pricing import Prices
from agent_core.config.model import ResolvedModelConfig
from agent_core.providers.base import ProviderAdapter
from agent_core.tools._pipeline import TurnOutcome
from agent_core.tools.context import RunScope, ToolRunSink
from agent_core.types.content import ContentBlock, ErrorPayload
from agent_core.types.enums import RunStatus
from agent_core.types.events import ContextBuilt
from agent_core.types.model import ModelRequest, ToolCall, Usage
from agent_core.types.tools import ToolDefinition

if TYPE_CHECKING:
    from agent_core._hooks.callbacks import CallbackHooks


class TurnExecutor(Protocol):
    """Runs the tool calls of one assistant message (``tools.pipeline.ToolExecutor``)."""

    async def execute_turn(
        self, calls: list[ToolCall], scope: RunScope, sink: ToolRunSink
    ) -> TurnOutcome: ...


class InboxHook(Protocol):
    """The run's inbox (``agent_core._inbox``): drained into one tail note before each model step."""

    async def before_model_step(self, turns: int) -> LoopOutcome | None:
        """Writes the agent's unread inbox entries as one ``<inbox>`` note (``turns`` model calls so far);
        an outcome ends the run instead of another model call (a wake-up run found nothing to read, a
        teammate was asked to shut down)."""
        ...


class PromptSource(Protocol):
    """Builds the composition of the next request for this run (docs/context.md,
    docs/compaction.md#budget-and-trimming)."""

    def compose(self, *, turn: int, substitutions: dict[str, ContentBlock]) -> Composition: ...

    async def degrade(self, composition: Composition) -> dict[str, ContentBlock]:
        """Artifactises large protected blocks (docs/compaction.md#the-conversation step 3.1); returns
        substitutions."""
        ...


class CompactionHooks(Protocol):
    async def before_build(self) -> None: ...

    async def after_build(self, composition: Composition) -> bool | None:
        """Called for a composition that fits, before its report; True when it triggered a compaction."""
        ...

    async def recover(self, composition: Composition) -> bool: ...


class NoCompaction:
    async def before_build(self) -> None:
        return None

    async def after_build(self, composition: Composition) -> bool | None:
        return None

    async def recover(self, composition: Composition) -> bool:
        return False


@dataclass(frozen=True, kw_only=True, slots=True)
class Fallback:
    """A ``[model] fallback_profiles`` model: its profile name, config and adapter (made on first use)."""

    profile: str
    config: ResolvedModelConfig
    adapter: Callable[[], ProviderAdapter]


class DebugArtifactSaver(Protocol):
    async def __call__(
        self, kind: str, data: Any, filename: str, metadata: dict[str, Any] | None = None
    ) -> str | None: ...


@dataclass(kw_only=True, eq=False, slots=True)
class LoopSpec:
    recorder: RunRecorder
    adapter: ProviderAdapter
    provider: str
    model: str
    temperature: float | None
    max_output_tokens: int | None
    scope: RunScope
    tools: list[ToolDefinition]
    executor: TurnExecutor
    hooks: HookDispatcher
    prompt: PromptSource
    redactor: Redactor
    max_turns: int
    request_metadata: dict[str, Any]
    compaction: CompactionHooks = field(default_factory=NoCompaction)
    debug: bool = False
    save_debug_artifact: DebugArtifactSaver | None = None
    """``(kind, data, filename) -> artifact_id`` used in debug mode for raw/provider/report artifacts."""
    on_model_request: Callable[[ModelRequest], None] | None = None
    output: OutputPolicy | None = None
    """Structured output of the run (``loop/_output.py``); ``None`` for a free-text answer."""
    interruption: Callable[[], Interruption] = field(default_factory=lambda: default_interruption)
    """Why the cancel event fired: ``cancelled`` on request, ``aborted`` (with an error) on timeout."""
    limits: RunLimits | None = None
    """The ``[limits]`` budget shared down the agent tree and the repeat detector (None: no limits)."""
    guardrails: CallbackHooks | None = None
    """The output guardrails of ``AgentRuntime(hooks=...)`` judging this run's final answer (root runs)."""
    cache_watch: CacheWatch | None = None
    """The agent's last request, for ``prompt_cache_break`` (``_context/cache_watch.py``)."""
    calibration: TokenCalibration | None = None
    """The runtime's per-model correction of the token estimate, learned from reported usage."""
    load_attachments: Callable[[list[str]], Awaitable[dict[str, bytes]]] | None = None
    """Bytes of the artifacts a request's image and document blocks reference."""
    fallbacks: list[Fallback] = field(default_factory=list)
    """The models tried, in order, when a call fails after its retries (``[model] fallback_profiles``)."""
    use_model: Callable[[ResolvedModelConfig], None] | None = None
    """Points the prompt at another model (its window, its reasoning) after a fallback."""
    model_prices: dict[str, Prices] = field(default_factory=dict)
    """``provider/model`` → prices of the models the run moved to (the run's usage per model)."""
    inbox: InboxHook | None = None
    """The agent's inbox, drained before every model step (``None``: the run reads no inbox)."""

    @property
    def cancel_event(self) -> asyncio.Event:
        return self.scope.cancel_event


@dataclass(frozen=True, slots=True)
class Interruption:
    status: RunStatus = RunStatus.cancelled
    reason: str = "cancel_requested"
    error: ErrorPayload | None = None


def default_interruption() -> Interruption:
    return Interruption()


@dataclass(slots=True)
class LoopState:
    """Mutable state of one loop run."""

    turns: int = 0
    continuations: int = 0
    continued_text: str = ""
    """The text of the answers cut off at ``max_tokens`` that the current continuation chain continues."""
    usages: list[Usage] = field(default_factory=list)
    final_text: str = ""
    final_node_id: str | None = None
    in_tools: bool = False
    pending_report: ContextBuilt | None = None
    stop_denials: int = 0
    call_ids: set[str] = field(default_factory=set)
    """Tool-call ids this run stored so far: a provider id reused later is replaced (issue 31 item 9)."""
    final: Breach | None = None
    """Set when a limit or a loop ends the run: the next model call is the final one, without tools."""
    usage_models: list[str] = field(default_factory=list)
    """``provider/model`` of each entry of ``usages`` (a run may change model: fallbacks)."""
    fallbacks_used: int = 0
    """How many ``[model] fallback_profiles`` models the run has moved to."""
    last_estimate: int = 0
    """The composer's estimate of the last request's prompt (for the token calibration)."""
    last_composition: Composition | None = None
    overflow_retry: bool = False
    """The request being retried after the provider said its prompt was too long (one retry)."""
    force_recovery: bool = False
    """The next build runs a recovery compaction even when the estimate fits (after an overflow)."""
    guard_rejections: dict[str, int] = field(default_factory=dict)
    """Final answers each output guardrail rejected so far (by its name)."""
