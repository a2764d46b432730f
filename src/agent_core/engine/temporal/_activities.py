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
* Each tool call is an activity of its own. The ``after`` step stages the answer's calls on its worker
  (:meth:`ToolExecutor.stage_turn`) and names that worker's own task queue in the :class:`ToolPlan`; the
  call activities and ``tools_end`` run there, sharing the staged turn exactly as the local executor's
  tasks share it (gate order, node chain in completion order, context nodes). A cancelled call activity
  answers its call ``aborted`` and leaves the run's end to ``tools_end``. When that worker is gone the
  workflow runs the ``after`` step again elsewhere (``replan``): stored results are not executed again.
* A call executes only under its claim in the store (``_claimed_calls``); a retried step attempt starts
  only after the attempt it supersedes stopped (``_step_attempts``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_core._concurrency import TaskOwner, wait_uninterrupted
from agent_core._ids import new_id
from agent_core._loop.driver import (
    ModelTurn,
    answer_step,
    decide_after_model,
    end_outcome,
    end_tools,
    guarded_step,
    model_step,
)
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.steps import RunTools
from agent_core._runtime import lifecycle
from agent_core._runtime.runs import RunManager
from agent_core._storage.live import LiveChannel
from agent_core._storage.protocol import SessionStore
from agent_core._storage.tool_claims import CallKey, ToolCallClaims
from agent_core.engine.temporal._claimed_calls import ClaimedCalls
from agent_core.engine.temporal._contexts import (
    RunContext,
    RunContexts,
    StagedTools,
    checkpoint,
    stored_answer,
    stored_results,
    turn_from_node,
)
from agent_core.engine.temporal._payloads import (
    AFTER,
    FINISH,
    MODEL,
    TOOL_CALL,
    TOOLS_END,
    CallInput,
    CallResult,
    PlannedCall,
    RunResult,
    Step,
    StepInput,
    ToolGroup,
    ToolPlan,
    ToolsEndInput,
)
from agent_core.engine.temporal._step_attempts import StepAttempts
from agent_core.engine.temporal._worker_handoff import note_end, read_cancel
from agent_core.tools._pipeline import ToolExecutor
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.model import ToolCall
from agent_core.types.runtime import UserMessage

CLOSE_BOUND_S = 5.0
"""How long a stopping worker waits for its steps and calls after cancelling them."""
T = TypeVar("T")


class RunActivities:
    """The activities of one worker process; ``own_queue`` is the task queue only this worker polls (its
    staged tool calls run there), ``heartbeat_s`` the interval between heartbeats and
    ``arrival_timeout_s`` how long a staged call waits for the activity of the call before it (past
    Temporal's schedule-to-start timeout that one never arrives); ``live`` carries the runs' deltas to
    the runtimes that started them."""

    def __init__(
        self,
        manager: RunManager,
        *,
        own_queue: str,
        heartbeat_s: float = 1.0,
        arrival_timeout_s: float = 30.0,
        live: LiveChannel | None = None,
    ) -> None:
        self.contexts = RunContexts(manager, live)
        self.claims = ToolCallClaims(manager.services.storage)
        self.attempts = StepAttempts(self.contexts, self.claims, heartbeat_s)
        self.calls = ClaimedCalls(self.contexts, self.claims, self.attempts, heartbeat_s)
        self.tasks = TaskOwner("worker steps")
        """The loop steps and staged tool calls this worker runs: they may outlive their activity attempt
        (a lost attempt's step ends before its successor reads the store); :meth:`close` ends them."""
        self.own_queue = own_queue
        self.heartbeat_s = heartbeat_s
        self.arrival_timeout_s = arrival_timeout_s

    def all(self) -> list[Any]:
        return [
            self.model_step,
            self.after_model_step,
            self.tool_call,
            self.tools_end,
            self.finish_run,
        ]

    # ---- activities -----------------------------------------------------------------------------
    @activity.defn(name=MODEL)
    async def model_step(self, inp: StepInput) -> Step:
        """One model call (limits, request, stream, the stored answer) and what follows it in the same
        activity: the answer's tool calls staged on this worker (a ``tools`` step), or the end-of-turn
        checks and, when they end the run, its terminal events (``Step.finished``).

        With ``inp.begin`` (the run's first step) ``loop_started`` and the first nodes (hooks, the user
        message) are written first, unless a previous attempt stored them. A retried attempt continues
        from the store: a stored answer is not requested again, a finished run is not finished again."""
        return await self.attempts.run(inp, self._model_step)

    async def _model_step(self, inp: StepInput) -> Step:
        cp = inp.step.checkpoint
        if self.contexts.cached(inp.run_id) is None:
            run = await self.contexts.manager.services.storage.get_run(inp.run_id)
            if run is not None and run.status.terminal:  # a previous attempt finished the run
                end = run.end_reason.value if run.end_reason else None
                return Step("end", cp, finished=RunResult(inp.run_id, run.status.value, end))
        if inp.begin is not None:
            message = UserMessage.model_validate_json(inp.begin.message_json)
            ctx = await self.contexts.open(
                inp.run_id, inp.session_id, cp, message, session_start=inp.begin.session_start
            )
        else:
            ctx = await self.contexts.open(inp.run_id, inp.session_id, cp)
        stored = stored_answer(ctx, cp)
        if stored is not None:  # a previous attempt stored the answer: it is not requested again
            ctx.loop_state.turns += 1
            turn = turn_from_node(stored)
            answer = answer_step(ctx.loop, ctx.loop_state, turn.completed, turn.assistant_node_id)
            result = await self._step(ctx, answer)
        else:
            result = await self._step(ctx, model_step(ctx.loop, ctx.loop_state))
        if isinstance(result, ModelTurn):
            return await self._after(ctx, result, finish=True)
        return await self._next(ctx, result, finish=True)

    @activity.defn(name=AFTER)
    async def after_model_step(self, inp: StepInput) -> Step:
        """A tool turn whose worker is gone (``replan``), continued from the store: the answer's calls
        without a stored result staged on this worker (a ``tools`` step), or the end-of-turn checks."""
        return await self.attempts.run(inp, self._after_model_step)

    async def _after_model_step(self, inp: StepInput) -> Step:
        plan_id = new_id("plan_")
        if inp.step.replan:  # the worker holding the staged calls is gone: continue from the store
            await self.claims.stage(inp.run_id, inp.session_id, plan_id)  # the lost plan claims no more
            await self.calls.settle_lost(inp.run_id)
            self.contexts.drop(inp.run_id)
            if inp.step.assistant_node_id is not None:
                await self.calls.settle_claimed(inp.run_id, inp.step.assistant_node_id)
        ctx = await self.contexts.open(inp.run_id, inp.session_id, inp.step.checkpoint)
        turn = _stored_turn(ctx, inp.step.assistant_node_id)
        return await self._after(ctx, turn, plan_id=plan_id, fenced=inp.step.replan)

    @activity.defn(name=TOOL_CALL)
    async def tool_call(self, inp: CallInput) -> CallResult:
        """One staged tool call, through the whole tool pipeline (gates, handler, commit, hooks)."""
        ctx = self.contexts.cached(inp.run_id)
        tools = ctx.tools if ctx is not None else None
        if ctx is None or tools is None or tools.plan_id != inp.plan_id:
            raise ApplicationError(
                f"tool plan {inp.plan_id} is not staged on this worker", non_retryable=True
            )
        tools.arrived[inp.index].set()
        task = tools.running.get(inp.index)
        if task is None:  # else a second delivery of the call: it still runs here, not started twice
            task = self.tasks.spawn(self._run_call(ctx, tools, inp), name=f"tool call {inp.index}")
            task.add_done_callback(_retrieve)
            tools.running[inp.index] = task
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.heartbeat_s)
                if done:
                    break
                activity.heartbeat()
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and details.worker_shutdown:
                self.contexts.drop(ctx.state.run_id)  # the worker stops: another one continues the run
                raise
            if details is None or not details.cancel_requested:
                # this attempt was lost (e.g. a heartbeat timed out on a loaded machine) while the call
                # still runs here: the workflow stages the turn again, and a replan on this worker waits
                # for the call to end first (``ClaimedCalls.settle_lost``), so it is not executed twice
                raise
            await self._cancel(ctx)  # the call is answered ``aborted``; tools_end ends the run
            with contextlib.suppress(BaseException):
                await asyncio.wait({task})  # its answer is stored before this attempt reports the cancel
            raise
        return task.result()

    @activity.defn(name=TOOLS_END)
    async def tools_end(self, inp: ToolsEndInput) -> Step:
        """The end of a tool turn: skipped / aborted answers, ``aborted_tools`` or the context nodes and
        the limits' verdict; then the next step (a model call or the run's end)."""
        plan = inp.step.tools
        assert plan is not None
        run = await self.contexts.manager.services.storage.get_run(inp.run_id)
        if run is not None and run.status.terminal:  # a cancelled step already ended the run
            return Step("end", inp.step.checkpoint)
        ctx = self.contexts.cached(inp.run_id)
        tools = ctx.tools if ctx is not None else None
        if ctx is None or tools is None or tools.plan_id != plan.plan_id:  # staged elsewhere: rebuild
            ctx = ctx or await self.contexts.open(inp.run_id, inp.session_id, inp.step.checkpoint)
            turn = _stored_turn(ctx, inp.step.assistant_node_id)
            tools = self._stage(ctx, list(turn.completed.tool_calls), turn.assistant_node_id, plan.plan_id)
        ctx.tools = None
        if inp.cancelled:
            await self._cancel(ctx)
        result = await self._step(ctx, self._end_tools(ctx, tools, inp.skip_from))
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
            await self._cancel(ctx)
            info = ctx.loop.interruption()
            outcome = LoopOutcome(info.status, EndReason.aborted_streaming, error=info.error)
        return await self._finish(ctx, outcome)

    # ---- helpers --------------------------------------------------------------------------------
    async def _cancel(self, ctx: RunContext) -> None:
        await _cancel(ctx, self.contexts.manager.services.storage)

    async def _decide(
        self, ctx: RunContext, turn: ModelTurn, plan_id: str
    ) -> LoopOutcome | StagedTools | None:
        step = await decide_after_model(ctx.loop, ctx.loop_state, turn)
        if isinstance(step, RunTools):
            return self._stage(ctx, list(step.calls), turn.assistant_node_id, plan_id)
        return step

    def _stage(
        self, ctx: RunContext, calls: list[ToolCall], assistant_node_id: str, plan_id: str
    ) -> StagedTools:
        """Stages ``calls`` on this worker; those with a stored result count as answered."""
        stored = stored_results(ctx.loop.recorder.cursor.path, {c.tool_call_id for c in calls})
        loop, executor = ctx.loop, _executor(ctx)
        staged = executor.stage_turn(calls, loop.scope, loop.recorder, stored)
        events = [asyncio.Event() for _ in calls]
        ctx.tools = StagedTools(plan_id, calls, staged, events, assistant_node_id=assistant_node_id)
        return ctx.tools

    async def _end_tools(
        self, ctx: RunContext, tools: StagedTools, skip_from: int | None
    ) -> LoopOutcome | None:
        outcome = await _executor(ctx).finish_staged(tools.staged, skip_from)
        return await end_tools(ctx.loop, ctx.loop_state, tools.calls, outcome)

    async def _run_call(self, ctx: RunContext, tools: StagedTools, inp: CallInput) -> CallResult:
        call = tools.calls[inp.index]
        key = CallKey(ctx.state.run_id, ctx.state.session_id, tools.assistant_node_id, call.tool_call_id)
        claimed = False
        try:
            if not await self._after_previous(tools, inp.index):  # past Temporal's schedule-to-start timeout
                raise ApplicationError(f"tool plan {inp.plan_id} lost the call before call {inp.index}")
            claimed = await self.calls.claim(key, tools.plan_id)
            if not claimed:  # the workflow stages the turn again, from the store
                raise ApplicationError(
                    f"tool call {call.tool_call_id} of plan {inp.plan_id} is not executed here: its plan"
                    " was replaced, its result is stored or another live worker executes it"
                )
        finally:
            if not claimed:  # the next call of its group does not wait for this one's gates
                tools.staged.gates[inp.index].set()
        result = await self.calls.execute(
            key,
            lambda: _executor(ctx).run_staged_call(tools.staged, inp.index),
            lambda: tools.staged.results[inp.index] is not None,
        )
        return CallResult(is_error=result is None or result.is_error, stopped=tools.staged.stopped)

    async def _after_previous(self, tools: StagedTools, index: int) -> bool:
        """Waits until the activity of the call before ``index`` in its group reached this worker (its
        gate stages come first); ``False`` when it did not arrive in time."""
        group = next(g for g in tools.staged.groups if index in g.indices)
        position = group.indices.index(index)
        if position == 0:
            return True
        previous = group.indices[position - 1]
        if tools.staged.results[previous] is not None:
            return True
        try:
            await asyncio.wait_for(tools.arrived[previous].wait(), self.arrival_timeout_s)
        except TimeoutError:
            return False
        return True

    async def _after(
        self,
        ctx: RunContext,
        turn: ModelTurn,
        *,
        finish: bool = False,
        plan_id: str | None = None,
        fenced: bool = False,
    ) -> Step:
        """The step after the model answer ``turn``: its calls staged here as plan ``plan_id`` (made the
        run's current plan in the store unless ``fenced`` already did), or the end-of-turn checks."""
        plan_id = plan_id or new_id("plan_")
        result = await self._step(ctx, self._decide(ctx, turn, plan_id))
        if isinstance(result, StagedTools):
            if not fenced:  # from now on only this plan's calls claim anything
                await self.claims.stage(ctx.state.run_id, ctx.state.session_id, plan_id)
            plan = ToolPlan(result.plan_id, self.own_queue, _groups(result))
            return Step("tools", checkpoint(ctx), assistant_node_id=turn.assistant_node_id, tools=plan)
        return await self._next(ctx, result, finish=finish)

    async def _next(self, ctx: RunContext, result: LoopOutcome | None, *, finish: bool = False) -> Step:
        """The next step; with ``finish`` the run's end is written here (no ``finish`` step follows)."""
        if result is None:
            return Step("model", checkpoint(ctx))
        cp = checkpoint(ctx)
        if not finish:
            return Step("end", cp, outcome=_outcome_dump(result))
        # the terminal events are written whole before this attempt ends, also when it is cancelled
        finished = await wait_uninterrupted(self._finish(ctx, result), self.tasks)
        return Step("end", cp, outcome=_outcome_dump(result), finished=finished)

    async def _finish(self, ctx: RunContext, outcome: LoopOutcome) -> RunResult:
        """The terminal events and the runs row in one transaction, as the local loop writes them."""
        loop, state = ctx.loop, ctx.state
        try:
            outcome = end_outcome(ctx.loop_state, outcome)
            await note_end(self.contexts.manager.services.storage, state)  # a worker run's budget
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
        task = self.tasks.spawn(guarded_step(ctx.loop, ctx.loop_state, step), name=f"step {ctx.state.run_id}")
        attempt = self.attempts.track(task)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self.heartbeat_s)
                if done:
                    return task.result()
                self.attempts.beat()
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is None or not details.cancel_requested:
                # the worker shuts down or lost this attempt: the run is not cancelled, another attempt
                # continues it from the store; this one stops (it writes nothing more once it recorded
                # that it stopped: its successor waits for that) and this worker forgets the run
                task.cancel()  # stop() waits until it ended
                with contextlib.suppress(BaseException):
                    stop = self.attempts.stop(task, attempt, ctx.state.run_id, ctx.state.session_id)
                    await wait_uninterrupted(stop, self.tasks)
                self.contexts.drop(ctx.state.run_id)
                raise
            await self._cancel(ctx)
            with contextlib.suppress(BaseException):  # the step ends cooperatively, then the run ends whole
                result = await wait_uninterrupted(task)
                await wait_uninterrupted(self._finish_cancelled(ctx, result), self.tasks)
            raise

    async def close(self) -> None:
        """Worker shutdown, after its activities stopped: what still runs here is cancelled and awaited
        (bounded); the runs continue on another worker from what the store holds."""
        await self.tasks.aclose(bound=CLOSE_BOUND_S)
        await self.contexts.tasks.aclose(grace=CLOSE_BOUND_S, bound=CLOSE_BOUND_S)

    async def _finish_cancelled(self, ctx: RunContext, result: object) -> None:
        """Ends a run whose step was cancelled, as the local loop ends it."""
        if isinstance(result, StagedTools):  # staged calls, none ran: all are answered aborted
            ctx.tools = None
            result = await self._end_tools(ctx, result, None)
        if not isinstance(result, LoopOutcome):
            info = ctx.loop.interruption()
            result = LoopOutcome(info.status, EndReason.aborted_streaming, error=info.error)
        await self._finish(ctx, result)


