"""In-process hooks: the Python callables of ``AgentRuntime(hooks=[...])`` (``agent_core.types.hooks``).

:class:`CallbackHooks` runs them; :class:`HookChain` puts them in front of the ``hooks.json`` dispatcher
so the loop and the tool pipeline see one :class:`~agent_core._hooks.base.HookDispatcher`. The contract
(what each event may do, order, audit events, failures) is the one documented in
:mod:`agent_core.types.hooks`. Two phases have no ``hooks.json`` counterpart and are called directly:
:meth:`CallbackHooks.submit_prompt` (before the user message node is written; ``hooks.json``
UserPromptSubmit hooks observe after it) and :meth:`CallbackHooks.guard` (the output guardrails).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agent_core._hooks.base import (
    INTERNAL_PURPOSES,
    NO_OUTCOME,
    HookDispatcher,
    HookOutcome,
    Reviser,
    SessionSource,
    may_run,
)
from agent_core._redaction import Redactor
from agent_core.errors import AgentCoreError, ErrorCode, InternalError, InvalidArgumentError
from agent_core.tools.context import RunScope, ToolRunSink
from agent_core.tools.preflight import Preflight
from agent_core.types import events as ev
from agent_core.types.enums import AgentRole, HookPhase, RunMode
from agent_core.types.hooks import (
    GuardrailInput,
    GuardrailResult,
    Hook,
    HookContext,
    HookEvent,
    HookResult,
    OutputGuardrail,
    PostToolUseHook,
    PostToolUseInput,
    PreToolUseHook,
    PreToolUseInput,
    SessionStartHook,
    SessionStartInput,
    StopHook,
    StopInput,
    UserPromptSubmitHook,
    UserPromptSubmitInput,
)
from agent_core.types.model import ToolCall
from agent_core.types.runtime import UserMessage
from agent_core.types.tools import ToolDefinition, ToolResult

logger = logging.getLogger(__name__)

HOOK_TYPES = (
    SessionStartHook,
    UserPromptSubmitHook,
    PreToolUseHook,
    PostToolUseHook,
    StopHook,
    OutputGuardrail,
)
_PHASE_OF: dict[type[Any], HookEvent] = {
    SessionStartHook: "SessionStart",
    UserPromptSubmitHook: "UserPromptSubmit",
    PreToolUseHook: "PreToolUse",
    PostToolUseHook: "PostToolUse",
    StopHook: "Stop",
    OutputGuardrail: "OutputGuardrail",
}


def check_hooks(hooks: Sequence[Any] | None) -> tuple[Hook, ...]:
    """``hooks`` as a tuple, every entry a registration class (``validation_error`` naming the first that
    is not, or an ``OutputGuardrail`` with a negative ``max_retries``)."""
    if hooks is None:
        return ()
    if isinstance(hooks, str | bytes) or not isinstance(hooks, Sequence):
        raise InvalidArgumentError(ErrorCode.validation_error, "hooks must be a list of hook registrations")
    for index, hook in enumerate(hooks):
        if not isinstance(hook, HOOK_TYPES) or not callable(hook.callback):
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"hooks[{index}] is a {type(hook).__name__}; expected SessionStartHook, UserPromptSubmitHook, "
                "PreToolUseHook, PostToolUseHook, StopHook or OutputGuardrail around a callable",
                details={"argument": "hooks", "index": index},
            )
        if isinstance(hook, OutputGuardrail) and (
            isinstance(hook.max_retries, bool)
            or not isinstance(hook.max_retries, int)
            or hook.max_retries < 0
        ):
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"hooks[{index}]: OutputGuardrail max_retries must be an integer >= 0",
                details={"argument": "hooks", "index": index},
            )
    return tuple(hooks)


@dataclass(slots=True)
class _Run:
    """One callback's outcome: its result (``None``: allow, no change) or why it failed."""

    label: str
    result: Any = None
    failure: str | None = None

    @property
    def denied(self) -> bool:
        if isinstance(self.result, HookResult):
            return self.result.decision == "deny"
        return isinstance(self.result, GuardrailResult) and self.result.rejected

    @property
    def reason(self) -> str | None:
        return getattr(self.result, "reason", None)


