"""The one loop driver (docs/runs.md#the-agent-loop): compose → stream → persist → tools → repeat.

:func:`run_loop` runs one agent run from after ``loop_started`` to its end and returns a
:class:`LoopOutcome`. It never raises for run-level failures: every exit path yields exactly one terminal
status with its end reason, which :mod:`agent_core._runtime.lifecycle` writes (terminal events and the
``runs`` update in one transaction). Cancellation is cooperative: :attr:`LoopSpec.cancel_event` interrupts
the model stream or the tool turn, and the driver records the partial state before ending.

A turn is two steps, :func:`model_step` (the request, the stream, the stored answer; :func:`answer_step`
judges a stored answer) and :func:`after_model_step` (the answer's tool calls, or the end-of-turn checks);
:func:`guarded_step` turns a run-level failure of a step into the run's outcome. The local loop runs them
in order; the temporal engine (``agent_core.engine.temporal``) runs each as an activity.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from agent_core._context._budget import short_tools
from agent_core._context.composer import Composition
from agent_core._loop._final import skip_tool_calls, write_runtime_note
from agent_core._loop._limits import Breach
from agent_core._loop._recovery import can_fall_back, fall_back, provider_overflow_outcome, recover_overflow
from agent_core._loop.model_call import (
    done_progress,
    normalise_calls,
    persist_assistant,
    record_failure,
    stream_model,
)
from agent_core._loop.outcome import (
    LoopOutcome,
    StreamAborted,
    StreamFailed,
)
from agent_core._loop.spec import (
    LoopSpec,
    LoopState,
)
from agent_core._loop.steps import Continue, EndTurn, Finish, RunTools, next_step
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._pipeline import TurnOutcome
from agent_core.types import events as ev
from agent_core.types.content import ContentBlock, ErrorPayload, TextBlock, media_ids, text_of
from agent_core.types.enums import EndReason, MessageRole, NodeType, RunStatus
from agent_core.types.model import (
    ModelCompleted,
    ModelRequest,
    ToolCall,
    Usage,
    sum_usage,
)
from agent_core.types.runtime import ContextBuildReport

log = logging.getLogger("agent_core._loop")
T = TypeVar("T")


def _interrupted(spec: LoopSpec, end_reason: EndReason) -> LoopOutcome:
    info = spec.interruption()
    return LoopOutcome(info.status, end_reason, error=info.error)


async def _with_traceback(spec: LoopSpec, error: ErrorPayload, exc: BaseException) -> ErrorPayload:
    """Debug mode: stores the redacted traceback as a ``traceback`` artifact referenced from ``details``."""
    if not spec.debug or spec.save_debug_artifact is None:
        return error
    text = spec.redactor.text("".join(traceback.format_exception(exc)))
    try:
        artifact_id = await spec.save_debug_artifact("traceback", text, "traceback.txt")
    except Exception:
        log.warning("could not store the traceback artifact of run %s", spec.recorder.run_id, exc_info=True)
        return error
    if artifact_id is None:
        return error
    return error.model_copy(update={"details": {**error.details, "traceback_artifact_id": artifact_id}})


async def run_loop(spec: LoopSpec, state: LoopState | None = None) -> LoopOutcome:
    """Runs turns until the run ends and returns the outcome; the caller writes the terminal events
    (``runtime/lifecycle.py``). ``state`` lets the caller read the progress of a cancelled loop task."""
    state = state if state is not None else LoopState()
    outcome = await guarded_step(spec, state, _turns(spec, state))
    return end_outcome(state, outcome)


async def guarded_step(spec: LoopSpec, state: LoopState, step: Awaitable[T]) -> T | LoopOutcome:
    """Awaits one step of the loop; a run-level failure becomes the run's outcome (``CancelledError``
    propagates). An engine that runs the loop step by step (``agent_core.engine``) uses it too, so a
    failure ends the run the same way wherever its step ran."""
    try:
        return await step
    except AgentCoreError as exc:  # StorageError included
        return _failed(state, await _with_traceback(spec, exc.to_payload(spec.redactor), exc))
    except Exception as exc:
        log.exception("loop failed unexpectedly")
        error = ErrorPayload(code=ErrorCode.internal_error, message=f"{type(exc).__name__}: {exc}")
        return _failed(state, await _with_traceback(spec, error.redacted_copy(spec.redactor), exc))


def end_outcome(state: LoopState, outcome: LoopOutcome) -> LoopOutcome:
    """Completes the run's outcome from the loop state (turns, usage, final text)."""
    outcome.turn_count = state.turns
    outcome.usage = sum_usage(state.usages)
    outcome.usage_by_model = usage_by_model(state)
    outcome.final_text = state.final_text
    return outcome


