"""The run workflow: the deterministic turn sequence of one root run (docs/scale-out.md).

(model step [→ one activity per tool call → tools end])* → finish. Each step is an activity that reads
the run's context from the shared store and writes its nodes and events there; the workflow only passes
ids and a small checkpoint, so its history stays small however long the conversation is. The first model
step also begins the run (``loop_started``, the first nodes), and a model step continues with what
follows the answer (the checks that end the turn, or staging its tool calls); the model step that ends
the run writes its end too (``Step.finished``), else a ``finish`` step does. Fewer steps mean fewer
workflow tasks and activities per turn, the engine's main CPU cost.

Tool calls: the model step stages the answer's calls on its worker and returns their groups
(docs/tools.md#scheduling: a ``parallel`` or ``agent`` group's calls run concurrently, a ``serial`` call
alone, groups one after another; a failed ``serial`` call skips the rest). Each call is an activity on that
worker's own task queue, then ``tools_end`` there ends the turn. If that worker dies, its activities fail
(heartbeat or schedule-to-start timeout) and the ``after`` step runs again on any worker (``replan``),
which stages only the calls without a stored result.

Cancelling the workflow cancels the steps in flight (the run ends ``cancelled`` with the local loop's
events: in a tool turn every unfinished call is answered ``aborted`` and ``tools_end`` writes
``aborted_tools``); when no step is in flight, the finish step writes the cancellation.

A permission request of a tool step is a signal (``permission_requested``, keyed by the tool call, so a
retried step does not ask twice); the runtime that started the run asks its permission callback and
signals the answer (``permission_answered``), which the waiting step reads with a query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, is_cancelled_exception
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agent_core._concurrency import TaskOwner, cancel_and_wait
    from agent_core.engine.temporal._payloads import (
        AFTER,
        FINISH,
        MODEL,
        PENDING_PERMISSIONS,
        PERMISSION_ANSWER,
        PERMISSION_ANSWERED,
        PERMISSION_REQUESTED,
        TOOL_CALL,
        TOOLS_END,
        WORKFLOW_NAME,
        CallInput,
        CallResult,
        Checkpoint,
        PermissionSignal,
        PlannedCall,
        RunInput,
        RunResult,
        Step,
        StepInput,
        ToolPlan,
        ToolsEndInput,
        own_queue_timeout,
    )

STEP_RETRIES = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=20,
)
"""Retries of a step that did not finish (worker lost, store unavailable); provider errors are retried by
the provider adapter inside the step and come back as the step's result."""
STEP_TIMEOUT = timedelta(hours=6)
ON_ITS_WORKER = RetryPolicy(maximum_attempts=1)
"""A step on one worker's own queue is not retried there: when it fails the workflow continues on another
worker (``replan``)."""
TOOL_TURN_ATTEMPTS = 20
"""How often a tool turn is staged again after its worker was lost (as ``STEP_RETRIES`` for a step)."""
R = TypeVar("R")

with workflow.unsafe.imports_passed_through():
    from agent_core.engine.temporal._worker_workflow import WorkerDispatches