@dataclass(frozen=True, slots=True)
class PromptVerdict:
    """What the UserPromptSubmit callbacks decided about a user message."""

    blocked_by: str | None = None
    reason: str | None = None
    message: UserMessage | None = None
    """The replacement (``None``: the message is unchanged)."""
    replaced_by: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GuardVerdict:
    """What the guardrails decided about a final answer: accepted, rejected (retry) or the run fails."""

    rejected_by: str | None = None
    reason: str | None = None
    max_retries: int = 0
    failure: str | None = None
    """A guardrail failed (raised, timed out, returned the wrong type): the answer cannot be accepted."""


class CallbackHooks:
    """The in-process hooks of one runtime (see the module docstring)."""

    def __init__(
        self, hooks: Sequence[Hook], *, redactor: Redactor, timeout_ms: int, project_dir: Path, home_dir: Path
    ) -> None:
        self._hooks = list(hooks)
        self._redactor = redactor
        self._timeout_s = timeout_ms / 1000
        self._project = project_dir
        self._home = home_dir
        self._locks: weakref.WeakKeyDictionary[RunScope, asyncio.Lock] = weakref.WeakKeyDictionary()

    def _of(self, kind: type[Any]) -> list[tuple[int, Any]]:
        return [(i, h) for i, h in enumerate(self._hooks) if type(h) is kind]

    def handles(self, phase: HookPhase) -> bool:
        kinds = {k for k, p in _PHASE_OF.items() if p == phase.value}
        return any(type(h) in kinds for h in self._hooks)

    @property
    def has_guardrails(self) -> bool:
        return any(isinstance(h, OutputGuardrail) for h in self._hooks)

    @property
    def has_prompt_hooks(self) -> bool:
        return any(isinstance(h, UserPromptSubmitHook) for h in self._hooks)

    # -- events -----------------------------------------------------------------------------------

    async def session_start(
        self, *, scope: RunScope, sink: ToolRunSink, source: SessionSource = "new"
    ) -> HookOutcome:
        context = self._context(scope, "SessionStart")
        runs = await self._each(
            scope, sink, self._of(SessionStartHook), lambda: SessionStartInput(context=context, source=source)
        )
        return _observed(runs)

    async def submit_prompt(
        self, *, scope: RunScope, sink: ToolRunSink, message: UserMessage
    ) -> PromptVerdict:
        """The UserPromptSubmit callbacks, in order, each seeing the message the previous one left."""
        if self._skipped(scope):
            return PromptVerdict()
        context = self._context(scope, "UserPromptSubmit")
        current = message
        replaced: list[str] = []
        async with self._lock(scope):
            for index, hook in self._of(UserPromptSubmitHook):
                event = UserPromptSubmitInput(context=context, prompt=_text(current), message=current)
                run = await self._invoke(index, hook, "UserPromptSubmit", event, HookResult, scope, sink)
                if run.failure is not None or run.denied:
                    reason = run.failure or run.reason or "blocked by a UserPromptSubmit hook"
                    await self._denied(sink, "UserPromptSubmit", reason, len(replaced) + 1, None)
                    return PromptVerdict(blocked_by=run.label, reason=reason)
                result = run.result
                if isinstance(result, HookResult) and result.message is not None:
                    current = _replacement(result.message, current)
                    replaced.append(run.label)
        return PromptVerdict(message=current if replaced else None, replaced_by=replaced)

    async def pre_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        preflight: Preflight,
        revise: Reviser | None = None,
    ) -> HookOutcome:
        if self._skipped(scope):
            return NO_OUTCOME
        tags = tuple(tool.tags)
        matched = [(i, h) for i, h in self._of(PreToolUseHook) if h.matches(tool.name, tags)]
        if not matched:
            return NO_OUTCOME
        context = self._context(scope, "PreToolUse")
        current, pre = call, preflight
        rewritten: list[str] = []
        reasons: list[str] = []
        async with self._lock(scope):
            for count, (index, hook) in enumerate(matched, start=1):
                event = PreToolUseInput(
                    context=context,
                    tool_name=tool.name,
                    tool_call_id=call.tool_call_id,
                    arguments=copy.deepcopy(current.arguments),
                    permission=tool.permission,
                    tags=tags,
                    target_paths=tuple(pre.target_paths),
                    target_scope=pre.target_scope,
                )
                run = await self._invoke(
                    index, hook, "PreToolUse", event, HookResult, scope, sink, call.tool_call_id
                )
                denial = run.failure or (run.reason or "denied by a PreToolUse hook" if run.denied else None)
                result = run.result
                if denial is None and isinstance(result, HookResult) and result.arguments is not None:
                    try:
                        if revise is None:
                            raise InternalError(ErrorCode.internal_error, "arguments cannot be replaced here")
                        current, pre = await revise(dict(result.arguments))
                        rewritten.append(run.label)
                    except AgentCoreError as exc:
                        denial = f"PreToolUse hook {run.label} gave invalid arguments: {exc.message}"
                if denial is not None:
                    return HookOutcome(
                        decision="deny", reasons=[denial], hook_count=count, rewritten_by=rewritten
                    )
                if run.reason:
                    reasons.append(run.reason)
        changed = bool(rewritten)
        return HookOutcome(
            decision="allow",
            reasons=reasons,
            hook_count=len(matched),
            call=current if changed else None,
            preflight=pre if changed else None,
            rewritten_by=rewritten,
        )

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
        tags = tuple(tool.tags)
        matched = [(i, h) for i, h in self._of(PostToolUseHook) if h.matches(tool.name, tags)]
        context = self._context(scope, "PostToolUse")
        paths = tuple(preflight.target_paths) if preflight is not None else ()

        def event() -> PostToolUseInput:
            return PostToolUseInput(
                context=context,
                tool_name=tool.name,
                tool_call_id=call.tool_call_id,
                arguments=copy.deepcopy(call.arguments),
                permission=tool.permission,
                tags=tags,
                target_paths=paths,
                result=result,
                duration_ms=duration_ms or 0,
            )

        return _observed(await self._each(scope, sink, matched, event, call.tool_call_id))

    async def stop(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        final_text: str,
        turn_count: int = 0,
        stop_hook_active: bool = False,
    ) -> HookOutcome:
        if self._skipped(scope):
            return NO_OUTCOME
        context = self._context(scope, "Stop")
        event = StopInput(
            context=context, final_text=final_text, turn_count=turn_count, stop_hook_active=stop_hook_active
        )
        runs: list[_Run] = []
        async with self._lock(scope):
            for index, hook in self._of(StopHook):
                run = await self._invoke(index, hook, "Stop", event, HookResult, scope, sink)
                runs.append(run)
                if run.failure is None and run.denied:
                    reason = run.reason or "a Stop hook asked the agent to continue"
                    return HookOutcome(decision="deny", reasons=[reason], hook_count=len(runs))
        return _observed(runs)

    async def guard(self, *, scope: RunScope, sink: ToolRunSink, answer: str, attempt: int) -> GuardVerdict:
        """The output guardrails on a root run's final answer (the first rejection wins)."""
        context = self._context(scope, "OutputGuardrail")
        event = GuardrailInput(context=context, answer=answer, attempt=attempt)
        async with self._lock(scope):
            for index, hook in self._of(OutputGuardrail):
                run = await self._invoke(index, hook, "OutputGuardrail", event, GuardrailResult, scope, sink)
                if run.failure is not None:
                    return GuardVerdict(rejected_by=run.label, failure=run.failure)
                if run.denied:
                    reason = run.reason or "rejected by an output guardrail"
                    await self._denied(sink, "OutputGuardrail", reason, 1, None)
                    return GuardVerdict(rejected_by=run.label, reason=reason, max_retries=hook.max_retries)
        return GuardVerdict()

    async def close(self) -> None:
        self._locks.clear()

    # -- running ----------------------------------------------------------------------------------

    def _skipped(self, scope: RunScope) -> bool:
        return scope.agent_role == AgentRole.compact or scope.purpose in INTERNAL_PURPOSES

    def _lock(self, scope: RunScope) -> asyncio.Lock:
        return self._locks.setdefault(scope, asyncio.Lock())

    def _context(self, scope: RunScope, event: HookEvent) -> HookContext:
        mode = scope.mode
        if mode is None:
            mode = (
                RunMode.orchestrator
                if scope.agent_role in (AgentRole.orchestrator, AgentRole.worker)
                else RunMode.normal
            )
        return HookContext(
            event=event,
            session_id=scope.session_id,
            run_id=scope.run_id,
            agent_id=scope.agent_id,
            agent_role=scope.agent_role,
            parent_agent_id=scope.parent_agent_id,
            parent_run_id=scope.parent_run_id,
            mode=mode,
            project_dir=self._project,
            home_dir=self._home,
        )

    async def _each(
        self,
        scope: RunScope,
        sink: ToolRunSink,
        matched: list[tuple[int, Any]],
        event: Any,
        tool_call_id: str | None = None,
    ) -> list[_Run]:
        """Runs observe-only callbacks in order (``event`` builds the input once, if any matched)."""
        if not matched or self._skipped(scope):
            return []
        value = event()
        runs = []
        async with self._lock(scope):
            for index, hook in matched:
                phase = _PHASE_OF[type(hook)]
                runs.append(
                    await self._invoke(index, hook, phase, value, HookResult, scope, sink, tool_call_id)
                )
        return runs

    async def _invoke(
        self,
        index: int,
        hook: Any,
        phase: HookEvent,
        event: Any,
        result_type: type[Any],
        scope: RunScope,
        sink: ToolRunSink,
        tool_call_id: str | None = None,
    ) -> _Run:
        label = hook.label
        await self._emit(sink, ev.HookStarted(phase, index, -1, command=f"python:{label}"), tool_call_id)
        started = time.monotonic()
        run = _Run(label)
        try:
            value = hook.callback(event)
            if inspect.isawaitable(value):
                async with asyncio.timeout(self._timeout_s):
                    value = await value
        except TimeoutError:
            run.failure = f"{phase} hook {label} took longer than {self._timeout_s * 1000:.0f} ms"
        except Exception as exc:  # the user's code: recorded as a failed hook, never a crashed run
            logger.warning("%s hook %s raised", phase, label, exc_info=True)
            run.failure = f"{phase} hook {label} raised {type(exc).__name__}: {exc}"
        else:
            if value is None or isinstance(value, result_type):
                run.result = value
            else:
                run.failure = (
                    f"{phase} hook {label} returned a {type(value).__name__}; expected "
                    f"{result_type.__name__} or None"
                )
        duration_ms = int((time.monotonic() - started) * 1000)
        blocking = phase in ("PreToolUse", "Stop", "UserPromptSubmit", "OutputGuardrail")
        if run.failure is not None:
            error = {"type": "exception", "message": run.failure, "exit_code": None}
            failed = ev.HookFailed(
                phase,
                index,
                -1,
                error=error,
                stderr_summary=None,
                duration_ms=duration_ms,
                decision=None,
                reason=None,
            )
            await self._emit(sink, failed, tool_call_id)
            return run
        decision = "deny" if run.denied else "allow"
        completed = ev.HookCompleted(
            phase,
            index,
            -1,
            decision=decision,
            duration_ms=duration_ms,
            reason=run.reason,
            logs=_logs(run.result),
            stderr_summary=None,
            ignored=True if not blocking and run.denied else ev.ABSENT,
        )
        await self._emit(sink, completed, tool_call_id)
        return run

    async def _denied(
        self, sink: ToolRunSink, phase: str, reason: str, count: int, tool_call_id: str | None
    ) -> None:
        summary = {"decision": "deny", "reasons": [reason], "hook_count": count}
        await self._emit(sink, ev.HookDenied(phase=phase, reason=reason, hook_summary=summary), tool_call_id)

    async def _emit(self, sink: ToolRunSink, event: ev.EventPayload, tool_call_id: str | None) -> None:
        await sink.emit(event.redacted(self._redactor), tool_call_id=tool_call_id)