def usage_by_model(state: LoopState) -> dict[str, Usage]:
    """The usage of each model the run called, when it called more than one (a fallback)."""
    models = dict.fromkeys(state.usage_models)
    if len(models) < 2:
        return {}
    return {
        model: sum_usage([u for u, m in zip(state.usages, state.usage_models, strict=False) if m == model])
        for model in models
    }


def _record_usage(spec: LoopSpec, state: LoopState, usage: Usage) -> None:
    state.usages.append(usage)
    state.usage_models.append(f"{spec.provider}/{spec.model}")
    if spec.limits is not None:
        spec.limits.record_usage(usage)


def _failed(state: LoopState, error: ErrorPayload, reason: EndReason = EndReason.failed) -> LoopOutcome:
    return LoopOutcome(RunStatus.failed, reason, error=error, turn_count=state.turns)


async def _turns(spec: LoopSpec, state: LoopState) -> LoopOutcome:
    while True:
        step = await model_step(spec, state)
        if isinstance(step, ModelTurn):
            step = await after_model_step(spec, state, step)
        if step is not None:
            return step


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """A persisted model answer the run continues from (its tool calls, or the end-of-turn checks)."""

    completed: ModelCompleted
    assistant_node_id: str


async def model_step(spec: LoopSpec, state: LoopState) -> LoopOutcome | ModelTurn | None:
    """One model call: limits, the request, the stream and the persisted answer.

    Returns the run's outcome when it ends here, ``None`` when the loop asks the model again (structured
    output retry), else the :class:`ModelTurn` that :func:`after_model_step` continues from.
    """
    rec = spec.recorder
    if spec.cancel_event.is_set():
        return _interrupted(spec, EndReason.aborted_streaming)
    if state.final is None and state.turns >= spec.max_turns:
        return LoopOutcome(RunStatus.failed, EndReason.max_turns)
    if spec.inbox is not None and state.final is None:  # entries delivered meanwhile: one tail note
        ended = await spec.inbox.before_model_step(state.turns)
        if ended is not None:
            return ended
    if state.final is None and spec.limits is not None:
        state.final = await _breach(spec, spec.limits.before_model_call())
    request = await _build_request(spec, state, final=state.final is not None)
    if isinstance(request, LoopOutcome):  # the prompt does not fit, or the run was cancelled meanwhile
        return request
    state.turns += 1
    try:
        result = await stream_model(spec, request, state.turns, state)
    finally:
        await _flush_report(spec, state)
    if isinstance(result, StreamAborted):
        partial_id = None
        if result.partial_text:
            node = await rec.write_node(
                role=MessageRole.assistant,
                node_type=NodeType.message,
                content=[TextBlock(text=result.partial_text)],
                metadata={"partial": True, "aborted": True, "abort_reason": result.reason},
            )
            partial_id = node.node_id
        await rec.emit(ev.AbortedStreaming(abort_reason=result.reason, partial_node_id=partial_id))
        return _interrupted(spec, EndReason.aborted_streaming)
    if isinstance(result, StreamFailed):
        if result.usage is not None:
            _record_usage(spec, state, result.usage)
        nothing_streamed = not result.partial_text and not result.partial_tool_calls
        if result.error.type == "prompt_too_long" and nothing_streamed:
            if not state.overflow_retry:
                state.turns -= 1  # the request is sent again: the failed attempt is not a turn
                await recover_overflow(spec, state, result.error)
                return None
            state.overflow_retry = False
            return provider_overflow_outcome(spec, state, result.error)
        if nothing_streamed and can_fall_back(spec, state, result.error):
            state.turns -= 1
            await fall_back(spec, state, result.error)
            return None
        await record_failure(spec, result)
        payload = ErrorPayload(
            type=result.error.type,
            code=_error_code(result.error.code),
            message=result.error.message,
            retryable=result.error.retryable,
            details={
                k: v
                for k, v in {
                    "provider": result.error.provider or spec.provider,
                    "model": result.error.model or spec.model,
                    "capability": result.error.capability,
                    "request_feature": result.error.request_feature,
                    "status_code": result.error.status_code,
                }.items()
                if v is not None
            },
        ).redacted_copy(spec.redactor)
        if result.exc is not None:
            payload = await _with_traceback(spec, payload, result.exc)
        if state.final is not None:  # the final answer call failed: the limit's error, status failed
            return _final_outcome(state, RunStatus.failed, {"final_call_error": payload.model_dump()})
        return LoopOutcome(RunStatus.failed, EndReason.failed, error=payload)
    completed = normalise_calls(result.event)
    state.overflow_retry = False
    if spec.calibration is not None:
        spec.calibration.observe(spec.provider, spec.model, state.last_estimate, completed.usage.input_tokens)
    assistant = await persist_assistant(spec, completed, result.latency_ms)
    await rec.emit(done_progress(spec, state.turns, completed, result.latency_ms, result.first_token_ms))
    return await answer_step(spec, state, completed, assistant)


