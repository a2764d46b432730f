"""One model call of a run: stream it, forward live deltas, validate and persist the outcome."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import race
from agent_core._ids import is_printable_id, new_id
from agent_core._loop._call_ids import CallIdGuard, TakenIds
from agent_core._loop.deltas import DeltaAggregator, DeltaRedactor
from agent_core._loop.outcome import StreamAborted, StreamCompleted, StreamFailed, StreamResult
from agent_core._loop.spec import LoopSpec, LoopState
from agent_core.errors import AgentCoreError, ProviderError, StorageError
from agent_core.types import events as ev
from agent_core.types.content import (
    ContentBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    reasoning_of,
    text_of,
)
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.model import (
    ModelCompleted,
    ModelFailed,
    ModelReasoningDelta,
    ModelRequest,
    ModelStarted,
    ModelTextDelta,
    ProviderDebug,
    ProviderErrorPayload,
    ToolCallDelta,
)

if TYPE_CHECKING:
    from agent_core._loop.recorder import RunRecorder


async def stream_model(spec: LoopSpec, request: ModelRequest, turn: int, state: LoopState) -> StreamResult:
    rec = spec.recorder
    text_parts: list[str] = []
    partial_calls: dict[int, str] = {}
    raw_debug: dict[str, object] = {}
    started = time.monotonic()
    text_redactor = DeltaRedactor(spec.redactor)
    reasoning_redactor = DeltaRedactor(spec.redactor)
    arg_redactors: dict[int, DeltaRedactor] = {}
    aggregate = DeltaAggregator() if spec.debug else None
    call_ids = CallIdGuard(spec.redactor, TakenIds(request.messages, frozenset(state.call_ids)))
    progress = _Progress(spec, turn)

    async def forward_text(text: str) -> None:
        """Live deltas carry only secret-free text (a secret split across deltas is held back)."""
        if not text:
            return
        await rec.emit(ev.ModelTextDelta(text))
        await rec.emit(ev.MessageDelta(text))
        if aggregate is not None:
            aggregate.add(text)

    async def forward_reasoning(text: str) -> None:
        if text:
            await rec.emit(ev.ReasoningDelta(text))

    async def end_text() -> None:
        """Releases held-back text; in debug mode persists the call's text as aggregated deltas."""
        await forward_reasoning(reasoning_redactor.flush())
        await forward_text(text_redactor.flush())
        if aggregate is not None:
            for chunk in aggregate.drain():
                await rec.persist_event(ev.ModelTextDelta(chunk))

    async def consume() -> StreamResult:
        agen = spec.adapter.stream(request)
        try:
            async for event in agen:
                if progress.waiting and isinstance(
                    event, ModelTextDelta | ToolCallDelta | ModelReasoningDelta
                ):
                    await progress.first_token(rec)
                if isinstance(event, ModelReasoningDelta):
                    await forward_reasoning(reasoning_redactor.feed(event.text))
                elif isinstance(event, ModelTextDelta):
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
                    safe_id = call_ids.safe(event.tool_call_id)
                    await rec.emit(
                        ev.ToolCallDelta(event.index, event.phase, safe_id, event.name, arguments),
                        tool_call_id=safe_id,
                    )
                elif isinstance(event, ModelStarted):
                    started_event = ev.ModelStarted(event.provider, event.model, turn)
                    report, state.pending_report = state.pending_report, None
                    written = [report, started_event] if report is not None else [started_event]
                    await rec.emit_events(written)
                    await progress.waiting_for(rec, event, report)
                elif isinstance(event, ProviderDebug):
                    raw_debug[event.kind] = event.data
                    await rec.emit(
                        ev.ProviderDebug(spec.provider, event.kind, spec.redactor.value(event.data))
                    )
                elif isinstance(event, ModelCompleted):
                    await end_text()
                    event = call_ids.apply(event)  # no unsafe provider id reaches a column (issue 14 item 4)
                    state.call_ids.update(c.tool_call_id for c in event.tool_calls)
                    problem = validate_completed(event)
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
                    return StreamCompleted(
                        event, int((time.monotonic() - started) * 1000), progress.first_token_ms
                    )
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

    task = await race(consume(), spec.cancel_event)
    if task.cancelled():  # the run's cancel event interrupted the stream
        return StreamAborted("".join(text_parts), spec.interruption().reason)
    error = task.exception()
    if error is None:
        return task.result()
    if isinstance(error, AgentCoreError | StorageError) or not isinstance(error, Exception):
        raise error
    return _internal_failure(error, text_parts, partial_calls)


