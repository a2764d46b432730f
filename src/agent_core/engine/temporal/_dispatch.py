"""The dispatching side of a worker run under the temporal engine (docs/scale-out.md).

On a worker process, :class:`TemporalWorkerRuns` is the launcher's
:class:`~agent_core._agents.spec.RemoteChildRuns` for dispatched worker runs: the Orchestrator's tool
step admits the run, writes its rows and emits the dispatch events as the local engine does
(:mod:`agent_core._orchestrator.dispatch`); then, instead of running the worker's loop in this process,
it asks its own run workflow to start the worker run as a child workflow on the pool's task queue
(:mod:`._worker_workflow`), follows the run's row in the shared store until it is terminal, and ends the
run state with the stored outcome — the dispatch result, the worker-run-end fallback and the Task WAL
records then follow exactly as locally. A cancel request of the run (parent cancelled, Task-level cancel,
dispatch timeout) cancels the child workflow, after noting why in the run's row (a timed-out run ends
``aborted`` with error code ``timeout``, as locally). A child workflow that closes without ending its run
(terminated, failed or timed out at the Temporal level) ends it here ``failed``, as a local worker run that
crashed: a run never stays without a terminal status. The worker run's ``[limits]`` budget starts from the
Orchestrator tree's consumption at dispatch and what it consumed is charged back to the Orchestrator's
budget when it ended (:mod:`._worker_handoff`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import TYPE_CHECKING

from agent_core._agents.children import _interruption as child_interruption
from agent_core._agents.spec import ChildSpec
from agent_core._loop._limits import usage_of_record
from agent_core._loop.outcome import LoopOutcome
from agent_core._runtime import lifecycle
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core.engine.temporal._payloads import RunInput
from agent_core.engine.temporal._queues import pool_task_queue
from agent_core.engine.temporal._worker_handoff import charge_back, note_cancel, note_dispatch
from agent_core.engine.temporal._worker_workflow import DISPATCH_WORKER, DispatchRequest
from agent_core.errors import AgentCoreError, ErrorCode, InternalError
from agent_core.types.content import ErrorPayload, text_of
from agent_core.types.enums import AgentRole, MessageRole, RunStatus
from agent_core.types.runtime import UserMessage
from agent_core.types.storage import RunRecord

if TYPE_CHECKING:
    from temporalio.client import Client

log = logging.getLogger("agent_core.engine.temporal")
POLL_S = 0.1
"""How often the worker run's row is read."""
CLOSED_EVERY = 20
"""Every how many reads of the worker run's row its child workflow is asked whether it closed. One that
closed without ending its run ends it here: cancelled before its first step began, as a local child run
cancelled before its loop; failed, terminated or timed out (at the Temporal level), ``failed`` with
``internal_error``, as a local worker run that crashed outside its loop (its claimed step then fails or is
retried by the worker-run-end fallback, as locally)."""


def run_workflow_id(run_id: str) -> str:
    """The workflow id of a run (the root run's and a worker run's alike)."""
    return f"soong-run-{run_id}"