@workflow.defn(name=WORKFLOW_NAME)
class RunWorkflow(WorkerDispatches):  # a dispatched worker run is a child workflow
    def __init__(self) -> None:
        self._heartbeat = timedelta(seconds=10)
        self._requests: dict[str, str] = {}
        self._answers: dict[str, str] = {}
        self._tools: Step | None = None
        """The ``tools`` step while its calls run (a cancellation ends them with ``tools_end``)."""

    # ---- permission requests: a tool step signals the request, the starting runtime the answer ----
    @workflow.signal(name=PERMISSION_REQUESTED)
    def permission_requested(self, signal: PermissionSignal) -> None:
        self._requests.setdefault(signal.request_id, signal.body_json)

    @workflow.signal(name=PERMISSION_ANSWERED)
    def permission_answered(self, signal: PermissionSignal) -> None:
        self._answers.setdefault(signal.request_id, signal.body_json)  # the first answer wins

    @workflow.query(name=PENDING_PERMISSIONS)
    def pending_permissions(self) -> list[PermissionSignal]:
        return [PermissionSignal(k, v) for k, v in self._requests.items() if k not in self._answers]

    @workflow.query(name=PERMISSION_ANSWER)
    def permission_answer(self, request_id: str) -> str | None:
        return self._answers.get(request_id)

    @workflow.run
    async def run(self, inp: RunInput) -> RunResult:
        self._heartbeat = timedelta(milliseconds=inp.heartbeat_timeout_ms)
        step: Step | None = None
        try:
            first = StepInput(inp.run_id, inp.session_id, Step("model", Checkpoint()), begin=inp)
            step = await self._activity(MODEL, first, Step)
            while step.kind != "end":
                _raise_if_cancelled()  # a step that completed although the workflow was cancelled
                if step.kind == "tools":
                    step = await self._tool_turn(inp, step)
                else:
                    name = MODEL if step.kind == "model" else AFTER
                    step = await self._activity(name, StepInput(inp.run_id, inp.session_id, step), Step)
        except BaseException as exc:
            if isinstance(exc, GeneratorExit) or not workflow.in_workflow():
                raise  # the coroutine is being torn down (eviction, GC): nothing may run here
            if not is_cancelled_exception(exc) and workflow.cancellation_reason() is None:
                raise
            end = Step("end", step.checkpoint) if step is not None else None
            if self._tools is not None:  # every unfinished call is answered aborted
                after = await self._tools_end(
                    inp, ToolsEndInput(inp.run_id, inp.session_id, self._tools, cancelled=True)
                )
                end = after if after.kind == "end" else Step("end", after.checkpoint)
            if end is not None:  # a step that ended the run already left FINISH nothing to do
                await self._activity(FINISH, StepInput(inp.run_id, inp.session_id, end), RunResult)
            raise
        if step.finished is not None:  # the step that ended the run wrote its end
            return step.finished
        return await self._activity(FINISH, StepInput(inp.run_id, inp.session_id, step), RunResult)

    # ---- a tool turn: one activity per call on the worker that staged them -------------------------
    async def _tool_turn(self, inp: RunInput, step: Step) -> Step:
        after = Step("after", step.checkpoint, assistant_node_id=step.assistant_node_id)
        for attempt in range(1, TOOL_TURN_ATTEMPTS + 1):
            plan = step.tools
            assert plan is not None
            self._tools = step
            try:
                skip_from = await self._run_groups(inp, plan)
                _raise_if_cancelled()
                end = ToolsEndInput(inp.run_id, inp.session_id, step, skip_from=skip_from)
                result = await self._activity(TOOLS_END, end, Step, own_queue=plan.task_queue)
                self._tools = None
                return result
            except ActivityError as exc:
                if is_cancelled_exception(exc) or attempt == TOOL_TURN_ATTEMPTS:
                    raise
                workflow.logger.warning("tool turn of run %s lost its worker: %s", inp.run_id, exc)
            # the worker holding the staged calls is gone: stage what is left on another worker
            self._tools = None
            replan = Step("after", after.checkpoint, assistant_node_id=after.assistant_node_id, replan=True)
            step = await self._activity(AFTER, StepInput(inp.run_id, inp.session_id, replan), Step)
            if step.kind != "tools":
                return step
        raise AssertionError("unreachable")

    async def _run_groups(self, inp: RunInput, plan: ToolPlan) -> int | None:
        """Runs the groups in order; the index from which the remaining calls are skipped (a ``serial``
        call failed), else ``None``."""
        for group in plan.groups:
            todo = [c for c in group.calls if not c.done]
            results = await self._calls(inp, plan, todo)
            if any(r.stopped for r in results):
                return None
            if group.kind == "serial":
                first = group.calls[0]
                failed = results[0].is_error if todo else first.is_error
                if failed:
                    return first.index + 1
        return None

    async def _calls(self, inp: RunInput, plan: ToolPlan, calls: list[PlannedCall]) -> list[CallResult]:
        """One activity per call, concurrently; waits until every one settled (also when cancelled:
        each cancelled call is answered ``aborted`` by its activity)."""
        calls_owner = TaskOwner("call activities")  # every call's activity is awaited or cancelled here
        tasks = [
            calls_owner.spawn(
                self._activity(
                    TOOL_CALL,
                    CallInput(inp.run_id, plan.plan_id, c.index),
                    CallResult,
                    own_queue=plan.task_queue,
                )
            )
            for c in calls
        ]
        if not tasks:
            return []
        try:
            await asyncio.wait(tasks)
        except asyncio.CancelledError:
            await cancel_and_wait(*tasks)
            _errors(tasks)
            raise
        errors = _errors(tasks)
        if errors:
            raise errors[0]
        return [task.result() for task in tasks]

    async def _tools_end(self, inp: RunInput, end: ToolsEndInput) -> Step:
        """``tools_end`` on the staging worker, else (it is gone) on any worker (rebuilt from the store)."""
        plan = end.step.tools
        assert plan is not None
        try:
            return await self._activity(TOOLS_END, end, Step, own_queue=plan.task_queue)
        except ActivityError as exc:
            workflow.logger.warning("tools_end of run %s on its worker failed: %s", inp.run_id, exc)
        return await self._activity(TOOLS_END, end, Step)

    async def _activity(
        self, name: str, arg: object, result_type: type[R], own_queue: str | None = None
    ) -> R:
        """One step; on the workflow's task queue (retried there), or on one worker's ``own_queue``."""
        if own_queue is None:
            result: R = await workflow.execute_activity(
                name,
                arg,
                result_type=result_type,
                start_to_close_timeout=STEP_TIMEOUT,
                heartbeat_timeout=self._heartbeat,
                retry_policy=STEP_RETRIES,
                cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
            )
            return result
        heartbeat_ms = int(self._heartbeat.total_seconds() * 1000)
        result = await workflow.execute_activity(
            name,
            arg,
            result_type=result_type,
            task_queue=own_queue,
            schedule_to_start_timeout=own_queue_timeout(heartbeat_ms),
            start_to_close_timeout=STEP_TIMEOUT,
            heartbeat_timeout=self._heartbeat,
            retry_policy=ON_ITS_WORKER,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        return result


def _errors(tasks: Sequence[asyncio.Future[CallResult]]) -> list[BaseException]:
    """The failures of settled call activities (each one retrieved), cancellations first."""
    cancelled: list[BaseException] = []
    failed: list[BaseException] = []
    for task in tasks:
        if task.cancelled():
            cancelled.append(asyncio.CancelledError())
        elif (error := task.exception()) is not None:
            (cancelled if is_cancelled_exception(error) else failed).append(error)
    return cancelled + failed


def _raise_if_cancelled() -> None:
    """A step may complete although the workflow was cancelled meanwhile (its result arrived first):
    the run still ends cancelled."""
    if workflow.cancellation_reason() is not None:
        raise asyncio.CancelledError()