def _executor(ctx: RunContext) -> ToolExecutor:
    executor = ctx.loop.executor
    if not isinstance(executor, ToolExecutor):
        raise TypeError(
            f"the temporal engine stages tool calls on a ToolExecutor, not {type(executor).__name__}"
        )
    return executor


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Marks the outcome of a call's task as seen (its attempt may have been lost before it ended)."""
    if not task.cancelled():
        task.exception()


async def _cancel(ctx: RunContext, storage: SessionStore) -> None:
    """The run is cancelled (workflow cancellation): its loop and tool calls stop cooperatively; a
    dispatched worker run first reads why (its dispatch may have timed out)."""
    with contextlib.suppress(Exception):
        await read_cancel(storage, ctx.state)
    ctx.state.cancel_reason = ctx.state.cancel_reason or "cancel_requested"
    ctx.state.cancel_event.set()


def _groups(tools: StagedTools) -> list[ToolGroup]:
    results = tools.staged.results
    return [
        ToolGroup(
            group.kind,
            [
                PlannedCall(
                    i,
                    tools.calls[i].tool_call_id,
                    done=results[i] is not None,
                    is_error=bool(results[i] is not None and results[i].is_error),  # type: ignore[union-attr]
                )
                for i in group.indices
            ],
        )
        for group in tools.staged.groups
    ]


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