async def answer_step(
    spec: LoopSpec, state: LoopState, completed: ModelCompleted, assistant: str
) -> LoopOutcome | ModelTurn | None:
    """Accounts a stored model answer and judges it (structured output, the limits' final answer)."""
    rec = spec.recorder
    _record_usage(spec, state, completed.usage)
    state.final_text = text_of(completed.content)
    state.final_node_id = assistant
    if spec.output is not None:  # structured output: judge the answer (loop/_output.py)
        step = await spec.output.settle(completed, rec)
        if isinstance(step, LoopOutcome):
            if step.error is not None:
                step.error = step.error.redacted_copy(spec.redactor)
            return step
        if step == "retry" and state.final is None:  # the limits' final call gets no retry
            return None
        if step != "tools":  # an answered ``output`` call runs no tool
            completed = completed.model_copy(update={"tool_calls": []})
    if state.final is not None:
        if completed.tool_calls:  # tools were not offered: nothing runs, the run has no answer
            await skip_tool_calls(rec, completed.tool_calls, state.final)
            return _final_outcome(state, RunStatus.failed)
        return _final_outcome(state, RunStatus.completed, final_node_id=assistant)
    return ModelTurn(completed, assistant)


async def after_model_step(spec: LoopSpec, state: LoopState, turn: ModelTurn) -> LoopOutcome | None:
    """The tool calls of a model answer, or the end-of-turn checks (continuation, Stop hooks).

    Returns the run's outcome when it ends here, else ``None`` (the loop asks the model again).
    """
    step = await decide_after_model(spec, state, turn)
    if not isinstance(step, RunTools):
        return step
    calls = list(step.calls)
    return await end_tools(
        spec, state, calls, await spec.executor.execute_turn(calls, spec.scope, spec.recorder)
    )


async def decide_after_model(
    spec: LoopSpec, state: LoopState, turn: ModelTurn
) -> LoopOutcome | RunTools | None:
    """What follows a model answer: :class:`RunTools` (the calls the limits admitted, to execute and then
    end with :func:`end_tools`), the run's outcome, or ``None`` (the loop asks the model again: a
    continuation, a Stop hook's denial, or calls the limits refused — answered here)."""
    step = next_step(
        turn.completed,
        turn.assistant_node_id,
        continuations=state.continuations,
        earlier_text=state.continued_text,
        max_output_tokens=spec.max_output_tokens,
    )
    if isinstance(step, RunTools):
        state.continuations = 0
        state.continued_text = ""
        return step if await _admit_tools(spec, state, list(step.calls)) else None
    if isinstance(step, Continue):
        state.continuations += 1
        state.continued_text += text_of(turn.completed.content)
        return None
    if isinstance(step, Finish):
        return step.outcome
    return await _end_turn(spec, state, step)


