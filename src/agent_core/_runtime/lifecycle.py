"""The run lifecycle, one module for root, child, worker and compact runs (docs/runs.md#starting-a-run,
docs/runs.md#the-agent-loop, docs/runs.md#cancellation).

Every run moves through the same steps and each step is written here, once:

1. **register** — :func:`insert_run_row` writes the ``runs`` row (its metadata carries :func:`model_meta`)
   and :func:`attach_recorder` gives the :class:`RunState` its :class:`RunRecorder`;
2. **start** — :func:`start_loop` writes ``loop_started`` and moves the row to ``running``;
3. **end** — :func:`run_agent_loop` runs the loop driver and writes the terminal events with the final
   ``runs`` update in one transaction (:func:`finish_loop`); a run that ends before its loop writes
   :func:`cancel_before_loop` or :func:`fail_before_loop` instead.

Each path ends the :class:`RunState` exactly once (``RunState.finish``) with one terminal status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agent_core._concurrency import wait_uninterrupted
from agent_core._jsontext import compact_json
from agent_core._loop._limits import usage_record
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.driver import run_loop
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.recorder import RunRecorder
from agent_core._loop.spec import Interruption, LoopSpec, LoopState
from agent_core._runtime._nested import child_forwarder
from agent_core._runtime.services import Services
from agent_core._runtime.state import RunState
from agent_core._storage.protocol import SessionStore
from agent_core.config._pricing import Prices, cost_usd
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types import events as ev
from agent_core.types.base import format_ts
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import AgentType, EndReason, RunStatus
from agent_core.types.model import sum_usage
from agent_core.types.runtime import RuntimeEvent
from agent_core.types.storage import RunRecord

log = logging.getLogger("agent_core._runtime")

TerminalEvents = list[ev.EventPayload]


def model_meta(model: ResolvedModelConfig) -> dict[str, Any]:
    """The resolved model as recorded in ``runs.metadata_json.model`` of every run (never a secret)."""
    return {
        "provider": model.provider,
        "name": model.name,
        "base_url": model.base_url,
        "profile": model.profile,
        "purpose": model.purpose,
        "max_output_tokens": model.max_output_tokens,
        "temperature": model.temperature,
        "source": model.source,
    }


# ---- register ---------------------------------------------------------------------------------------
async def insert_run_row(
    storage: SessionStore,
    *,
    run_id: str,
    session_id: str,
    agent_id: str,
    status: RunStatus,
    metadata: Mapping[str, Any],
) -> None:
    """Writes the run's ``runs`` row (``metadata`` as compact JSON)."""
    now = format_ts()
    await storage.insert_run(
        RunRecord(
            run_id=run_id,
            session_id=session_id,
            agent_id=agent_id,
            status=status,
            metadata_json=compact_json(dict(metadata)),
            created_at=now,
            updated_at=now,
        )
    )


def attach_recorder(
    services: Services,
    state: RunState,
    cursor: AgentCursor,
    *,
    root_agent: bool,
    observers: Sequence[Callable[[RuntimeEvent], None]] = (),
) -> RunRecorder:
    """Creates the run's recorder (a child run's events also reach its ancestors' streams)."""
    state.recorder = RunRecorder(
        storage=services.storage,
        artifacts=services.artifacts,
        channel=state.channel,
        cursor=cursor,
        session_id=state.session_id,
        agent_id=state.agent_id,
        run_id=state.run_id,
        redactor=services.redactor,
        root_agent=root_agent,
        counter=services.counter,
        observers=observers,
        forward=child_forwarder(state) if state.parent is not None else None,
    )
    return state.recorder


# ---- start ------------------------------------------------------------------------------------------
async def start_loop(state: RunState, *, agent_type: AgentType, max_turns: int) -> None:
    """``loop_started``; the run becomes ``running`` (one transaction, delivered once committed)."""
    state.status = RunStatus.running
    await state.recorder.emit_event(
        ev.LoopStarted(mode=state.mode.value, agent_type=agent_type.value, max_turns=max_turns),
        run_update={"status": RunStatus.running.value},
    )


# ---- end --------------------------------------------------------------------------------------------
async def run_agent_loop(state: RunState, loop: LoopSpec, prices: Prices | None) -> LoopOutcome:
    """Runs the loop driver and writes the run's terminal events; ends ``state`` with the outcome.

    A task cancelled mid-loop (runtime shutdown) still records ``aborted_streaming`` before re-raising.
    """
    progress = LoopState()
    try:
        outcome = await run_loop(loop, progress)
    except asyncio.CancelledError:
        outcome = LoopOutcome(RunStatus.cancelled, EndReason.aborted_streaming, turn_count=progress.turns)
        outcome.usage = sum_usage(progress.usages)
        with contextlib.suppress(BaseException):  # written whole, even if cancelled again meanwhile
            await wait_uninterrupted(
                finish_loop(state.recorder, outcome, prices=prices, abort_reason="runtime_shutdown")
            )
        raise
    try:
        await finish_loop(
            state.recorder,
            outcome,
            prices=prices,
            abort_reason=loop.interruption().reason,
            model_prices=loop.model_prices,
        )
    except Exception:
        log.exception("could not persist the terminal events of run %s", state.run_id)
    if loop.output is not None and loop.output.accepted:
        state.output_value = loop.output.value
        state.output_accepted = True
    state.finish(outcome.status, outcome.end_reason, outcome.error)
    return outcome