def _logs(result: Any) -> list[str]:
    if isinstance(result, HookResult):
        if result.arguments is not None:
            return ["replaced the tool call's arguments"]
        if result.message is not None:
            return ["replaced the user message"]
    return []


def _observed(runs: list[_Run]) -> HookOutcome:
    """The outcome of observe-only callbacks: ``allow`` when any ran (denies are ignored)."""
    if not runs:
        return NO_OUTCOME
    ignored = [r.reason for r in runs if r.failure is None and r.denied]
    metadata: dict[str, Any] = {"failed_hooks": sum(1 for r in runs if r.failure is not None)}
    if ignored:
        metadata["ignored_denies"] = ignored
    reasons = [r.reason for r in runs if r.failure is None and not r.denied and r.reason]
    return HookOutcome(decision="allow", reasons=reasons, hook_count=len(runs), metadata=metadata)


def _text(message: UserMessage) -> str:
    from agent_core.types.content import text_of

    return text_of(message.content)


def _replacement(value: str | UserMessage, original: UserMessage) -> UserMessage:
    if isinstance(value, UserMessage):
        return value
    return UserMessage(content=value, metadata=dict(original.metadata))


def _merged(first: HookOutcome, second: HookOutcome) -> HookOutcome:
    """The in-process outcome ``first`` and the ``hooks.json`` one ``second`` as one (the call and
    pre-flight an in-process hook substituted are kept)."""
    if first.hook_count == 0:
        return second
    if second.hook_count == 0:
        return first
    decision: Literal["allow", "deny"] = "deny" if first.denied or second.denied else "allow"
    chosen = [o for o in (first, second) if o.decision == decision]
    return HookOutcome(
        decision=decision,
        reasons=[r for o in chosen for r in o.reasons],
        hook_count=first.hook_count + second.hook_count,
        metadata={**first.metadata, **second.metadata},
        call=first.call,
        preflight=first.preflight,
        rewritten_by=list(first.rewritten_by),
    )


