"""Autonomous teammates (S17, docs/teams.md): claiming ready Task steps without an Orchestrator run.

Contracts:

- A resident teammate spawned with ``autonomous = true`` by an Orchestrator lead has a scope: the steps of
  one worker pool (``worker_pool_id``, default: the default pool) on its lead session's Task boards.
- :meth:`TeamAutonomy.scan` runs when such a teammate goes idle (its run ended), when the lead session's
  Task board changed (any ``agent.task_*`` call on it) and when the teammate is spawned. For each idle
  autonomous teammate (no run here, nothing unread in its inbox: an inbox entry wakes it first), it takes
  the first ``ready`` step in scope and claims it for a new run of the teammate with the board's own claim
  rules and lease (``TaskService.claim_step`` as a worker run scoped to that one step; a step another
  agent claimed first is skipped), then starts that run: its first node names the step, it gets
  ``agent.task_get`` / ``agent.task_query_steps`` / ``agent.task_update_step`` on that Task, and when it
  ends the dispatch's worker-run-end fallback applies (a step it left unfinished fails). No Orchestrator
  run has to be live, and none is started.
- Scans of one lead session run one at a time; every task this module starts is owned by it and awaited
  (bounded) or cancelled at close.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import TaskOwner
from agent_core._ids import new_id
from agent_core._notes import escape_note_text
from agent_core._runtime.state import RootRunOptions, RunState, SessionState
from agent_core._tasks.inputs import TaskClaimStepInput
from agent_core._tasks.scope import TaskCaller, WorkerTaskScope
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError
from agent_core.types.enums import AgentRole, RunMode, RunStatus, StepStatus

if TYPE_CHECKING:
    from agent_core._agents.team_store import TeammateRecord, TeamStore
    from agent_core._orchestrator.feature import TaskFeature
    from agent_core._runtime.runs import RunManager
    from agent_core._tasks.service import TaskService

log = logging.getLogger("agent_core._agents")
STEP_TOOLS = frozenset({"agent.task_get", "agent.task_query_steps", "agent.task_update_step"})
TRIGGER = "autonomous_claim"
CLOSE_WAIT_S = 2.0


def claim_note(task_id: str, step: Any, pool: str) -> str:
    title = escape_note_text(str(step.title))
    summary = escape_note_text(str(step.summary))
    return "\n".join(
        [
            f'<auto_claimed task_id="{task_id}" step_id="{step.step_id}" worker_pool_id="{pool}">',
            f"You were idle and claimed step {step.step_id} of Task {task_id} on your lead's Task board.",
            f"Title: {title}",
            f"What to do: {summary}",
            f'Carry it out, then record the outcome with agent.task_update_step(task_id="{task_id}", '
            f'step_id="{step.step_id}", status="completed" or "failed", result_summary=...).',
            "</auto_claimed>",
        ]
    )


class TeamAutonomy:
    """Claims ready steps for idle autonomous teammates (one instance per runtime)."""

    def __init__(self, manager: RunManager, store: TeamStore, tasks: TaskFeature) -> None:
        self.manager = manager
        self.store = store
        self.tasks = tasks
        self._claiming: set[str] = set()
        """Teammate sessions with a claim in progress (between the claim and its run's registration)."""
        self._locks: dict[str, asyncio.Lock] = {}
        self._scans = TaskOwner("autonomous scans")
        tasks.board_listeners.append(self.board_changed)

    async def check_scope(
        self, lead: SessionState, autonomous: bool, resident: bool, pool_id: Any
    ) -> str | None:
        """The worker pool an autonomous teammate claims from (``validation_error`` when it cannot be
        one); ``None`` for a teammate that is not autonomous."""
        if not autonomous:
            if pool_id is not None:
                raise InvalidArgumentError(
                    ErrorCode.validation_error, "worker_pool_id is for autonomous teammates"
                )
            return None
        if not resident:
            raise InvalidArgumentError(ErrorCode.validation_error, "an autonomous teammate must be resident")
        if lead.mode != RunMode.orchestrator:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "autonomous teammates claim steps of the lead's Task board: only an Orchestrator lead has one",
            )
        return self.tasks.load().pool_id(str(pool_id) if pool_id is not None else None)

    # ---- triggers ---------------------------------------------------------------------------------
    def board_changed(self, session_id: str) -> None:
        """A Task tool call on ``session_id``'s board: a scan in the background (owned here)."""
        if self.manager.closing:
            return
        if not self._scans.closed:
            self._scans.spawn(self.scan(session_id), name=f"scan {session_id}")

    async def scan(self, lead_session_id: str) -> int:
        """Claims one ready step for each idle autonomous teammate of the lead; returns how many runs it
        started."""
        lock = self._locks.setdefault(lead_session_id, asyncio.Lock())
        async with lock:
            try:
                return await self._scan(lead_session_id)
            except AgentCoreError as exc:
                log.warning("autonomous scan of %s failed: %s", lead_session_id, exc.message)
                return 0

    async def _scan(self, lead_session_id: str) -> int:
        if self.manager.closing:
            return 0
        mates = [
            m
            for m in await self.store.of_lead(lead_session_id)
            if m.state == "active" and m.setting("autonomous", False)
        ]
        if not mates:
            return 0
        service = await self.tasks.load().task_registry.get(lead_session_id)
        started = 0
        for mate in mates:
            if not await self._idle(mate):
                continue
            found = self._ready_step(service, mate)
            if found is None:
                continue
            if await self._claim_and_run(service, mate, *found):
                started += 1
        return started

    async def _idle(self, mate: TeammateRecord) -> bool:
        if mate.session_id in self._claiming:
            return False
        session = await self.manager.get_session(mate.session_id)
        if session.busy:
            return False
        storage = self.manager.services.storage
        return not await storage.pending_inbox(mate.session_id, mate.agent_id, limit=1)

    @staticmethod
    def _scope(mate: TeammateRecord, task_id: str, step_id: str | None) -> WorkerTaskScope:
        return WorkerTaskScope(
            task_id=task_id,
            worker_pool_id=str(mate.setting("worker_pool_id")),
            worker_agent_id=mate.agent_id,
            allowed_step_ids=(step_id,) if step_id is not None else None,
        )

    def _ready_step(self, service: TaskService, mate: TeammateRecord) -> tuple[str, Any] | None:
        for dag in service.active_dags():
            scope = self._scope(mate, dag.task_id, None)
            for step in dag.steps():
                if step.status == StepStatus.ready and service.pools.in_scope(scope, step):
                    return dag.task_id, step
        return None

    async def _claim_and_run(
        self, service: TaskService, mate: TeammateRecord, task_id: str, step: Any
    ) -> bool:
        run_id = new_id("run_")
        scope = self._scope(mate, task_id, step.step_id)
        caller = TaskCaller(agent_id=mate.agent_id, run_id=run_id, role=AgentRole.worker, worker_scope=scope)
        self._claiming.add(mate.session_id)
        try:
            try:
                await service.claim_step(caller, TaskClaimStepInput(task_id=task_id, step_id=step.step_id))
            except AgentCoreError as exc:
                log.info(
                    "teammate %s could not claim %s/%s: %s", mate.name, task_id, step.step_id, exc.message
                )
                return False

            async def ended(state: RunState) -> None:
                ending = {RunStatus.completed: "completed", RunStatus.cancelled: "cancelled"}.get(
                    state.status, "failed"
                )
                await service.workers.on_worker_run_end(
                    state.run_id,
                    agent_id=mate.agent_id,
                    task_id=task_id,
                    ending=ending,  # type: ignore[arg-type]
                    worker_agent_id=mate.agent_id,
                )

            options = RootRunOptions(
                trigger=TRIGGER,
                run_id=run_id,
                first_note=claim_note(task_id, step, scope.worker_pool_id),
                first_note_metadata={"task_id": task_id, "step_id": step.step_id},
                task_scope=scope,
                task_session_id=mate.lead_session_id,
                extra_tools=STEP_TOOLS,
                on_ended=ended,
            )
            try:
                await self.manager.wake(mate.session_id, options)
            except AgentCoreError as exc:  # the runtime is closing: the claim's lease lapses
                log.warning(
                    "teammate %s could not start on %s/%s: %s", mate.name, task_id, step.step_id, exc.message
                )
                return False
            return True
        finally:
            self._claiming.discard(mate.session_id)

    async def close(self) -> None:
        """Waits (bounded) for scans in progress, then cancels the rest."""
        await self._scans.aclose(grace=CLOSE_WAIT_S)
