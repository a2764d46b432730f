"""Dispatched worker runs as child workflows of the orchestrator run's workflow (docs/scale-out.md).

A tool step of an Orchestrator run that dispatches a worker (``agent.dispatch_worker``) admits the worker
run and writes its rows as the local engine does, then signals its own workflow
(:data:`DISPATCH_WORKER`); the workflow starts the worker run as a child workflow — the run workflow with
the worker run's input — on the worker pool's task queue. The request is keyed by the child's workflow
id, so a retried tool step that signals again starts nothing new. The tool step follows the child's run
in the shared store and cancels the child workflow when the dispatch is cancelled; the child's parent
close policy is *abandon*, as a local worker run abandoned after a cancel timeout keeps running.

This module is imported by the workflow sandbox: it imports nothing from ``agent_core`` but payloads.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio import workflow
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from agent_core.engine.temporal._payloads import WORKFLOW_NAME, RunInput, RunResult

DISPATCH_WORKER = "dispatch_worker"


@dataclass(slots=True)
class DispatchRequest:
    """Start the worker run ``run`` as the child workflow ``workflow_id`` on ``task_queue``."""

    workflow_id: str
    task_queue: str
    run: RunInput


class WorkerDispatches:
    """The run workflow's side of worker dispatch (mixed into ``RunWorkflow``)."""

    @workflow.signal(name=DISPATCH_WORKER)
    async def dispatch_worker(self, request: DispatchRequest) -> None:
        started: set[str] = self.__dict__.setdefault("_dispatched", set())
        if request.workflow_id in started:
            return
        started.add(request.workflow_id)
        try:
            await workflow.execute_child_workflow(
                WORKFLOW_NAME,
                request.run,
                id=request.workflow_id,
                task_queue=request.task_queue,
                result_type=RunResult,
                parent_close_policy=ParentClosePolicy.ABANDON,
            )
        except Exception as exc:  # the child's run row is the outcome the dispatching step reads
            workflow.logger.warning("worker run %s ended with %s", request.run.run_id, exc)