class HookChain:
    """The in-process hooks, then the ``hooks.json`` dispatcher, as one :class:`HookDispatcher`."""

    revises_arguments = True
    """Its PreToolUse hooks may substitute arguments: the pipeline passes ``revise``."""

    def __init__(self, callbacks: CallbackHooks, shell: HookDispatcher) -> None:
        self.callbacks = callbacks
        self.shell = shell

    def handles(self, phase: HookPhase) -> bool:
        return self.callbacks.handles(phase) or may_run(self.shell, phase)

    async def session_start(
        self, *, scope: RunScope, sink: ToolRunSink, source: SessionSource = "new"
    ) -> HookOutcome:
        first = await self.callbacks.session_start(scope=scope, sink=sink, source=source)
        return _merged(first, await self.shell.session_start(scope=scope, sink=sink, source=source))

    async def user_prompt_submit(
        self, *, scope: RunScope, sink: ToolRunSink, prompt: str, message: dict[str, Any] | None = None
    ) -> HookOutcome:
        """The ``hooks.json`` hooks only: the in-process ones ran before the node (:meth:`CallbackHooks.submit_prompt`)."""
        return await self.shell.user_prompt_submit(scope=scope, sink=sink, prompt=prompt, message=message)

    async def pre_tool_use(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        tool: ToolDefinition,
        call: ToolCall,
        preflight: Preflight,
        revise: Reviser | None = None,
    ) -> HookOutcome:
        first = await self.callbacks.pre_tool_use(
            scope=scope, sink=sink, tool=tool, call=call, preflight=preflight, revise=revise
        )
        if first.denied or not may_run(self.shell, HookPhase.PreToolUse):
            return first
        second = await self.shell.pre_tool_use(
            scope=scope, sink=sink, tool=tool, call=first.call or call, preflight=first.preflight or preflight
        )
        return _merged(first, second)

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
        first = await self.callbacks.post_tool_use(
            scope=scope,
            sink=sink,
            tool=tool,
            call=call,
            result=result,
            preflight=preflight,
            duration_ms=duration_ms,
        )
        second = NO_OUTCOME
        if may_run(self.shell, HookPhase.PostToolUse) or may_run(self.shell, HookPhase.PreToolUse):
            second = await self.shell.post_tool_use(
                scope=scope,
                sink=sink,
                tool=tool,
                call=call,
                result=result,
                preflight=preflight,
                duration_ms=duration_ms,
            )
        return _merged(first, second)

    async def stop(
        self,
        *,
        scope: RunScope,
        sink: ToolRunSink,
        final_text: str,
        turn_count: int = 0,
        stop_hook_active: bool = False,
    ) -> HookOutcome:
        first = await self.callbacks.stop(
            scope=scope,
            sink=sink,
            final_text=final_text,
            turn_count=turn_count,
            stop_hook_active=stop_hook_active,
        )
        if first.denied:
            return first
        second = await self.shell.stop(
            scope=scope,
            sink=sink,
            final_text=final_text,
            turn_count=turn_count,
            stop_hook_active=stop_hook_active,
        )
        return _merged(first, second)

    async def close(self) -> None:
        await self.callbacks.close()
        await self.shell.close()