async def _admit_tools(spec: LoopSpec, state: LoopState, calls: list[ToolCall]) -> bool:
    """Whether the limits admit the calls; refused calls get their results and the breach note."""
    if spec.limits is not None:
        refused = spec.limits.admit_tool_calls(len(calls))
        if refused is not None:  # every call gets its result before the note
            await skip_tool_calls(spec.recorder, calls, refused)
            state.final = await _breach(spec, refused)
            return False
    return True


async def end_tools(
    spec: LoopSpec, state: LoopState, calls: list[ToolCall], outcome: TurnOutcome
) -> LoopOutcome | None:
    """After one answer's tool calls ran: the run's outcome when cancellation hit them, else the
    context nodes the tools produced and the limits' verdict (``None``: the loop continues)."""
    rec = spec.recorder
    order = [c.tool_call_id for c in calls]
    if outcome.aborted:
        rec.discard_context_nodes()
        aborted_ids = outcome.aborted_call_ids or order
        await rec.emit(ev.AbortedTools(abort_reason=spec.interruption().reason, tool_call_ids=aborted_ids))
        return _interrupted(spec, EndReason.aborted_tools)
    await rec.flush_context_nodes(order)
    if spec.limits is not None:
        verdict = spec.limits.after_tools(calls, list(outcome.results))
        state.final = await _breach(spec, verdict.breach)
        if verdict.note and state.final is None:
            await write_runtime_note(rec, verdict.note, source="loop_detection")
    return None


async def _end_turn(spec: LoopSpec, state: LoopState, step: EndTurn) -> LoopOutcome | None:
    """The Stop hooks: the run completes, or a hook asks for another turn (``None``)."""
    rec = spec.recorder
    stop = await spec.hooks.stop(
        scope=spec.scope,
        sink=rec,
        final_text=state.final_text,
        turn_count=state.turns,
        stop_hook_active=state.stop_denials > 0,
    )
    if stop.denied:
        state.stop_denials += 1
        reason = "; ".join(stop.reasons) or "a Stop hook asked the agent to continue"
        await rec.emit(ev.HookDenied(phase="Stop", reason=reason, hook_summary=stop.summary()))
        await rec.emit(ev.StopHookPrevented(reason=reason, hook_summary=stop.summary()))
        # docs/hooks-and-mcp.md#denials: the note says a Stop hook prevented completion and gives the reason
        await rec.write_node(
            role=MessageRole.user,
            node_type=NodeType.system_note,
            content=[TextBlock(text=f"a Stop hook prevented completion: {reason}")],
            metadata={"synthetic": True, "source": "hook", "hook_event": "Stop"},
        )
        return None
    if spec.guardrails is not None:
        return await _guard(spec, state, step)
    return LoopOutcome(RunStatus.completed, EndReason.completed, final_node_id=step.final_node_id)


async def _guard(spec: LoopSpec, state: LoopState, step: EndTurn) -> LoopOutcome | None:
    """The output guardrails on the final answer: accepted (the run completes), rejected (the reason as a
    note, once, and another turn) or failed / rejected beyond ``max_retries`` (the run fails)."""
    assert spec.guardrails is not None
    attempt = sum(state.guard_rejections.values()) + 1
    verdict = await spec.guardrails.guard(
        scope=spec.scope, sink=spec.recorder, answer=state.continued_text + state.final_text, attempt=attempt
    )
    name = verdict.rejected_by
    if name is None:
        return LoopOutcome(RunStatus.completed, EndReason.completed, final_node_id=step.final_node_id)
    if verdict.failure is not None:
        error = ErrorPayload(
            type="guardrail_failed",
            code=ErrorCode.internal_error,
            message=f"the final answer could not be checked: {verdict.failure}",
            details={"guardrail": name},
        )
        return LoopOutcome(RunStatus.failed, EndReason.failed, error=error)
    rejections = state.guard_rejections[name] = state.guard_rejections.get(name, 0) + 1
    if rejections > verdict.max_retries:
        error = ErrorPayload(
            type="guardrail_rejected",
            code=ErrorCode.validation_error,
            message=f"the output guardrail {name} rejected the final answer {rejections} time(s): "
            f"{verdict.reason}",
            details={"guardrail": name, "reason": verdict.reason, "rejections": rejections},
        )
        return LoopOutcome(RunStatus.failed, EndReason.failed, error=error)
    await spec.recorder.write_node(
        role=MessageRole.user,
        node_type=NodeType.system_note,
        content=[
            TextBlock(
                text=f"The output guardrail {name} rejected your final answer: {verdict.reason}\n"
                "Give the corrected final answer."
            )
        ],
        metadata={"synthetic": True, "source": "guardrail", "guardrail": name},
    )
    state.continuations, state.continued_text = 0, ""  # the next answer starts afresh
    return None


