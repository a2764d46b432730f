"""The seam between the loop/tool pipeline and user hooks (docs/hooks-and-mcp.md#hooks).

The pipeline and the loop call a :class:`HookDispatcher`; the hooks package implements it from
``${SOONG_AGENT_HOME}/hooks.json``. :data:`NO_HOOKS` is the dispatcher used when hooks are disabled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agent_core.tools.context import RunScope, ToolRunSink
from agent_core.tools.preflight import Preflight
from agent_core.types.enums import HookPhase
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

SessionSource = Literal["new", "resume"]
Reviser = Callable[[dict[str, Any]], Awaitable[tuple[ToolCall, Preflight]]]
"""Validates arguments a PreToolUse hook substituted and pre-flights the call again: ``(call, preflight)``;
raises :class:`~agent_core.errors.AgentCoreError` when they are invalid (given by the tool pipeline)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HookOutcome:
    """Aggregated result of the hooks matched for one phase.

    ``decision`` is ``"deny"`` if any matched hook denied, ``"allow"`` if at least one ran and none
    denied, ``None`` if no hook matched. ``summary()`` is the ``hook_summary`` of PermissionRequest and
    events: ``{"decision", "reasons", "hook_count"}``.
    """

    decision: Literal["allow", "deny"] | None = None
    reasons: list[str] = field(default_factory=list)
    hook_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    call: ToolCall | None = None
    """PreToolUse: the call with the arguments an in-process hook substituted (``None``: unchanged)."""
    preflight: Preflight | None = None
    """PreToolUse: the pre-flight of :attr:`call`."""
    rewritten_by: list[str] = field(default_factory=list)
    """The hooks that substituted the arguments, in order."""

    @property
    def denied(self) -> bool:
        return self.decision == "deny"

    def summary(self) -> dict[str, Any] | None:
        if self.hook_count == 0:
            return None
        summary: dict[str, Any] = {
            "decision": self.decision,
            "reasons": list(self.reasons),
            "hook_count": self.hook_count,
        }
        if self.rewritten_by:
            summary["arguments_rewritten_by"] = list(self.rewritten_by)
        return summary


NO_OUTCOME = HookOutcome()
INTERNAL_PURPOSES = frozenset({"compact", "memory_extraction", "memory_recall"})
"""Purposes (``RunScope.purpose``) of the runtime's internal jobs: no hook runs for them."""


class HookDispatcher(Protocol):
    """Runs the hooks of one phase and emits ``hook_*`` events through ``sink``.

    Optional keyword arguments feed the ``HookInput`` of docs/hooks-and-mcp.md#running-a-hook: ``source``
    (SessionStart), ``message`` (UserPromptSubmit: the user message as JSON), ``preflight``/``duration_ms``
    (PostToolUse; a dispatcher may remember the PreToolUse pre-flight itself), ``turn_count`` and
    ``stop_hook_active`` (Stop). Observe-only phases never return a deny. A dispatcher whose hooks may
    substitute a call's arguments says so with ``revises_arguments = True``: the pipeline then passes
    ``revise`` (a :data:`Reviser`) to its ``pre_tool_use`` and takes ``HookOutcome.call``.
    """

    async def session_start(
        self, *, scope: RunScope, sink: ToolRunSink, source: SessionSource = "new"
    ) -> HookOutcome: ...

    async def user_prompt_submit(
        self, *, scope: RunScope, sink: ToolRunSink, prompt: str, message: dict[str, Any] | None = None
    ) -> HookOutcome: ...

    async def pre_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        preflight: Preflight,
    ) -> HookOutcome: ...

    async def post_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        result: ToolResult,
        preflight: Preflight | None = None,
        duration_ms: int | None = None,
    ) -> HookOutcome: ...

    async def stop(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        final_text: str,
        turn_count: int = 0,
        stop_hook_active: bool = False,
    ) -> HookOutcome: ...

    async def close(self) -> None: ...


class NoHooks:
    """A dispatcher with no hooks configured."""

    async def session_start(
        self, *, scope: RunScope, sink: ToolRunSink, source: SessionSource = "new"
    ) -> HookOutcome:
        return NO_OUTCOME

    async def user_prompt_submit(
        self, *, scope: RunScope, sink: ToolRunSink, prompt: str, message: dict[str, Any] | None = None
    ) -> HookOutcome:
        return NO_OUTCOME

    async def pre_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        preflight: Preflight,
    ) -> HookOutcome:
        return NO_OUTCOME

    async def post_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        result: ToolResult,
        preflight: Preflight | None = None,
        duration_ms: int | None = None,
    ) -> HookOutcome:
        return NO_OUTCOME

    async def stop(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        final_text: str,
        turn_count: int = 0,
        stop_hook_active: bool = False,
    ) -> HookOutcome:
        return NO_OUTCOME

    async def close(self) -> None:
        return None

    def handles(self, phase: HookPhase) -> bool:
        return False


NO_HOOKS: HookDispatcher = NoHooks()


def may_run(dispatcher: HookDispatcher, phase: HookPhase) -> bool:
    """False when ``dispatcher`` certainly runs no hook of ``phase`` (so calling it may be skipped: it
    would return :data:`NO_OUTCOME` and emit nothing). A dispatcher tells with an optional
    ``handles(phase) -> bool`` method (:data:`NO_HOOKS` and the ``hooks.json`` dispatcher have one)."""
    handles = getattr(dispatcher, "handles", None)
    return True if handles is None else bool(handles(phase))
