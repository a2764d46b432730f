"""The run's steps as Temporal activities, executed by a worker against the shared store.

Each activity runs one step of the loop driver (``agent_core._loop.driver``) — the same code the local
engine runs — and persists its nodes and events itself; it returns only a :class:`Step` (ids, counters).

* Retries have one owner per failure kind: the provider adapter retries provider errors inside the model
  step (a provider failure that survives its retries is the step's *result*, never an activity failure);
  Temporal retries the activity only when it did not finish — its worker died (heartbeat timeout) or the
  store failed — and the retry continues from the store: a stored answer is not requested again and a
  stored tool result is not executed again.
* Every activity heartbeats while it runs (also while a model streams), which is how a cancelled workflow
  reaches it: the run's cancel event is set, the step ends as the local loop's would (partial answer,
  aborted tools), the terminal events are written and the activity reports the cancellation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio import activity

from agent_core._loop.driver import (
    ModelTurn,
    after_model_step,
    answer_step,
    end_outcome,
    guarded_step,
    model_step,
)
from agent_core._loop.outcome import LoopOutcome
from agent_core._runtime import lifecycle
from agent_core._runtime.runs import RunManager
from agent_core.engine.temporal._contexts import (
    RunContext,
    RunContexts,
    checkpoint,
    stored_answer,
    turn_from_node,
)
from agent_core.engine.temporal._payloads import (
    AFTER,
    BEGIN,
    FINISH,
    MODEL,
    Checkpoint,
    RunInput,
    RunResult,
    Step,
    StepInput,
)
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.runtime import UserMessage

T = TypeVar("T")


class RunActivities:
    """The activities of one worker process; ``heartbeat_s`` is the interval between heartbeats."""

    def __init__(self, manager: RunManager, *, heartbeat_s: float = 1.0) -> None:
        self.contexts = RunContexts(manager)
        self.heartbeat_s = heartbeat_s

    def all(self) -> list[Any]:
        return [self.begin_run, self.model_step, self.after_model_step, self.finish_run]

    # ---- activities -----------------------------------------------------------------------------
    @activity.defn(name=BEGIN)
    async def begin_run(self, inp: RunInput) -> Step:
        """``loop_started`` and the first nodes (hooks, the user message), unless already stored."""
        message = UserMessage.model_validate_json(inp.message_json)
        ctx = await self.contexts.open(inp.run_id, inp.session_id, Checkpoint(), message)
        return Step("model", checkpoint(ctx))

    @activity.defn(name=MODEL)
    async def model_step(self, inp: StepInput) -> Step:
        """One model call (limits, request, stream, the stored answer)."""
        ctx = await self.contexts.open(inp.run_id, inp.session_id, inp.step.checkpoint)
        stored = stored_answer(ctx, inp.step.checkpoint)
        if stored is not None:  # a previous attempt stored the answer: it is not requested again
            ctx.loop_state.turns += 1
            turn = turn_from_node(stored)
            answer = answer_step(ctx.loop, ctx.loop_state, turn.completed, turn.assistant_node_id)
            result = await self._step(ctx, answer)
        else:
            result = await self._step(ctx, model_step(ctx.loop, ctx.loop_state))
        if isinstance(result, ModelTurn):
            ctx.turn = result
            return Step("after", checkpoint(ctx), assistant_node_id=result.assistant_node_id)
        return await self._next(ctx, result)

    @activity.defn(name=AFTER)
    async def after_model_step(self, inp: StepInput) -> Step:
        """The answer's tool calls (only those without a stored result), or the end-of-turn checks."""
        ctx = await self.contexts.open(inp.run_id, inp.session_id, inp.step.checkpoint)
        turn = ctx.turn
        if turn is None or turn.assistant_node_id != inp.step.assistant_node_id:
            turn = _stored_turn(ctx, inp.step.assistant_node_id)
        ctx.turn = None
        result = await self._step(ctx, after_model_step(ctx.loop, ctx.loop_state, turn))
        return await self._next(ctx, result)

    @activity.defn(name=FINISH)
    async def finish_run(self, inp: StepInput) -> RunResult:
        """The terminal events and the runs row (once: a finished run is left as it is)."""
        storage = self.contexts.manager.services.storage
        run = await storage.get_run(inp.run_id)
        if run is not None and run.status.terminal:
            self.contexts.drop(inp.run_id)
            return RunResult(inp.run_id, run.status.value, run.end_reason.value if run.end_reason else None)
        ctx = await self.contexts.open(inp.run_id, inp.session_id, inp.step.checkpoint)
        outcome = _outcome(inp.step.outcome) if inp.step.outcome else None
        if outcome is None:  # the workflow was cancelled between two steps
            ctx.state.cancel_reason = ctx.state.cancel_reason or "cancel_requested"
            ctx.state.cancel_event.set()
            info = ctx.loop.interruption()
            outcome = LoopOutcome(info.status, EndReason.aborted_streaming, error=info.error)
        return await self._finish(ctx, outcome)

    # ---- helpers --------------------------------------------------------------------------------
    async def _next(self, ctx: RunContext, result: LoopOutcome | None) -> Step:
        if result is None:
            return Step("model", checkpoint(ctx))
        return Step("end", checkpoint(ctx), outcome=_outcome_dump(result))

    async def _finish(self, ctx: RunContext, outcome: LoopOutcome) -> RunResult:
        """The terminal events and the runs row in one transaction, as the local loop writes them."""
        loop, state = ctx.loop, ctx.state
        try:
            outcome = end_outcome(ctx.loop_state, outcome)
            prices = loop.limits.prices if loop.limits is not None else None
            await lifecycle.finish_loop(
                state.recorder, outcome, prices=prices, abort_reason=loop.interruption().reason
            )
            state.finish(outcome.status, outcome.end_reason, outcome.error)
        finally:
            self.contexts.drop(state.run_id)
        end = outcome.end_reason.value if outcome.end_reason else None
        return RunResult(ctx.state.run_id, outcome.status.value, end)

    async def _step(self, ctx: RunContext, step: Awaitable[T]) -> T | LoopOutcome:
        """Runs one loop step while heartbeating; a cancelled activity cancels the run cooperatively,
        finishes it (terminal events) and then reports the cancellation."""
        task = asyncio.ensure_future(guarded_step(ctx.loop, ctx.loop_state, step))
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.heartbeat_s)
                if done:
                    return task.result()
                activity.heartbeat()
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is None or not details.cancel_requested:
                # the worker shuts down or lost this attempt: the run is not cancelled, another attempt
                # continues it from the store; this worker forgets it
                self.contexts.drop(ctx.state.run_id)
                raise
            ctx.state.cancel_reason = ctx.state.cancel_reason or "cancel_requested"
            ctx.state.cancel_event.set()
            with contextlib.suppress(BaseException):
                result = await asyncio.shield(task)
                if not isinstance(result, LoopOutcome):
                    info = ctx.loop.interruption()
                    result = LoopOutcome(info.status, EndReason.aborted_streaming, error=info.error)
                await asyncio.shield(self._finish(ctx, result))
            raise


def _stored_turn(ctx: RunContext, node_id: str | None) -> ModelTurn:
    for node in reversed(ctx.loop.recorder.cursor.path):
        if node.node_id == node_id:
            return turn_from_node(node)
    raise LookupError(f"assistant node {node_id!r} is not on the path of run {ctx.state.run_id!r}")


def _outcome_dump(outcome: LoopOutcome) -> dict[str, Any]:
    return {
        "status": outcome.status.value,
        "end_reason": outcome.end_reason.value if outcome.end_reason else None,
        "error": outcome.error.model_dump(mode="json") if outcome.error else None,
        "final_node_id": outcome.final_node_id,
    }


def _outcome(data: dict[str, Any]) -> LoopOutcome:
    return LoopOutcome(
        RunStatus(data["status"]),
        EndReason(data["end_reason"]) if data.get("end_reason") else None,
        error=ErrorPayload.model_validate(data["error"]) if data.get("error") else None,
        final_node_id=data.get("final_node_id"),
    )