def _error_code(code: str) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.provider_error


async def _breach(spec: LoopSpec, breach: Breach | None) -> Breach | None:
    """Records a limit/loop breach: the runtime note asking for the final answer, before the final call."""
    if breach is not None:
        await write_runtime_note(spec.recorder, breach.note(), source="limits", limit=breach.limit)
    return breach


def _final_outcome(
    state: LoopState,
    status: RunStatus,
    extra: Mapping[str, object] | None = None,
    final_node_id: str | None = None,
) -> LoopOutcome:
    assert state.final is not None
    error = state.final.error()
    if extra:
        error = error.model_copy(update={"details": {**error.details, **extra}})
    return LoopOutcome(status, state.final.end_reason, error=error, final_node_id=final_node_id)


async def _build_request(
    spec: LoopSpec, state: LoopState, *, final: bool = False
) -> ModelRequest | LoopOutcome:
    """The next model request, or the run's outcome when no request can be sent (``prompt_too_long``,
    cancelled while a recovery compaction ran)."""
    await spec.compaction.before_build()
    substitutions: dict[str, ContentBlock] = {}
    recovered = False
    composition = spec.prompt.compose(turn=state.turns + 1, substitutions=substitutions)
    if composition.static_overflow:
        await _emit_report(spec, state, composition, recovered)
        return _prompt_too_long(state, composition, compact_attempted=False)
    if not composition.fits:
        more = await spec.prompt.degrade(composition)
        if more:
            substitutions.update(more)
            composition = spec.prompt.compose(turn=state.turns + 1, substitutions=substitutions)
    force, state.force_recovery = state.force_recovery, False
    if not composition.fits or force:  # after a provider overflow: one recovery compaction even if it fits
        recovered = await spec.compaction.recover(composition)
        if spec.cancel_event.is_set():
            return _interrupted(spec, EndReason.aborted_streaming)
        if recovered:
            substitutions = {}
            composition = spec.prompt.compose(turn=state.turns + 1, substitutions=substitutions)
            if not composition.fits:
                more = await spec.prompt.degrade(composition)
                if more:
                    substitutions.update(more)
                    composition = spec.prompt.compose(turn=state.turns + 1, substitutions=substitutions)
    triggered = bool(await spec.compaction.after_build(composition)) if composition.fits else False
    report = await _report(spec, state, composition, recovered, triggered)
    if composition.fits:
        # written together with model_started, which an adapter yields before it sends the request
        state.pending_report = report
    else:
        await spec.recorder.emit(report)
    if not composition.fits:
        # A hook reports whether it actually ran a recovery compaction (``recovery_attempted``).
        attempted = recovered or bool(getattr(spec.compaction, "recovery_attempted", False))
        return _prompt_too_long(state, composition, compact_attempted=attempted)
    tools = [] if final else [t for t in spec.tools if t.name in spec.scope.effective_tools]
    if composition.short_tool_descriptions:
        tools = short_tools(tools)
    if composition.tools is not None and not final:
        # a sub-agent or fork sends its parent's tool definitions (its prompt prefix); the tool pipeline
        # still runs only the child's effective tools (any other call is answered tool_not_available)
        tools = composition.tools
    state.last_estimate = composition.total_tokens
    state.last_composition = composition
    max_output = spec.max_output_tokens
    if max_output is not None:  # never ask for more output than the window leaves (issue 13)
        left = (composition.budget.context_window - composition.total_tokens) * composition.estimate_factor
        max_output = min(max_output, int(left))
    attachments: dict[str, bytes] = {}
    if composition.has_media and spec.load_attachments is not None:
        ids = [i for message in composition.messages for i in media_ids(message.content)]
        attachments = await spec.load_attachments(list(dict.fromkeys(ids)))
    request = ModelRequest.model_construct(
        model=spec.model,
        system=composition.system,
        messages=composition.messages,
        tools=tools,
        tool_choice="none" if final else "auto",
        temperature=spec.temperature,
        max_output_tokens=max_output,
        stop_sequences=[],
        metadata={**spec.request_metadata, "debug": spec.debug},
        provider_options={},
        attachments=attachments,
    )
    if spec.output is not None:
        request = spec.output.prepare(request)
    if spec.on_model_request is not None:
        spec.on_model_request(request)
    if spec.cache_watch is not None:
        found = spec.cache_watch.check(request, composition.prefix_restart)
        if found is not None:
            await spec.recorder.emit(ev.PromptCacheBreak(**found.payload(), turn=state.turns + 1))
    return request