class TemporalWorkerRuns:
    """Dispatched worker runs execute as child workflows on their pool's task queue."""

    def __init__(self, manager: RunManager, client: Client) -> None:
        self.manager = manager
        self.client = client

    def handles(self, spec: ChildSpec) -> bool:
        return spec.role == AgentRole.worker and "worker_pool_id" in spec.run_metadata

    def run_id(self, parent_run_id: str, tool_call_id: str) -> str:
        """``run_<the parent's stamp>_<12 hex of the parent run and the tool call>``: a tool step retried
        on another worker finds the worker run (and its child workflow) its first attempt started."""
        digest = hashlib.sha256(f"{parent_run_id}\0{tool_call_id}".encode()).hexdigest()[:12]
        parts = parent_run_id.split("_")
        stamp = "_".join(parts[1:3]) if len(parts) == 4 else "dispatch"
        return f"run_{stamp}_{digest}"

    async def execute(self, state: RunState, parent: RunState, spec: ChildSpec) -> None:
        services = self.manager.services
        storage = services.storage
        settings = services.settings
        if not spec.attach:  # the worker's worktree (agents.worker_isolation = "worktree"), the budget
            workdir = {"workdir": str(spec.workdir)} if spec.workdir is not None else {}
            await note_dispatch(storage, state, parent, **workdir)
        message = UserMessage(content=spec.first_text)
        run = RunInput(
            state.run_id,
            state.session_id,
            message.model_dump_json(),
            heartbeat_timeout_ms=settings.engine.temporal.heartbeat_timeout_ms,
        )
        child_id = run_workflow_id(state.run_id)
        queue = pool_task_queue(settings, str(spec.run_metadata["worker_pool_id"]))
        client = self.client
        parent_workflow = client.get_workflow_handle(run_workflow_id(parent.run_id))
        await parent_workflow.signal(DISPATCH_WORKER, DispatchRequest(child_id, queue, run))
        state.status = RunStatus.running
        cancelled = noted = False
        polls = 0
        while True:
            row = await storage.get_run(state.run_id)
            if row is not None and row.status.terminal:
                break
            if state.cancel_event.is_set() and not cancelled:
                if not noted:  # the worker run reads why when the cancellation reaches it
                    await note_cancel(storage, state)
                    noted = True
                cancelled = await _cancel(client, child_id)
            polls += 1
            closed = await _closed(client, child_id) if polls % CLOSED_EVERY == 0 else None
            if closed is not None:
                row = await storage.get_run(state.run_id)
                if row is None or not row.status.terminal:
                    if closed == "CANCELED":  # cancelled before its first step began
                        await lifecycle.cancel_before_loop(state, child_interruption(state))
                        return
                    raise _ended_unfinished(child_id, closed)  # the launcher ends the run failed
                break
            await asyncio.sleep(POLL_S)
        assert row is not None
        charge_back(row, parent)
        state.outcome = await self._outcome(row)
        error = ErrorPayload.model_validate_json(row.error_json) if row.error_json else None
        state.finish(row.status, row.end_reason, error)

    async def _outcome(self, row: RunRecord) -> LoopOutcome:
        """The worker run's outcome as stored (its last complete answer is the final text)."""
        nodes = await self.manager.services.storage.list_nodes(row.session_id, run_id=row.run_id)
        answers = [n for n in nodes if n.role == MessageRole.assistant and not n.metadata.get("partial")]
        usage = json.loads(row.usage_json) if row.usage_json else {}
        return LoopOutcome(
            row.status,
            row.end_reason,
            final_node_id=answers[-1].node_id if answers else None,
            turn_count=row.turn_count or 0,
            usage=usage_of_record(usage),
            final_text=text_of(answers[-1].content) if answers else "",
        )


async def _closed(client: Client, workflow_id: str) -> str | None:
    """How the child workflow closed (``CANCELED``, ``FAILED``, ``TERMINATED``, ``TIMED_OUT``, …);
    ``None`` while it runs or does not exist yet."""
    from temporalio.client import WorkflowExecutionStatus
    from temporalio.service import RPCError

    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as exc:
        log.debug("cannot describe %s: %s", workflow_id, exc)
        return None
    if described.status in (None, WorkflowExecutionStatus.RUNNING):
        return None
    return described.status.name


def _ended_unfinished(workflow_id: str, status: str) -> AgentCoreError:
    """A child workflow that closed (failed, terminated, timed out) without ending its run: the run ends
    ``failed`` with ``internal_error``, as a local worker run whose task crashed outside its loop."""
    return InternalError(
        ErrorCode.internal_error,
        f"the worker run's workflow {workflow_id} ended {status} before the run ended",
        details={"workflow_id": workflow_id, "workflow_status": status},
    )


async def _cancel(client: Client, workflow_id: str) -> bool:
    """Requests the child workflow's cancellation; ``False`` while it does not exist yet."""
    from temporalio.service import RPCError

    try:
        await client.get_workflow_handle(workflow_id).cancel()
    except RPCError as exc:
        log.debug("cannot cancel %s yet: %s", workflow_id, exc)
        return False
    return True


def install_dispatch(manager: RunManager, client: Client) -> None:
    """Dispatched worker runs of this worker's Orchestrator runs become child workflows."""
    from agent_core._agents.feature import Agents

    agents = manager.features.children
    if isinstance(agents, Agents):
        agents.launcher.remote = TemporalWorkerRuns(manager, client)
