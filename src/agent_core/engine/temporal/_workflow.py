"""The run workflow: the deterministic turn sequence of one root run (surfaces.md §3).

Begin → (model step → after step)* → finish. Each step is an activity that reads the run's context from
the shared store and writes its nodes and events there; the workflow only passes ids and a small
checkpoint, so its history stays small however long the conversation is. Cancelling the workflow cancels
the step in flight (the run ends ``cancelled`` with the local loop's events); when no step is in flight,
the finish step writes the cancellation.

A permission request of a tool step is a signal (``permission_requested``, keyed by the tool call, so a
retried step does not ask twice); the runtime that started the run asks its permission callback and
signals the answer (``permission_answered``), which the waiting step reads with a query.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agent_core.engine.temporal._payloads import (
        AFTER,
        BEGIN,
        FINISH,
        MODEL,
        PENDING_PERMISSIONS,
        PERMISSION_ANSWER,
        PERMISSION_ANSWERED,
        PERMISSION_REQUESTED,
        WORKFLOW_NAME,
        PermissionSignal,
        RunInput,
        RunResult,
        Step,
        StepInput,
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
R = TypeVar("R")

with workflow.unsafe.imports_passed_through():
    from agent_core.engine.temporal._worker_workflow import WorkerDispatches


@workflow.defn(name=WORKFLOW_NAME)
class RunWorkflow(WorkerDispatches):  # a dispatched worker run is a child workflow
    def __init__(self) -> None:
        self._heartbeat = timedelta(seconds=10)
        self._requests: dict[str, str] = {}
        self._answers: dict[str, str] = {}

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
            step = await self._activity(BEGIN, inp, Step)
            while step.kind != "end":
                name = MODEL if step.kind == "model" else AFTER
                step = await self._activity(name, StepInput(inp.run_id, inp.session_id, step), Step)
        except asyncio.CancelledError:
            if step is not None:  # no step in flight wrote the cancellation: the finish step does
                end = Step("end", step.checkpoint, outcome=None)
                await self._activity(FINISH, StepInput(inp.run_id, inp.session_id, end), RunResult)
            raise
        return await self._activity(FINISH, StepInput(inp.run_id, inp.session_id, step), RunResult)

    async def _activity(self, name: str, arg: object, result_type: type[R]) -> R:
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