class _Progress:
    """The ``model_progress`` events of one call: ``waiting`` when the request goes out, ``streaming`` at
    the first token (text or a tool call)."""

    def __init__(self, spec: LoopSpec, turn: int) -> None:
        self.spec = spec
        self.turn = turn
        self.waiting = False
        self.requested_at = time.monotonic()
        self.first_token_ms: int | None = None
        self.provider = spec.provider
        self.model = spec.model

    async def waiting_for(
        self, rec: RunRecorder, started: ModelStarted, report: ev.ContextBuilt | None
    ) -> None:
        self.requested_at = time.monotonic()
        self.waiting = True
        self.provider, self.model = started.provider or self.provider, started.model or self.model
        budget = report.report.get("token_budget") if report is not None else None
        tokens = budget.get("total_tokens") if isinstance(budget, dict) else None
        window = budget.get("context_window") if isinstance(budget, dict) else None
        await rec.emit(
            ev.ModelProgress(
                phase="waiting",
                provider=self.provider,
                model=self.model,
                turn=self.turn,
                prompt_tokens=tokens if isinstance(tokens, int) else None,
                context_window=window if isinstance(window, int) else None,
            )
        )

    async def first_token(self, rec: RunRecorder) -> None:
        self.waiting = False
        self.first_token_ms = int((time.monotonic() - self.requested_at) * 1000)
        await rec.emit(
            ev.ModelProgress(
                phase="streaming",
                provider=self.provider,
                model=self.model,
                turn=self.turn,
                waited_ms=self.first_token_ms,
            )
        )


def done_progress(
    spec: LoopSpec, turn: int, completed: ModelCompleted, latency_ms: int, first_token_ms: int | None
) -> ev.ModelProgress:
    """The ``done`` :class:`~agent_core.types.events.ModelProgress` of a completed call: the usage the
    provider reported and the output rate over the generation time (first token to the end)."""
    meta = completed.metadata
    output = completed.usage.output_tokens
    generating_ms = latency_ms - first_token_ms if first_token_ms is not None else latency_ms
    rate = round(output * 1000 / generating_ms, 1) if output > 0 and generating_ms > 0 else None
    return ev.ModelProgress(
        phase="done",
        provider=str(meta.get("provider") or spec.provider),
        model=str(meta.get("model") or spec.model),
        turn=turn,
        prompt_tokens=completed.usage.input_tokens,
        waited_ms=first_token_ms if first_token_ms is not None else latency_ms,
        output_tokens=output,
        tokens_per_second=rate,
        stop_reason=completed.stop_reason.reason,
    )


def _internal_failure(exc: Exception, text_parts: list[str], partial_calls: dict[int, str]) -> StreamFailed:
    """An unexpected error inside the stream: an ``internal_error`` failure keeping the partial output."""
    return StreamFailed(
        ProviderErrorPayload(
            type="internal", code="internal_error", message=f"{type(exc).__name__}: {exc}", retryable=False
        ),
        "".join(text_parts),
        list(partial_calls.values()),
        exc=exc,
    )


def validate_completed(event: ModelCompleted) -> str | None:
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


def normalise_calls(event: ModelCompleted) -> ModelCompleted:
    """Replaces unusable or duplicate call ids by generated ``call_`` ids
    (docs/architecture.md#identifiers-and-time)."""
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


SIGNED_SECRET_NOTE = (
    "a signed reasoning block held a secret: redacting it would break its signature (the provider would "
    "refuse it), so the block was dropped"
)


def reasoning_kept(
    spec: LoopSpec, content: list[ContentBlock]
) -> tuple[list[ContentBlock], list[dict[str, Any]]]:
    """The content to store and the reasoning blocks dropped from it (with why).

    Redaction never alters a signed reasoning block (the provider checks its signature when it comes
    back): one whose text or signature holds a secret is dropped instead. An unsigned block is redacted
    like any other text when it is stored."""
    kept: list[ContentBlock] = []
    dropped: list[dict[str, Any]] = []
    for block in content:
        if (
            isinstance(block, ReasoningBlock)
            and block.signature
            and (spec.redactor.contains_secret(block.text) or spec.redactor.contains_secret(block.signature))
        ):
            dropped.append(
                {"provider": block.provider, "redacted": block.redacted, "reason": SIGNED_SECRET_NOTE}
            )
            continue
        kept.append(block)
    return kept, dropped


async def persist_assistant(spec: LoopSpec, completed: ModelCompleted, latency_ms: int) -> str:
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
    content, dropped = reasoning_kept(spec, list(completed.content))
    if dropped:
        metadata["reasoning_dropped"] = dropped
    text = text_of(content)
    reasoning = reasoning_of(content)
    model_event = ev.ModelCompleted(
        stop_reason=completed.stop_reason.reason,
        raw_stop_reason=completed.stop_reason.raw_stop_reason,
        usage=completed.usage.model_dump(),
        tool_call_count=len(completed.tool_calls),
        latency_ms=metadata["latency_ms"],
        retries=_retry_count(meta.get("retry")),
    )
    message_event = ev.MessageCompleted(
        text=text, has_tool_calls=bool(completed.tool_calls), reasoning=reasoning if reasoning else ev.ABSENT
    )
    node = await spec.recorder.write_node(
        role=MessageRole.assistant,
        node_type=NodeType.message,
        content=content,
        metadata=metadata,
        events=[
            (model_event, None),
            (message_event, None),
        ],
    )
    return node.node_id


def _retry_count(retry: object) -> int:
    if isinstance(retry, dict):
        return max(0, int(retry.get("attempts", 1)) - 1)
    return 0


async def record_failure(spec: LoopSpec, failure: StreamFailed) -> None:
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
    await rec.emit(ev.ModelFailed(error=error.model_dump(), partial_node_id=partial_id))