def terminal_events(outcome: LoopOutcome, usage: dict[str, Any], abort_reason: str) -> TerminalEvents:
    """The terminal events of a run that went through its loop (docs/runs.md#end-reasons)."""
    reason = outcome.end_reason
    turns = outcome.turn_count
    if reason is not None and (reason == EndReason.completed or outcome.status == RunStatus.completed):
        completed = ev.RunCompleted(
            end_reason=reason.value,
            turn_count=turns,
            usage=usage,
            final_node_id=outcome.final_node_id,
            # limit_reached / loop_detected with a final answer
            error=outcome.error.model_dump(mode="json") if outcome.error is not None else ev.ABSENT,
        )
        return [ev.LoopCompleted(end_reason=reason.value, turn_count=turns), completed]
    if reason in (EndReason.aborted_streaming, EndReason.aborted_tools):
        assert reason is not None
        events: TerminalEvents = [ev.LoopAborted(end_reason=reason.value, abort_reason=abort_reason)]
        if outcome.status == RunStatus.cancelled:
            events.append(ev.RunCancelled(reason=abort_reason, was_queued=False, end_reason=reason.value))
        return events
    error = outcome.error.model_dump(mode="json") if outcome.error else None
    events = []
    if reason == EndReason.failed and outcome.error is not None:
        events.append(ev.Error(outcome.error.model_dump(mode="json")))
    events.append(ev.LoopFailed(end_reason=reason.value if reason else None, error=error))
    return events


def run_usage_record(
    outcome: LoopOutcome, prices: Prices | None, model_prices: dict[str, Prices] | None = None
) -> dict[str, Any]:
    """``runs.usage_json``: the run's usage and cost; a run that used more than one model (a fallback)
    also has ``by_model`` (``provider/model`` → that model's usage record, priced with its own prices),
    and its ``cost_usd`` is their sum."""
    if not outcome.usage_by_model:
        return usage_record(outcome.usage, cost_usd(outcome.usage, prices) if prices else None)
    by_model: dict[str, Any] = {}
    costs: list[float] = []
    for key, usage in outcome.usage_by_model.items():
        own = (model_prices or {}).get(key, prices)
        cost = cost_usd(usage, own) if own else None
        if cost is not None:
            costs.append(cost)
        by_model[key] = usage_record(usage, cost)
    record = usage_record(outcome.usage, sum(costs) if costs else None)
    record["by_model"] = by_model
    return record


async def finish_loop(
    rec: RunRecorder,
    outcome: LoopOutcome,
    *,
    prices: Prices | None,
    abort_reason: str,
    model_prices: dict[str, Prices] | None = None,
) -> None:
    """Writes the terminal events and the final ``runs`` update in one transaction."""
    usage = run_usage_record(outcome, prices, model_prices)
    run_update: dict[str, Any] = {
        "status": outcome.status.value,
        "end_reason": outcome.end_reason.value if outcome.end_reason else None,
        "turn_count": outcome.turn_count,
        "usage_json": compact_json(usage),
        "error_json": outcome.error.model_dump_json() if outcome.error else None,
        "end_node_id": rec.visible_tip(),
    }
    await rec.emit_events(terminal_events(outcome, usage, abort_reason), run_update=run_update)


async def cancel_before_loop(state: RunState, interruption: Interruption) -> None:
    """A run cancelled before its loop started: ``run_cancelled`` (no end reason)."""
    await state.recorder.emit_event(
        ev.RunCancelled(reason=interruption.reason, was_queued=state.was_queued, end_reason=None),
        run_update={"status": interruption.status.value},
    )
    state.finish(interruption.status, None, interruption.error)


async def fail_before_loop(services: Services, state: RunState, exc: BaseException) -> None:
    """A run that failed before or outside its loop: ``error`` + ``loop_failed``, status ``failed``.

    In debug mode the redacted traceback is stored as an artifact named by ``details``."""
    if isinstance(exc, AgentCoreError):
        error = exc.to_payload(services.redactor)
    else:
        log.error("run %s failed outside its loop", state.run_id, exc_info=exc)
        error = ErrorPayload(
            code=ErrorCode.internal_error, message=f"{type(exc).__name__}: {exc}"
        ).redacted_copy(services.redactor)
    if state.terminal:
        return
    if services.debug:
        error = await _with_traceback(services, state, error, exc)
    with contextlib.suppress(Exception):
        # one write: the run's end (a store that lost the session's lease still writes it whole)
        await state.recorder.emit_events(
            [
                ev.Error(error.model_dump(mode="json")),
                ev.LoopFailed(end_reason=EndReason.failed.value, error=error.model_dump(mode="json")),
            ],
            run_update={
                "status": RunStatus.failed.value,
                "end_reason": EndReason.failed.value,
                "error_json": error.model_dump_json(),
            },
        )
    state.finish(RunStatus.failed, EndReason.failed, error)


async def _with_traceback(
    services: Services, state: RunState, error: ErrorPayload, exc: BaseException
) -> ErrorPayload:
    """Stores the redacted traceback as a debug artifact referenced by ``details.traceback_artifact_id``."""
    text = services.redactor.text("".join(traceback.format_exception(exc)))
    try:
        ref = await services.artifacts.create(
            text,
            filename="traceback.txt",
            mime_type="text/plain",
            kind="traceback",
            session_id=state.session_id,
            agent_id=state.agent_id,
            run_id=state.run_id,
        )
    except Exception:
        log.warning("could not store the traceback artifact of run %s", state.run_id, exc_info=True)
        return error
    return error.model_copy(update={"details": {**error.details, "traceback_artifact_id": ref.artifact_id}})


def ended_unexpectedly(state: RunState) -> None:
    """The ``finally`` of a run task: a run that is still not terminal (its task was cancelled) ends
    ``cancelled`` when a cancel was requested, else ``failed``."""
    if state.terminal:
        return
    if state.cancel_event.is_set():
        state.finish(RunStatus.cancelled, EndReason.aborted_streaming, None)
    else:
        state.finish(RunStatus.failed, EndReason.failed, None)
