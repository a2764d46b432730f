"""Autonomous workers (docs/multi-agent.md#autonomous-workers, ``[[agents.worker_pools]] autonomous = true``).

Contract:

- An idle worker of an autonomous pool looks at the session's active Task board for a ``ready`` step in
  its pool's scope (the step's ``worker_pool_id``, or the Task's default pool) that no worker holds or is
  about to take, and starts a worker run scoped to that one step (``allowed_step_ids = [step]``). The run
  claims the step itself with ``agent.task_claim_step`` under the same claim rules and lease as a
  dispatched run; the run-end fallback is the dispatch one. No ``agent.dispatch_worker`` call is made:
  the run is started through the dispatch machinery with ``selection_reason = "autonomous"``.
- The board is scanned after every successful Task tool call of the session and whenever an autonomous
  run ends, until nothing ready is left for an idle worker. Runs are children of the session's live
  Orchestrator run (the last one that used a Task tool); with no live Orchestrator run nothing starts
  (the next Orchestrator Task call scans again). Cancelling that run cancels them.
- Selection never awaits, so two scans never give one step to two workers.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import replace
from typing import Any

from agent_core._concurrency import TaskOwner
from agent_core._orchestrator.dispatch import WorkerDispatcher
from agent_core._orchestrator.pools import PoolWorker
from agent_core.errors import AgentCoreError
from agent_core.tools.context import ToolContext
from agent_core.types.enums import AgentRole, StepStatus
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolResult

log = logging.getLogger("agent_core._orchestrator")


class AutonomousWorkers:
    """Starts runs of idle autonomous workers on ready steps (one instance per runtime)."""

    def __init__(self, dispatcher: WorkerDispatcher) -> None:
        self.dispatcher = dispatcher
        self._hosts: dict[str, ToolContext] = {}
        self._taken_steps: set[tuple[str, str, str]] = set()
        self._busy_workers: set[tuple[str, str, str]] = set()
        self._tasks = TaskOwner("autonomous workers")

    def enabled(self) -> bool:
        settings = self.dispatcher.manager.services.settings
        return any(pool.autonomous for pool in settings.agents.worker_pools)

    def _autonomous_pools(self) -> list[str]:
        settings = self.dispatcher.manager.services.settings
        wanted = {pool.pool_id for pool in settings.agents.worker_pools if pool.autonomous}
        return [p for p in self.dispatcher.pools.valid_ids() if p in wanted]

    async def after_task_call(self, ctx: ToolContext) -> None:
        """Task tool hook: remembers the Orchestrator run as the host and scans the board."""
        if ctx.agent_role == AgentRole.orchestrator.value:
            self._hosts[ctx.session_id] = ctx
        self.scan(ctx.session_id)

    def scan(self, session_id: str) -> int:
        """Starts a run for every (idle autonomous worker, ready step) pair found; returns how many."""
        host = self._hosts.get(session_id)
        manager = self.dispatcher.manager
        if host is None or manager.closing:
            return 0
        parent = manager.runs.get(host.run_id)
        if parent is None or parent.terminal or parent.cancel_event.is_set():
            return 0
        service = self.dispatcher.tasks.peek(session_id)
        if service is None:
            return 0
        started = 0
        default_pool = service.default_pool_id()
        for pool_id in self._autonomous_pools():
            idle = [w for w in self.dispatcher.pools.workers(pool_id) if self._idle(session_id, w)]
            if not idle:
                continue
            for dag in service.active_dags():
                for step in dag.steps():
                    if not idle:
                        break
                    key = (session_id, dag.task_id, step.step_id)
                    if step.status != StepStatus.ready or key in self._taken_steps:
                        continue
                    if (step.worker_pool_id or default_pool) != pool_id:
                        continue
                    worker = idle.pop(0)
                    self._start(host, worker, dag.task_id, step.step_id)
                    started += 1
        return started

    def _idle(self, session_id: str, worker: PoolWorker) -> bool:
        if (session_id, worker.pool_id, worker.worker_id) in self._busy_workers:
            return False
        return self.dispatcher.slots.get(session_id, worker).status() == "idle"

    def _start(self, host: ToolContext, worker: PoolWorker, task_id: str, step_id: str) -> None:
        step_key = (host.session_id, task_id, step_id)
        worker_key = (host.session_id, worker.pool_id, worker.worker_id)
        self._taken_steps.add(step_key)
        self._busy_workers.add(worker_key)

        async def work() -> None:
            try:
                await self._run(host, worker, task_id, step_id)
            finally:
                self._taken_steps.discard(step_key)
                self._busy_workers.discard(worker_key)
            self.scan(host.session_id)  # idle again: the next ready step, if any

        self._tasks.spawn(work(), name=f"autonomous {worker.worker_id} on {task_id}/{step_id}")

    async def _run(
        self, host: ToolContext, worker: PoolWorker, task_id: str, step_id: str
    ) -> ToolResult | None:
        call = ToolCall(
            tool_call_id=f"autonomous_{secrets.token_hex(6)}",
            name="agent.dispatch_worker",
            arguments={
                "task_id": task_id,
                "worker_pool_id": worker.pool_id,
                "worker_agent_id": worker.worker_id,
                "allowed_step_ids": [step_id],
                "instruction": f"You are an autonomous worker. Claim step {step_id} of Task {task_id} "
                "with agent.task_claim_step, carry it out and record its result with agent.task_update_step.",
            },
            metadata={"autonomous": True},
        )
        ctx = replace(host, tool_call_id=call.tool_call_id, tool_name=call.name)
        try:
            return await self.dispatcher.dispatch(call, ctx, selection_reason="autonomous")
        except AgentCoreError as exc:  # already reported as worker_dispatch_failed on the host run
            log.info(
                "autonomous worker %s could not start on %s/%s: %s", worker.worker_id, task_id, step_id, exc
            )
            return None

    async def close(self) -> None:
        """Waits (bounded) for the bookkeeping of runs that are ending; the runs belong to the manager."""
        await self._tasks.aclose(grace=2.0)


class AutonomousTaskTools:
    """Wraps the Task tool adapter: after each successful call the board is scanned for idle autonomous
    workers (only installed when a pool is autonomous)."""

    def __init__(self, inner: Any, workers: AutonomousWorkers) -> None:
        self._inner = inner
        self._workers = workers

    def definitions(self) -> Any:
        return self._inner.definitions()

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        result = await self._inner.execute(call, ctx)
        await self._workers.after_task_call(ctx)
        return result

    async def close(self) -> None:
        await self._workers.close()
        await self._inner.close()
