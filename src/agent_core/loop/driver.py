"""The one loop driver (runtime.md §7): compose → stream → persist → tools → repeat.

:func:`run_loop` runs one agent run from ``loop_started`` to its terminal events and returns a
:class:`LoopOutcome`. It never raises for run-level failures: every exit path writes exactly one terminal
status with its end reason, and ``runs`` is updated in the same transaction as the last event.
Cancellation is cooperative: :attr:`LoopSpec.cancel_event` interrupts the model stream or the tool turn, and
the driver records the partial state before ending.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from agent_core.context.composer import Composition
from agent_core.errors import AgentCoreError, ErrorCode, ProviderError, StorageError
from agent_core.hooks.base import HookDispatcher
from agent_core.loop.deltas import DeltaAggregator, DeltaRedactor
from agent_core.loop.outcome import (
    LoopOutcome,
    StreamAborted,
    StreamCompleted,
    StreamFailed,
    StreamResult,
)
from agent_core.loop.recorder import RunRecorder
from agent_core.providers.base import ProviderAdapter
from agent_core.redaction import Redactor
from agent_core.storage.ids import is_printable_id, new_id
from agent_core.tools.context import RunScope
from agent_core.types.content import ContentBlock, ErrorPayload, TextBlock, ToolCallBlock, text_of
from agent_core.types.enums import EndReason, EventType, MessageRole, NodeType, RunStatus
from agent_core.types.model import (
    ModelCompleted,
    ModelFailed,
    ModelMessage,
    ModelRequest,
    ModelStarted,
    ModelTextDelta,
    ProviderDebug,
    ProviderErrorPayload,
    ToolCall,
    ToolCallDelta,
    Usage,
    sum_usage,
)
from agent_core.types.runtime import ContextBuildReport
from agent_core.types.tools import ToolDefinition, ToolResult

log = logging.getLogger("agent_core.loop")
MAX_CONTINUATIONS = 3


class TurnOutcomeLike(Protocol):
    results: list[ToolResult]
    aborted: bool


class TurnExecutor(Protocol):
    async def execute_turn(self, calls: list[ToolCall], scope: RunScope, sink: Any) -> Any: ...


class PromptSource(Protocol):
    """Builds the composition of the next request for this run (context.md, compact.md §9)."""

    def compose(self, *, turn: int, substitutions: dict[str, ContentBlock]) -> Composition: ...

    async def degrade(self, composition: Composition) -> dict[str, ContentBlock]:
        """Artifactises large protected blocks (compact.md §9.4 step 3.1); returns substitutions."""
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


class DebugArtifactSaver(Protocol):
    async def __call__(
        self, kind: str, data: Any, filename: str, metadata: dict[str, Any] | None = None
    ) -> str | None: ...


@dataclass(kw_only=True, eq=False)
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
    interruption: Callable[[], Interruption] = field(default_factory=lambda: _default_interruption)
    """Why the cancel event fired: ``cancelled`` on request, ``aborted`` (with an error) on timeout."""

    @property
    def cancel_event(self) -> asyncio.Event:
        return self.scope.cancel_event


@dataclass(frozen=True)
class Interruption:
    status: RunStatus = RunStatus.cancelled
    reason: str = "cancel_requested"
    error: ErrorPayload | None = None


def _default_interruption() -> Interruption:
    return Interruption()


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


class _Terminal(Exception):
    def __init__(self, outcome: LoopOutcome) -> None:
        self.outcome = outcome


async def run_loop(spec: LoopSpec) -> LoopOutcome:
    """Runs turns until the run ends; returns the (already persisted) outcome."""
    state = _LoopState()
    try:
        outcome = await _turns(spec, state)
    except _Terminal as term:
        outcome = term.outcome
    except asyncio.CancelledError:
        outcome = LoopOutcome(RunStatus.cancelled, EndReason.aborted_streaming, turn_count=state.turns)
        with contextlib.suppress(BaseException):
            await asyncio.shield(_finish(spec, state, outcome, abort_reason="runtime_shutdown"))
        raise
    except AgentCoreError as exc:  # StorageError included
        outcome = _failed(state, await _with_traceback(spec, exc.to_payload(spec.redactor), exc))
    except Exception as exc:
        log.exception("loop failed unexpectedly")
        error = ErrorPayload(code=ErrorCode.internal_error, message=f"{type(exc).__name__}: {exc}")
        outcome = _failed(state, await _with_traceback(spec, error.redacted_copy(spec.redactor), exc))
    outcome.turn_count = state.turns
    outcome.usage = sum_usage(state.usages)
    outcome.final_text = state.final_text
    try:
        await _finish(spec, state, outcome)
    except Exception:
        log.exception("could not persist the terminal events of run %s", spec.recorder.run_id)
    return outcome


@dataclass
class _LoopState:
    turns: int = 0
    continuations: int = 0
    usages: list[Usage] = field(default_factory=list)
    final_text: str = ""
    final_node_id: str | None = None
    in_tools: bool = False
    pending_report: dict[str, Any] | None = None
    stop_denials: int = 0


def _failed(state: _LoopState, error: ErrorPayload, reason: EndReason = EndReason.failed) -> LoopOutcome:
    return LoopOutcome(RunStatus.failed, reason, error=error, turn_count=state.turns)


async def _turns(spec: LoopSpec, state: _LoopState) -> LoopOutcome:
    rec = spec.recorder
    while True:
        if spec.cancel_event.is_set():
            return _interrupted(spec, EndReason.aborted_streaming)
        if state.turns >= spec.max_turns:
            return LoopOutcome(RunStatus.failed, EndReason.max_turns)
        request = await _build_request(spec, state)
        state.turns += 1
        try:
            result = await _stream(spec, request, state.turns, state)
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
            await rec.emit(
                EventType.aborted_streaming, {"abort_reason": result.reason, "partial_node_id": partial_id}
            )
            return _interrupted(spec, EndReason.aborted_streaming)
        if isinstance(result, StreamFailed):
            if result.usage is not None:
                state.usages.append(result.usage)
            await _record_failure(spec, result)
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
            return LoopOutcome(RunStatus.failed, EndReason.failed, error=payload)
        completed = _normalise_calls(result.event)
        state.usages.append(completed.usage)
        assistant = await _persist_assistant(spec, completed, result.latency_ms)
        state.final_text = text_of(completed.content)
        state.final_node_id = assistant
        if completed.tool_calls:
            state.continuations = 0
            outcome = await spec.executor.execute_turn(list(completed.tool_calls), spec.scope, rec)
            order = [c.tool_call_id for c in completed.tool_calls]
            if getattr(outcome, "aborted", False):
                rec.discard_context_nodes()
                aborted_ids = list(getattr(outcome, "aborted_call_ids", []) or order)
                await rec.emit(
                    EventType.aborted_tools,
                    {"abort_reason": spec.interruption().reason, "tool_call_ids": aborted_ids},
                )
                return _interrupted(spec, EndReason.aborted_tools)
            await rec.flush_context_nodes(order)
            continue
        if completed.stop_reason.reason == "max_tokens":
            state.continuations += 1
            if state.continuations > MAX_CONTINUATIONS:
                return LoopOutcome(RunStatus.failed, EndReason.max_output_tokens_recovery)
            continue
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
            await rec.emit(
                EventType.hook_denied, {"phase": "Stop", "reason": reason, "hook_summary": stop.summary()}
            )
            await rec.emit(EventType.stop_hook_prevented, {"reason": reason, "hook_summary": stop.summary()})
            await rec.write_node(
                role=MessageRole.user,
                node_type=NodeType.system_note,
                content=[TextBlock(text=reason)],
                metadata={"synthetic": True, "source": "stop_hook", "hook_summary": stop.summary()},
            )
            continue
        return LoopOutcome(RunStatus.completed, EndReason.completed, final_node_id=assistant)


def _error_code(code: str) -> ErrorCode:
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.provider_error


async def _build_request(spec: LoopSpec, state: _LoopState) -> ModelRequest:
    await spec.compaction.before_build()
    substitutions: dict[str, ContentBlock] = {}
    recovered = False
    composition = spec.prompt.compose(turn=state.turns + 1, substitutions=substitutions)
    if composition.static_overflow:
        await _emit_report(spec, state, composition, recovered)
        raise _Terminal(_prompt_too_long(state, composition, compact_attempted=False))
    if not composition.fits:
        more = await spec.prompt.degrade(composition)
        if more:
            substitutions.update(more)
            composition = spec.prompt.compose(turn=state.turns + 1, substitutions=substitutions)
    if not composition.fits:
        recovered = await spec.compaction.recover(composition)
        if spec.cancel_event.is_set():
            raise _Terminal(_interrupted(spec, EndReason.aborted_streaming))
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
        await spec.recorder.emit(EventType.context_built, report)
    if not composition.fits:
        # A hook reports whether it actually ran a recovery compaction (``recovery_attempted``).
        attempted = recovered or bool(getattr(spec.compaction, "recovery_attempted", False))
        raise _Terminal(_prompt_too_long(state, composition, compact_attempted=attempted))
    request = ModelRequest.model_construct(
        model=spec.model,
        system=composition.system,
        messages=composition.messages,
        tools=[t for t in spec.tools if t.name in spec.scope.effective_tools],
        tool_choice="auto",
        temperature=spec.temperature,
        max_output_tokens=spec.max_output_tokens,
        stop_sequences=[],
        metadata={**spec.request_metadata, "debug": spec.debug},
        provider_options={},
    )
    if spec.on_model_request is not None:
        spec.on_model_request(request)
    return request


def _prompt_too_long(state: _LoopState, composition: Composition, *, compact_attempted: bool) -> LoopOutcome:
    error = ErrorPayload(
        type="prompt_too_long",
        code=ErrorCode.validation_error,
        message="the prompt does not fit the model's context window",
        details={
            "estimated_tokens": composition.total_tokens,
            "budget": composition.budget.context_window - composition.budget.reserve_output_tokens,
            "compact_attempted": compact_attempted,
        },
        redacted=True,
    )
    return LoopOutcome(RunStatus.failed, EndReason.prompt_too_long, error=error, turn_count=state.turns)


async def _emit_report(
    spec: LoopSpec, state: _LoopState, composition: Composition, recovered: bool, triggered: bool = False
) -> None:
    await spec.recorder.emit(
        EventType.context_built, await _report(spec, state, composition, recovered, triggered)
    )


async def _flush_report(spec: LoopSpec, state: _LoopState) -> None:
    """Persists a context report the stream did not write with its ``model_started`` (early failure)."""
    report, state.pending_report = state.pending_report, None
    if report is not None:
        await spec.recorder.emit(EventType.context_built, report)


async def _report(
    spec: LoopSpec, state: _LoopState, composition: Composition, recovered: bool, triggered: bool = False
) -> dict[str, Any]:
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
    return payload


async def _stream(spec: LoopSpec, request: ModelRequest, turn: int, state: _LoopState) -> StreamResult:
    rec = spec.recorder
    text_parts: list[str] = []
    partial_calls: dict[int, str] = {}
    raw_debug: dict[str, Any] = {}
    started = time.monotonic()
    text_redactor = DeltaRedactor(spec.redactor)
    arg_redactors: dict[int, DeltaRedactor] = {}
    aggregate = DeltaAggregator() if spec.debug else None

    async def forward_text(text: str) -> None:
        """Live deltas carry only secret-free text (a secret split across deltas is held back)."""
        if not text:
            return
        await rec.emit(EventType.model_text_delta, {"text": text})
        await rec.emit(EventType.message_delta, {"text": text})
        if aggregate is not None:
            aggregate.add(text)

    async def end_text() -> None:
        """Releases held-back text; in debug mode persists the call's text as aggregated deltas."""
        await forward_text(text_redactor.flush())
        if aggregate is not None:
            for chunk in aggregate.drain():
                await rec.persist_event(EventType.model_text_delta, {"text": chunk})

    async def consume() -> StreamResult:
        agen = spec.adapter.stream(request)
        try:
            async for event in agen:
                if isinstance(event, ModelTextDelta):
                    text_parts.append(event.text)
                    await forward_text(text_redactor.feed(event.text))
                elif isinstance(event, ToolCallDelta):
                    if event.phase == "start" and event.name:
                        partial_calls[event.index] = event.name
                    arguments = event.arguments_delta
                    args_redactor = arg_redactors.setdefault(event.index, DeltaRedactor(spec.redactor))
                    if arguments:
                        arguments = args_redactor.feed(arguments)
                    if event.phase == "end":
                        arguments = ((arguments or "") + args_redactor.flush()) or arguments
                    await rec.emit(
                        EventType.tool_call_delta,
                        {
                            "index": event.index,
                            "phase": event.phase,
                            "tool_call_id": event.tool_call_id,
                            "name": event.name,
                            "arguments_delta": arguments,
                        },
                        tool_call_id=event.tool_call_id,
                    )
                elif isinstance(event, ModelStarted):
                    started_event = (
                        EventType.model_started,
                        {"provider": event.provider, "model": event.model, "turn": turn},
                    )
                    report, state.pending_report = state.pending_report, None
                    if report is not None:
                        await rec.emit_events([(EventType.context_built, report), started_event])
                    else:
                        await rec.emit(*started_event)
                elif isinstance(event, ProviderDebug):
                    raw_debug[event.kind] = event.data
                    await rec.emit(
                        EventType.provider_debug,
                        {
                            "provider": spec.provider,
                            "kind": event.kind,
                            "data": spec.redactor.value(event.data),
                        },
                    )
                elif isinstance(event, ModelCompleted):
                    await end_text()
                    problem = _validate_completed(event)
                    if problem:
                        return StreamFailed(
                            ProviderErrorPayload(
                                type="protocol", code="provider_error", message=problem, retryable=False
                            ),
                            "".join(text_parts),
                            list(partial_calls.values()),
                        )
                    if raw_debug:
                        event.metadata.setdefault("_raw_debug", raw_debug)
                    return StreamCompleted(event, int((time.monotonic() - started) * 1000))
                elif isinstance(event, ModelFailed):
                    await end_text()
                    return StreamFailed(
                        event.error, "".join(text_parts), list(partial_calls.values()), event.usage
                    )
        except ProviderError as exc:
            await end_text()
            return StreamFailed(exc.payload, "".join(text_parts), list(partial_calls.values()))
        finally:
            aclose = getattr(agen, "aclose", None)
            if aclose is not None:
                with contextlib.suppress(Exception):
                    await aclose()
        await end_text()
        return StreamFailed(
            ProviderErrorPayload(
                type="protocol",
                code="provider_error",
                message="the model stream ended without a terminal event",
                retryable=False,
            ),
            "".join(text_parts),
            list(partial_calls.values()),
        )

    task = asyncio.create_task(consume())
    waiter = asyncio.create_task(spec.cancel_event.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        waiter.cancel()
        raise
    if task in done:
        waiter.cancel()
        try:
            return task.result()
        except (AgentCoreError, StorageError):
            raise
        except Exception as exc:
            return StreamFailed(
                ProviderErrorPayload(
                    type="internal",
                    code="internal_error",
                    message=f"{type(exc).__name__}: {exc}",
                    retryable=False,
                ),
                "".join(text_parts),
                list(partial_calls.values()),
                exc=exc,
            )
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    return StreamAborted("".join(text_parts), spec.interruption().reason)


def _validate_completed(event: ModelCompleted) -> str | None:
    ids = [c.tool_call_id for c in event.tool_calls]
    if any(not i for i in ids) or len(set(ids)) != len(ids):
        return "model_completed carries empty or duplicate tool_call ids"
    blocks = [b for b in event.content if isinstance(b, ToolCallBlock)]
    if len(blocks) != len(event.tool_calls):
        return "model_completed tool_call blocks do not match tool_calls"
    for block, call in zip(blocks, event.tool_calls, strict=True):
        if (
            block.tool_call_id != call.tool_call_id
            or block.name != call.name
            or block.arguments != call.arguments
        ):
            return "model_completed tool_call blocks do not match tool_calls"
    return None


def _normalise_calls(event: ModelCompleted) -> ModelCompleted:
    """Replaces unusable or duplicate call ids by generated ``call_`` ids (runtime.md §4)."""
    seen: set[str] = set()
    renames: dict[int, str] = {}
    for index, call in enumerate(event.tool_calls):
        if not is_printable_id(call.tool_call_id) or call.tool_call_id in seen:
            renames[index] = new_id("call_")
        seen.add(call.tool_call_id)
    if not renames:
        return event
    calls = list(event.tool_calls)
    content = list(event.content)
    block_positions = [i for i, b in enumerate(content) if isinstance(b, ToolCallBlock)]
    for index, new in renames.items():
        old = calls[index]
        meta = {**old.metadata, "provider_tool_call_id": old.tool_call_id}
        calls[index] = old.model_copy(update={"tool_call_id": new, "metadata": meta})
        pos = block_positions[index]
        block = content[pos]
        assert isinstance(block, ToolCallBlock)
        content[pos] = block.model_copy(update={"tool_call_id": new, "metadata": {**block.metadata, **meta}})
    return event.model_copy(update={"tool_calls": calls, "content": content})


async def _persist_assistant(spec: LoopSpec, completed: ModelCompleted, latency_ms: int) -> str:
    meta = dict(completed.metadata)
    raw = meta.pop("_raw_debug", None)
    metadata: dict[str, Any] = {
        "provider": meta.get("provider", spec.provider),
        "model": meta.get("model", spec.model),
        "stop_reason": completed.stop_reason.model_dump(),
        "usage": completed.usage.model_dump(),
        "latency_ms": meta.get("latency_ms", latency_ms),
    }
    for key in ("request_id", "response_id", "retry", "time_to_first_token_ms"):
        if key in meta:
            metadata[key] = meta[key]
    if spec.debug and raw and spec.save_debug_artifact is not None:
        if "raw_request" in raw:
            metadata["raw_request_artifact_id"] = await spec.save_debug_artifact(
                "provider_raw",
                raw["raw_request"],
                "raw_request.json",
                {"direction": "request", "source": spec.provider},
            )
        if "raw_response" in raw:
            metadata["raw_response_artifact_id"] = await spec.save_debug_artifact(
                "provider_raw",
                raw["raw_response"],
                "raw_response.jsonl",
                {"direction": "response", "source": spec.provider},
            )
    text = text_of(completed.content)
    model_payload = {
        "stop_reason": completed.stop_reason.reason,
        "raw_stop_reason": completed.stop_reason.raw_stop_reason,
        "usage": completed.usage.model_dump(),
        "tool_call_count": len(completed.tool_calls),
        "latency_ms": metadata["latency_ms"],
        "retries": _retry_count(meta.get("retry")),
    }
    message_payload = {"role": "assistant", "text": text, "has_tool_calls": bool(completed.tool_calls)}
    node = await spec.recorder.write_node(
        role=MessageRole.assistant,
        node_type=NodeType.message,
        content=list(completed.content),
        metadata=metadata,
        events=[
            (EventType.model_completed, model_payload, None),
            (EventType.message_completed, message_payload, None),
        ],
    )
    return node.node_id


def _retry_count(retry: Any) -> int:
    if isinstance(retry, dict):
        return max(0, int(retry.get("attempts", 1)) - 1)
    return 0


async def _record_failure(spec: LoopSpec, failure: StreamFailed) -> None:
    rec = spec.recorder
    error = failure.error.model_copy(update={"message": spec.redactor.text(failure.error.message)})
    partial_id = None
    if failure.partial_text:
        metadata: dict[str, Any] = {
            "partial": True,
            "failed": True,
            "error": error.model_dump(),
            "stop_reason": {"reason": "error", "raw_stop_reason": None},
            "provider": spec.provider,
            "model": spec.model,
        }
        if failure.partial_tool_calls:
            metadata["partial_tool_calls"] = failure.partial_tool_calls
        node = await rec.write_node(
            role=MessageRole.assistant,
            node_type=NodeType.message,
            content=[TextBlock(text=failure.partial_text)],
            metadata=metadata,
        )
        partial_id = node.node_id
    await rec.emit(EventType.model_failed, {"error": error.model_dump(), "partial_node_id": partial_id})


async def _finish(
    spec: LoopSpec, state: _LoopState, outcome: LoopOutcome, abort_reason: str | None = None
) -> None:
    rec = spec.recorder
    abort_reason = abort_reason or spec.interruption().reason
    usage = sum_usage(state.usages)
    outcome.usage = usage
    run_update: dict[str, Any] = {
        "status": outcome.status.value,
        "end_reason": outcome.end_reason.value if outcome.end_reason else None,
        "turn_count": state.turns,
        "usage_json": usage.model_dump_json(),
        "error_json": outcome.error.model_dump_json() if outcome.error else None,
        "end_node_id": rec.visible_tip(),
    }
    reason = outcome.end_reason
    events: list[tuple[EventType, dict[str, Any]]]
    if reason == EndReason.completed:
        events = [
            (EventType.loop_completed, {"end_reason": reason.value, "turn_count": state.turns}),
            (
                EventType.run_completed,
                {
                    "end_reason": reason.value,
                    "turn_count": state.turns,
                    "usage": usage.model_dump(),
                    "final_node_id": outcome.final_node_id,
                },
            ),
        ]
    elif reason in (EndReason.aborted_streaming, EndReason.aborted_tools):
        events = [(EventType.loop_aborted, {"end_reason": reason.value, "abort_reason": abort_reason})]
        if outcome.status == RunStatus.cancelled:
            events.append(
                (
                    EventType.run_cancelled,
                    {"reason": abort_reason, "was_queued": False, "end_reason": reason.value},
                )
            )
    else:
        error = outcome.error.model_dump(mode="json") if outcome.error else None
        events = []
        if reason == EndReason.failed and outcome.error is not None:
            events.append((EventType.error, outcome.error.model_dump(mode="json")))
        events.append(
            (EventType.loop_failed, {"end_reason": reason.value if reason else None, "error": error})
        )
    # the terminal events and the runs row are one transaction: a run is never left half-finished
    await rec.emit_events(events, run_update=run_update)


def messages_text(messages: Sequence[ModelMessage]) -> str:
    return "\n".join(text_of(m.content) for m in messages)
