"""The turn executor: the tool-call pipeline of docs/tools.md for one assistant message.

Per call, in this fixed order: availability → provider argument errors → null-stripping and schema
validation → adapter pre-flight → PreToolUse hooks → permission (policy, session cache, callback) →
``tool_started`` → handler (``metadata.timeout_ms`` for Python tools) → normalisation → redaction →
output limiting/artifacts → ``sink.commit_tool_result`` (node + event in one transaction) → PostToolUse
hooks. Scheduling follows :mod:`agent_core.tools._scheduler`; within a batch the stages up to the
permission step run in model order (hooks and prompts are never reordered), handlers overlap.

Guarantees: every call gets exactly one committed result, returned in call order. A failed or denied
``serial`` call skips the rest of the turn (``cancelled`` + ``metadata.skipped``). Cancellation
(``scope.cancel_event`` set, or the task running :meth:`ToolExecutor.execute_turn` cancelled — which sets
the event) abandons pending hooks/callbacks, cancels in-flight handlers cooperatively and answers every
unfinished call with ``cancelled`` + ``metadata.aborted`` (``abort_reason``
:data:`~agent_core.tools._outcome.ABORT_REASON`); the executor then returns ``aborted=True``.
Storage failures while committing are re-raised after the in-flight calls settled.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agent_core._concurrency import TaskOwner, run_to_end, wait_uninterrupted
from agent_core._hooks.base import NO_OUTCOME, HookDispatcher, HookOutcome, may_run
from agent_core._redaction import Redactor
from agent_core.config.schema import Settings
from agent_core.errors import AgentCoreError, ErrorCode, InternalError
from agent_core.permissions._gate import (
    GateOutcome,
    PendingAsk,
    PermissionGate,
    facts_display,
    summarize_arguments,
)
from agent_core.tools import _outcome as outcome
from agent_core.tools._effective import apply_overrides
from agent_core.tools._normalize import (
    NO_ARTIFACTIZE,
    error_result,
    exception_result,
    limit_output,
    normalize_return,
    redact_result,
)
from agent_core.tools._outcome import CallOutcome
from agent_core.tools._scheduler import (
    Aborted,
    CallClass,
    CallGroup,
    HandlerTimedOut,
    call_class,
    plan_groups,
    race_cancel,
    run_handler,
)
from agent_core.tools._schema import validate_arguments
from agent_core.tools.adapter import adapter_preflight
from agent_core.tools.context import RunScope, ToolContext, ToolRunSink
from agent_core.tools.preflight import Preflight
from agent_core.tools.registry import RegisteredTool, ToolRegistry
from agent_core.types import events as ev
from agent_core.types.enums import HookPhase
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CANCEL_GRACE_S = 2.5
"""How long an in-flight handler may take to return partial output after the cancel event fired before
its task is cancelled (covers the command runner's SIGTERM → SIGKILL grace of 2 s)."""


@dataclass(slots=True)
class TurnOutcome:
    """What the loop gets back: one result per call (call order) and whether cancellation hit the turn."""

    results: list[ToolResult]
    aborted: bool = False
    aborted_call_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Prepared:
    index: int
    call: ToolCall
    entry: RegisteredTool | None
    definition: ToolDefinition | None
    available: bool
    klass: CallClass

    @property
    def internal(self) -> bool:
        return self.definition is not None and "internal" in self.definition.tags


@dataclass(slots=True)
class _Ready:
    """A call that passed every gate and may run."""

    call: ToolCall
    ctx: ToolContext
    entry: RegisteredTool
    definition: ToolDefinition
    gate: GateOutcome
    preflight: Preflight
    rewritten_by: list[str] = field(default_factory=list)
    """In-process PreToolUse hooks that substituted the arguments (``permission_audit``)."""


def _rewrites(names: list[str]) -> dict[str, Any]:
    """The ``permission_audit`` key naming the hooks that substituted a call's arguments (none: ``{}``)."""
    return {"arguments_rewritten_by": list(names)} if names else {}


@dataclass(slots=True)
class _Turn:
    scope: RunScope
    sink: ToolRunSink
    prepared: list[_Prepared]
    results: list[ToolResult | None]
    aborted_ids: list[str] = field(default_factory=list)
    calls: TaskOwner = field(default_factory=lambda: TaskOwner("tool calls"))
    """The tasks of the calls running in the current group (those of earlier groups have finished)."""
    commit_errors: list[BaseException] = field(default_factory=list)
    checkpoint_ids: dict[str, str] = field(default_factory=dict)
    """``tool_call_id`` → the checkpoint taken around the call (named on its tool node)."""

    @property
    def cancelled(self) -> bool:
        return self.scope.cancel_event.is_set()


@dataclass(slots=True)
class StagedTurn:
    """One assistant message's calls executed call by call (:meth:`ToolExecutor.stage_turn`).

    ``groups`` is the turn's schedule (:func:`plan_groups`); ``gates[i]`` is set when call ``i`` passed
    (or left) its gate stages, which lets the next call of its group start its own — the order
    :meth:`ToolExecutor.execute_turn` keeps. Calls with a result given to ``stage_turn`` never run.
    """

    turn: _Turn
    groups: list[CallGroup]
    gates: list[asyncio.Event]

    @property
    def results(self) -> list[ToolResult | None]:
        return self.turn.results

    @property
    def stopped(self) -> bool:
        """Cancellation or a failed commit ended the turn: no further group runs."""
        return self.turn.cancelled or bool(self.turn.commit_errors)


def _answered(turn: _Turn) -> bool:
    """Every call of the turn has its committed result and no call task is still running."""
    return not turn.calls and all(r is not None for r in turn.results)


def _internal(prep: _Prepared) -> bool | ev.Absent:
    """``internal: true`` on the events of an internal tool's call; the key is absent otherwise."""
    return True if prep.internal else ev.ABSENT


class Offload(Protocol):
    """Turns a slow handler into a background job (docs/jobs-and-schedules.md#background-jobs;
    ``agent_core.jobs.JobManager``)."""

    def applies(self, definition: ToolDefinition) -> bool: ...

    def wrap(self, handler: Awaitable[Any], call: ToolCall, ctx: ToolContext) -> Awaitable[Any]: ...


class Checkpointer(Protocol):
    """File checkpoints around calls that change files (``agent_core._checkpoints.CheckpointService``)."""

    def kind_for(self, definition: ToolDefinition) -> str | None: ...

    async def open(
        self,
        call: ToolCall,
        definition: ToolDefinition,
        preflight: Preflight,
        *,
        session_id: str,
        run_id: str,
        agent_id: str,
        project: Path,
        base_node_seq: int | None,
    ) -> Any: ...

    async def close(self, opened: Any) -> str: ...


class ToolExecutor:
    """Executes the tool calls of one assistant message (the loop's seam, docs/tools.md)."""

    def __init__(
        self,
        registry: ToolRegistry,
        *,
        settings: Settings,
        gate: PermissionGate,
        hooks: HookDispatcher,
        redactor: Redactor,
        cancel_grace_s: float = DEFAULT_CANCEL_GRACE_S,
    ) -> None:
        self._registry = registry
        self._settings = settings
        self._gate = gate
        self._hooks = hooks
        self._redactor = redactor
        self._cancel_grace_s = cancel_grace_s
        self.offload: Offload | None = None
        """Background offload of slow calls (``agent_core.jobs``, installed when offload is on)."""
        self.checkpoints: Checkpointer | None = None
        """File checkpoints before write/edit/command calls (installed by the runtime)."""

    # -- turn ---------------------------------------------------------------------------------------

    async def execute_turn(self, calls: list[ToolCall], scope: RunScope, sink: ToolRunSink) -> TurnOutcome:
        prepared = [self._prepare(i, call, scope) for i, call in enumerate(calls)]
        turn = _Turn(scope=scope, sink=sink, prepared=prepared, results=[None] * len(calls))
        externally_cancelled = False
        error: Exception | None = None
        try:
            try:
                await self._run_groups(turn, plan_groups([p.klass for p in prepared]))
            except asyncio.CancelledError:
                externally_cancelled = True
                scope.cancel_event.set()
            if externally_cancelled or not _answered(turn):  # else :meth:`_finish` has nothing to do
                # every call is answered (aborted if need be), even if this task is cancelled again
                try:
                    await wait_uninterrupted(self._finish(turn))
                except Exception as exc:
                    error = exc
        finally:
            await turn.calls.aclose()
        if externally_cancelled:
            # A cancellation of the run's task (the runtime closing) becomes the run's own cancellation:
            # the calls were answered ``aborted`` above, and the loop ends the run with its terminal
            # events instead of dying halfway. The one cancellation this turn consumed is withdrawn.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        if error is not None:
            raise error
        if turn.commit_errors:
            raise turn.commit_errors[0]
        results = [r for r in turn.results if r is not None]
        return TurnOutcome(results=results, aborted=bool(turn.aborted_ids), aborted_call_ids=turn.aborted_ids)

    # -- a turn executed call by call (the temporal engine: each call is its own step) -----------------

    def stage_turn(
        self,
        calls: list[ToolCall],
        scope: RunScope,
        sink: ToolRunSink,
        stored: Mapping[str, ToolResult] | None = None,
    ) -> StagedTurn:
        """The turn of ``calls`` to run with :meth:`run_staged_call` group by group (a group's calls
        concurrently) and end with :meth:`finish_staged`; ``stored`` holds results committed earlier
        (by ``tool_call_id``): those calls count as answered and are not executed again."""
        prepared = [self._prepare(i, call, scope) for i, call in enumerate(calls)]
        turn = _Turn(scope=scope, sink=sink, prepared=prepared, results=[None] * len(calls))
        gates = [asyncio.Event() for _ in calls]
        for i, call in enumerate(calls):
            if stored is not None and call.tool_call_id in stored:
                turn.results[i] = stored[call.tool_call_id]
                gates[i].set()
        return StagedTurn(turn, plan_groups([p.klass for p in prepared]), gates)

    async def run_staged_call(self, staged: StagedTurn, index: int) -> ToolResult | None:
        """Runs call ``index`` through the whole pipeline (its gate stages after the previous call of its
        group passed them, as in :meth:`execute_turn`); its committed result (``None``: commit failed).
        Cancellation comes through ``scope.cancel_event`` (the call is answered ``aborted``)."""
        turn = staged.turn
        if turn.results[index] is not None:
            return turn.results[index]
        group = next(g for g in staged.groups if index in g.indices)
        position = group.indices.index(index)
        previous = staged.gates[group.indices[position - 1]] if position > 0 else None
        await self._run_call(turn, turn.prepared[index], previous, staged.gates[index])
        return turn.results[index]

    async def finish_staged(self, staged: StagedTurn, skip_from: int | None = None) -> TurnOutcome:
        """Ends a staged turn: the calls from ``skip_from`` on are skipped (a ``serial`` call before them
        failed), every call still without a result is answered ``aborted``; the turn's outcome as
        :meth:`execute_turn` returns it (a failed commit is raised)."""
        turn = staged.turn
        if skip_from is not None and not turn.cancelled and not turn.commit_errors:
            await self._skip_rest(turn, skip_from)
        await self._finish(turn)
        if turn.commit_errors:
            raise turn.commit_errors[0]
        results = [r for r in turn.results if r is not None]
        return TurnOutcome(results=results, aborted=bool(turn.aborted_ids), aborted_call_ids=turn.aborted_ids)

    def _prepare(self, index: int, call: ToolCall, scope: RunScope) -> _Prepared:
        entry = self._registry.get(call.name)
        definition = apply_overrides(entry.definition, self._settings) if entry is not None else None
        available = entry is not None and call.name in scope.effective_tools
        return _Prepared(
            index=index,
            call=call,
            entry=entry,
            definition=definition,
            available=available,
            klass=call_class(definition) if available else "parallel",
        )

    async def _run_groups(self, turn: _Turn, groups: list[CallGroup]) -> None:
        for group in groups:
            if turn.cancelled or turn.commit_errors:
                return
            await self._run_group(turn, group)
            if group.kind == "serial":
                result = turn.results[group.indices[0]]
                if result is not None and result.is_error and not turn.cancelled:
                    await self._skip_rest(turn, group.indices[0] + 1)
                    return

    async def _run_group(self, turn: _Turn, group: CallGroup) -> None:
        previous: asyncio.Event | None = None
        tasks: list[asyncio.Task[None]] = []
        for index in group.indices:
            gate_done = asyncio.Event()
            tasks.append(turn.calls.spawn(self._run_call(turn, turn.prepared[index], previous, gate_done)))
            previous = gate_done
        await asyncio.wait(tasks)

    async def _finish(self, turn: _Turn) -> None:
        """Lets in-flight calls finish, then answers every call still without a result (aborted)."""
        await turn.calls.wait()
        if turn.commit_errors:
            return
        for prep in turn.prepared:
            if turn.results[prep.index] is None:
                await self._commit(turn, prep, outcome.aborted(prep.call, started=False))

    async def _skip_rest(self, turn: _Turn, start: int) -> None:
        for prep in turn.prepared[start:]:
            if turn.results[prep.index] is not None:  # a staged turn's result stored earlier
                continue
            await self._commit(turn, prep, outcome.skipped_after_failed_write(prep.call))
            if turn.commit_errors:
                return

    # -- one call -----------------------------------------------------------------------------------

    async def _run_call(
        self, turn: _Turn, prep: _Prepared, previous: asyncio.Event | None, gate_done: asyncio.Event
    ) -> None:
        try:
            try:
                if previous is not None and not previous.is_set():
                    await self._race(previous.wait(), turn)
                staged = await self._gates(turn, prep)
            finally:
                gate_done.set()
            final = staged if isinstance(staged, CallOutcome) else await self._execute(turn, prep, staged)
        except Aborted as cancelled:
            final = outcome.aborted(prep.call, started=cancelled.started, partial_value=cancelled.partial)
        except Exception as exc:
            logger.exception("tool pipeline failure for %s", prep.call.name)
            result = exception_result(exc, prep.call.tool_call_id, prep.call.name)
            final = CallOutcome(result, "failed", {"aborted": False, "reason": "pipeline_error"})
        committed = await self._commit(turn, prep, final)
        if committed is not None and final.executed and not final.aborted and prep.definition is not None:
            await self._post_hooks(turn, prep.definition, final, committed)

    async def _gates(self, turn: _Turn, prep: _Prepared) -> CallOutcome | _Ready:
        """Stages 1–5; returns a final answer for a call that must not run, else the ready call."""
        if turn.cancelled:
            raise Aborted(started=False)
        call, scope = prep.call, turn.scope
        if not prep.available or prep.entry is None or prep.definition is None:
            return outcome.unavailable(call, scope.agent_role, scope.permission_mode)
        definition, entry = prep.definition, prep.entry
        provider_error = call.metadata.get("arguments_error")
        if provider_error:
            message = f"invalid tool arguments: {provider_error}"
            errors = [{"path": "$", "message": str(provider_error)}]
            return outcome.failed(
                call, ErrorCode.validation_error, message, "validation_error", errors=errors
            )
        try:
            arguments = validate_arguments(definition.input_schema, call.arguments)
        except AgentCoreError as exc:
            result = exception_result(exc, call.tool_call_id, call.name)
            return CallOutcome(result, "failed", {"aborted": False, "reason": "validation_error"})
        call = call.model_copy(update={"arguments": arguments})
        ctx = ToolContext(tool_call_id=call.tool_call_id, tool_name=call.name, scope=scope, sink=turn.sink)
        try:
            preflight = await self._preflight(entry, call, ctx, turn)
        except Aborted:
            raise
        except Exception as exc:
            result = exception_result(exc, call.tool_call_id, call.name)
            return CallOutcome(result, "failed", {"aborted": False, "reason": "preflight_failed"})
        checked = call

        async def revise(substitute: dict[str, Any]) -> tuple[ToolCall, Preflight]:
            """Arguments an in-process PreToolUse hook substituted: validated and pre-flighted again."""
            revised = checked.model_copy(
                update={"arguments": validate_arguments(definition.input_schema, substitute)}
            )
            try:
                return revised, await self._preflight(entry, revised, ctx, turn)
            except (Aborted, AgentCoreError):
                raise
            except Exception as exc:
                raise InternalError(ErrorCode.internal_error, f"pre-flight failed: {exc}") from exc

        revising = {"revise": revise} if getattr(self._hooks, "revises_arguments", False) else {}
        try:
            hook = (
                await self._race(
                    self._hooks.pre_tool_use(
                        scope=scope,
                        sink=turn.sink,
                        tool=definition,
                        call=call,
                        preflight=preflight,
                        **revising,
                    ),
                    turn,
                )
                if may_run(self._hooks, HookPhase.PreToolUse)
                else NO_OUTCOME
            )
        except Aborted:
            raise
        except Exception as exc:
            logger.exception("PreToolUse dispatch failed for %s", call.name)
            message = f"PreToolUse hook dispatch failed: {type(exc).__name__}"
            return outcome.failed(call, ErrorCode.internal_error, message, "hook_error")
        if hook.denied:
            return await self._hook_denied(turn, prep, hook)
        if turn.cancelled:
            raise Aborted(started=False)
        if hook.call is not None and hook.preflight is not None:  # the arguments a hook substituted
            call, preflight, arguments = hook.call, hook.preflight, hook.call.arguments
        gate = self._gate.decide(tool=definition, arguments=arguments, requester=scope, facts=preflight)
        if isinstance(gate, PendingAsk):  # only asking the callback waits
            gate = await self._race(
                self._gate.ask(gate, hook_summary=hook.summary(), tool_call_id=call.tool_call_id), turn
            )
        if not gate.allowed:
            return await self._permission_denied(turn, prep, gate, hook, preflight)
        ctx.allowed_outside_roots = preflight.outside_write_roots
        ctx.preflight = preflight
        return _Ready(
            call=call,
            ctx=ctx,
            entry=entry,
            definition=definition,
            gate=gate,
            preflight=preflight,
            rewritten_by=list(hook.rewritten_by),
        )

    async def _preflight(
        self, entry: RegisteredTool, call: ToolCall, ctx: ToolContext, turn: _Turn
    ) -> Preflight:
        """The adapter's pre-flight, raced against cancellation unless it never waits (``preflight_now``)."""
        if turn.cancelled:
            raise Aborted(started=False)
        now = getattr(entry.adapter, "preflight_now", None)
        if now is None:
            return await self._race(adapter_preflight(entry.adapter, call, ctx), turn)
        value = now(call, ctx)
        if not isinstance(value, Preflight):
            raise InternalError(ErrorCode.internal_error, "adapter pre-flight returned no Preflight record")
        return value

    async def _hook_denied(self, turn: _Turn, prep: _Prepared, hook: HookOutcome) -> CallOutcome:
        reason = "; ".join(r for r in hook.reasons if r) or "denied by a PreToolUse hook"
        summary = hook.summary()
        denied = ev.HookDenied(
            phase="PreToolUse", reason=reason, hook_summary=summary, internal=_internal(prep)
        )
        await turn.sink.emit(denied.redacted(self._redactor), tool_call_id=prep.call.tool_call_id)
        result = error_result(
            prep.call.tool_call_id,
            prep.call.name,
            ErrorCode.permission_denied,
            f"denied by PreToolUse hook: {reason}",
            error_type="hook_denied",
            details={"hook_summary": summary},
        )
        audit: dict[str, Any] = {
            "decided_by": "hook",
            "decision": "deny",
            "rule": None,
            "reasons": [],
            "request_id": None,
            "permission_mode": turn.scope.permission_mode,
        }
        extra = {"denied_by": "hook", "reason": reason, "hook_summary": summary, "permission_audit": audit}
        return CallOutcome(result, "denied", extra)

    async def _permission_denied(
        self, turn: _Turn, prep: _Prepared, gate: GateOutcome, hook: HookOutcome, preflight: Preflight
    ) -> CallOutcome:
        call = prep.call
        reason = gate.reason or "permission denied"
        details: dict[str, Any] = {"reasons": list(gate.reasons)}
        if gate.failure is not None:
            details["permission_failure"] = gate.failure
            error = {
                "code": ErrorCode.permission_denied.value,
                "message": gate.failure_message or reason,
                "details": {"permission_failure": gate.failure},
            }
            failed = ev.PermissionFailed(
                tool_name=call.name,
                request_id=gate.request.request_id if gate.request else None,
                error=error,
                internal=_internal(prep),
            )
            await turn.sink.emit(failed.redacted(self._redactor), tool_call_id=call.tool_call_id)
        if gate.request is not None:
            details["request_id"] = gate.request.request_id
        code = gate.error_code or ErrorCode.permission_denied
        result = error_result(call.tool_call_id, call.name, code, reason, details=details)
        extra = {
            "denied_by": "permission",
            "reason": reason,
            "hook_summary": hook.summary(),
            "permission_audit": {**gate.audit(), **facts_display(preflight), **_rewrites(hook.rewritten_by)},
        }
        return CallOutcome(result, "denied", extra)

    async def _execute(self, turn: _Turn, prep: _Prepared, ready: _Ready) -> CallOutcome:
        """Runs the handler; a call that changes files runs between its checkpoint's opening (after
        ``tool_started``) and closing (whatever the handler's outcome)."""
        opened: list[Any] = []
        try:
            return await self._run_handler(turn, prep, ready, opened)
        finally:
            for checkpoint in opened:
                await self._close_checkpoint(turn, ready.call, checkpoint)

    async def _open_checkpoint(self, turn: _Turn, ready: _Ready) -> Any:
        checkpoints = self.checkpoints
        if checkpoints is None or checkpoints.kind_for(ready.definition) is None:
            return None
        scope = turn.scope
        path = turn.sink.active_path()
        try:
            return await checkpoints.open(
                ready.call,
                ready.definition,
                ready.preflight,
                session_id=scope.session_id,
                run_id=scope.run_id,
                agent_id=scope.agent_id,
                project=scope.project_dir,
                base_node_seq=path[-1].node_seq if path else None,
            )
        except Exception:  # a call is never blocked by its checkpoint; a rewind then reports its files
            logger.warning(
                "no checkpoint for %s (%s)", ready.call.name, ready.call.tool_call_id, exc_info=True
            )
            return None

    async def _close_checkpoint(self, turn: _Turn, call: ToolCall, checkpoint: Any) -> None:
        """Records the state after the call (never interrupted half-way: a cancellation waits for it)."""
        checkpoints = self.checkpoints
        assert checkpoints is not None

        async def close() -> str | None:
            try:
                return await checkpoints.close(checkpoint)
            except Exception:
                logger.warning("could not record the checkpoint of %s", call.tool_call_id, exc_info=True)
                return None

        checkpoint_id, interrupted = await run_to_end(close())
        if checkpoint_id is not None:
            turn.checkpoint_ids[call.tool_call_id] = checkpoint_id
        if interrupted:
            raise asyncio.CancelledError()

    async def _run_handler(
        self, turn: _Turn, prep: _Prepared, ready: _Ready, opened: list[Any]
    ) -> CallOutcome:
        call, definition = ready.call, ready.definition
        started_event = ev.ToolStarted(
            tool_name=call.name,
            args_summary=summarize_arguments(call.arguments, self._redactor),
            permission=definition.permission,
            tags=list(definition.tags),
            permission_outcome=ready.gate.permission_outcome(),
            permission_audit={
                **ready.gate.audit(),
                **facts_display(ready.preflight),
                **_rewrites(ready.rewritten_by),
            },
            internal=_internal(prep),
        )
        await turn.sink.emit(started_event, tool_call_id=call.tool_call_id)
        checkpoint = await self._open_checkpoint(turn, ready)
        if checkpoint is not None:
            opened.append(checkpoint)
        timeout_ms = self._timeout_ms(ready.entry, definition)
        started = time.monotonic()
        handler: Awaitable[Any] = ready.entry.adapter.execute(call, ready.ctx)
        if self.offload is not None and self.offload.applies(definition):
            # a placeholder result when the call outlives offload_after_ms (background jobs)
            handler = self.offload.wrap(handler, call, ready.ctx)
        try:
            value = await run_handler(
                handler,
                turn.scope.cancel_event,
                timeout_ms,
                grace_s=self._cancel_grace_s,
            )
        except Aborted:
            raise
        except HandlerTimedOut:
            message = f"tool '{call.name}' timed out after {timeout_ms} ms"
            result = error_result(
                call.tool_call_id, call.name, ErrorCode.timeout, message, details={"timeout_ms": timeout_ms}
            )
        except Exception as exc:
            result = exception_result(exc, call.tool_call_id, call.name)
            await self._attach_traceback(turn, result, exc)
        else:
            result = normalize_return(value, call.tool_call_id, call.name)
        duration_ms = int((time.monotonic() - started) * 1000)
        if result.is_error:
            extra = {"aborted": False, "duration_ms": duration_ms}
            return CallOutcome(result, "failed", extra, executed=True, call=call, preflight=ready.preflight)
        extra = {"duration_ms": duration_ms}
        return CallOutcome(result, "completed", extra, executed=True, call=call, preflight=ready.preflight)

    def _timeout_ms(self, entry: RegisteredTool, definition: ToolDefinition) -> int | None:
        if not entry.python:
            return None
        value = definition.metadata.get("timeout_ms")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            return None
        return min(value, self._settings.tools.max_timeout_ms)

    async def _attach_traceback(self, turn: _Turn, result: ToolResult, exc: BaseException) -> None:
        if not turn.scope.debug or result.error is None:
            return
        text = self._redactor.text("".join(traceback.format_exception(exc)))
        try:
            ref = await turn.sink.create_artifact(
                text,
                filename="traceback.txt",
                mime_type="text/plain",
                summary=f"traceback of {result.tool_name}",
                kind="traceback",
                tool_call_id=result.tool_call_id,
            )
        except Exception:
            logger.warning("could not store the traceback artifact of %s", result.tool_name, exc_info=True)
            return
        result.error.details["traceback_artifact_id"] = ref.artifact_id

    # -- committing ---------------------------------------------------------------------------------

    async def _commit(self, turn: _Turn, prep: _Prepared, final: CallOutcome) -> ToolResult | None:
        """Redacts, limits, commits node + event; records the result (``None`` if storage failed).

        The commit itself is never interrupted: a cancellation of the awaiting task is re-raised only
        after the result was recorded, so a call is never answered twice."""
        call = prep.call
        try:
            result = redact_result(final.result, self._redactor)
            checkpoint_id = turn.checkpoint_ids.get(call.tool_call_id)
            if checkpoint_id is not None:  # the tool node names its checkpoint (rewind)
                result = result.model_copy(
                    update={"metadata": {**result.metadata, "checkpoint_id": checkpoint_id}}
                )
            if call.name not in NO_ARTIFACTIZE:
                result = await limit_output(
                    result,
                    limit_bytes=self._settings.tools.result_limit_bytes,
                    limit_tokens=self._settings.tools.result_limit_tokens,
                    sink=turn.sink,
                    force=result.metadata.get("artifactize") is True,
                )
            event = outcome.terminal_event(call.name, result, final, self._redactor, _internal(prep))
        except Exception as exc:
            logger.error("committing the result of %s failed: %s", call.name, exc)
            turn.commit_errors.append(exc)
            return None

        async def commit_and_record() -> ToolResult | None:
            try:
                await turn.sink.commit_tool_result(result, event=event)
            except Exception as exc:
                logger.error("committing the result of %s failed: %s", call.name, exc)
                turn.commit_errors.append(exc)
                return None
            turn.results[prep.index] = result
            if final.aborted:
                turn.aborted_ids.append(call.tool_call_id)
            return result

        return await wait_uninterrupted(commit_and_record())

    async def _race(self, awaitable: Awaitable[T], turn: _Turn) -> T:
        return await race_cancel(awaitable, turn.scope.cancel_event)

    async def _post_hooks(
        self, turn: _Turn, definition: ToolDefinition, final: CallOutcome, result: ToolResult
    ) -> None:
        call = final.call
        assert call is not None
        # a dispatcher with PreToolUse hooks remembers each call's pre-flight until its PostToolUse
        if not may_run(self._hooks, HookPhase.PostToolUse) and not may_run(self._hooks, HookPhase.PreToolUse):
            return
        try:
            await self._race(
                self._hooks.post_tool_use(
                    scope=turn.scope,
                    sink=turn.sink,
                    tool=definition,
                    call=call,
                    result=result,
                    preflight=final.preflight,
                    duration_ms=final.extra.get("duration_ms"),
                ),
                turn,
            )
        except Aborted:
            return
        except Exception:
            logger.warning("PostToolUse dispatch failed for %s", call.name, exc_info=True)