PROMPT_CONFIG_KEYS = (
    "model.context_window",
    "context.min_output_tokens",
    "context.reserve_output_tokens",
    "tools.disabled",
)


def _prompt_too_long(state: LoopState, composition: Composition, *, compact_attempted: bool) -> LoopOutcome:
    budget = composition.budget
    factor = composition.estimate_factor  # the figures in the model's tokens (the budget is in estimates)
    window, reserved = round(budget.context_window * factor), round(budget.reserve_output_tokens * factor)
    needed = composition.total_tokens
    if composition.static_overflow:  # even the deepest degradation of the system prompt is too large
        needed = max(composition.min_prompt_tokens, 1)
    needed = round(needed * factor)
    message = (
        f"the prompt does not fit the model's context window: it needs {needed} prompt tokens, but the "
        f"context window {window} minus the reserved output {reserved} leaves {max(0, window - reserved)}. "
        "Set model.context_window to the model's real window if it is larger, lower "
        "context.min_output_tokens (the reserved output floor; context.reserve_output_tokens is the cap), "
        "or send fewer tool schemas with tools.disabled"
    )
    error = ErrorPayload(
        type="prompt_too_long",
        code=ErrorCode.validation_error,
        message=message,
        details={
            "estimated_tokens": composition.total_tokens,
            "budget": window - reserved,
            "compact_attempted": compact_attempted,
            "prompt_tokens_needed": needed,
            "context_window": window,
            "reserved_output_tokens": reserved,
            "config_keys": list(PROMPT_CONFIG_KEYS),
        },
        redacted=True,
    )
    return LoopOutcome(RunStatus.failed, EndReason.prompt_too_long, error=error, turn_count=state.turns)


async def _emit_report(
    spec: LoopSpec, state: LoopState, composition: Composition, recovered: bool, triggered: bool = False
) -> None:
    await spec.recorder.emit(await _report(spec, state, composition, recovered, triggered))


async def _flush_report(spec: LoopSpec, state: LoopState) -> None:
    """Persists a context report the stream did not write with its ``model_started`` (early failure)."""
    report, state.pending_report = state.pending_report, None
    if report is not None:
        await spec.recorder.emit(report)


async def _report(
    spec: LoopSpec, state: LoopState, composition: Composition, recovered: bool, triggered: bool = False
) -> ev.ContextBuilt:
    report = ContextBuildReport(
        run_id=spec.recorder.run_id or "",
        agent_id=spec.recorder.agent_id,
        turn=state.turns + 1,
        provider=spec.provider,
        model=spec.model,
        recovery_compact=recovered,
        compact_triggered="recovery" if recovered else ("auto" if triggered else "none"),
        task_board=composition.task_board_text or None,
        **composition.report_fields(),
    )
    payload = report.model_dump(mode="json")
    if spec.debug and spec.save_debug_artifact is not None:
        detail = {
            **payload,
            "system": [b.model_dump(mode="json") for b in composition.system],
            "messages": [m.model_dump(mode="json") for m in composition.messages],
        }
        artifact_id = await spec.save_debug_artifact("context_report", detail, "context_report.json")
        payload["detail_artifact_id"] = artifact_id
    return ev.ContextBuilt(payload)
