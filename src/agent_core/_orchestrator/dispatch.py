"""``agent.dispatch_worker`` and ``agent.list_workers`` (docs/multi-agent.md#worker-pools,
docs/multi-agent.md#agentlist_workers, docs/multi-agent.md#dispatching-a-worker,
docs/task-board.md#worker-run-end-fallback, docs/task-board.md#claims-and-leases).

:class:`WorkerDispatcher.dispatch` checks, in this order (docs/multi-agent.md#dispatching-a-worker): input
schema, Task existence/availability, dispatchability, pool, ``allowed_step_ids`` (all via
:meth:`TaskService.check_dispatchable`), worker selection (``explicit`` or ``fallback_first_idle``), the
dispatch ``allowed_tools`` against the selected worker's ceiling, then the child limits (in the launcher).
Any failure emits ``worker_dispatch_failed`` on the Orchestrator stream, starts no run and becomes an
error result. The selected worker is reserved without awaiting, so parallel dispatches never pick the
same worker.

A started run is one child run of :class:`~agent_core._agents.children.ChildLauncher` (role ``worker``,
purpose ``worker``): the worker's agent row and its never-rendered root ``system_note`` node are created
lazily at its first dispatch in the session (:mod:`.worker_agents`; ``child_agent_created``); a tool step
the temporal engine retried attaches to the run its first attempt started (:mod:`.redispatch`). Each
dispatch writes its ``<worker_dispatch>`` start node as a new child of that root (``runs.start_node_id``),
and the run's Task scope travels in ``RunScope.task_scope``. After the run ended, the worker-run-end fallback
(:meth:`TaskService.on_worker_run_end`) runs before the result is assembled; a run abandoned after a
cancel timeout gets its fallback when it really ends. ``no_step_claimed`` is a successful result.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from agent_core._agents.children import ChildLauncher, ChildSpec
from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.tools import delegation_text
from agent_core._concurrency import TaskOwner
from agent_core._orchestrator.pools import PoolWorker, WorkerPools, WorkerSlot, WorkerSlots
from agent_core._orchestrator.redispatch import EarlierDispatch, started_before
from agent_core._orchestrator.worker_agents import ensure_worker_agent
from agent_core._orchestrator.worktrees import (
    GitError,
    Worktree,
    create_worktree,
    discard_worktree,
    finish_worktree,
    worktree_record,
)
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core._tasks import TaskCaller, TaskRegistry, TaskService, WorkerTaskScope
from agent_core._tasks.inputs import parse_input
from agent_core._tasks.worker_runs import WorkerRunEnding
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    WorkerUnavailableError,
)
from agent_core.tools._effective import validate_allowed_tools
from agent_core.tools.context import ToolContext
from agent_core.types import events as ev
from agent_core.types.base import StrictModel
from agent_core.types.enums import AgentRole, AgentType, RunStatus
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolResult

log = logging.getLogger("agent_core._orchestrator")
WORKER_DISPATCH = "worker_dispatch"


class DispatchInput(StrictModel):
    """``agent.dispatch_worker`` arguments (docs/multi-agent.md#agent-tools); unknown keys →
    ``validation_error``."""

    task_id: str = Field(min_length=1)
    worker_pool_id: str | None = None
    worker_agent_id: str | None = None
    allowed_step_ids: list[str] | None = None
    instruction: str = Field(min_length=1)
    context: str | None = None
    constraints: list[str] | None = None
    allowed_tools: list[str] | None = None
    expected_output_schema: dict[str, Any] | None = None
    timeout_ms: int | None = None


def run_ending(state: RunState) -> WorkerRunEnding:
    """How a terminal worker run ended, for the fallback reason
    (docs/task-board.md#worker-run-end-fallback)."""
    if state.status == RunStatus.completed:
        return "completed"
    if state.status == RunStatus.cancelled:
        return "cancelled"
    if state.status == RunStatus.aborted:
        return "timeout" if state.timed_out else "cancelled"
    return "failed"


class WorkerDispatcher:
    """Worker selection, dispatch, listing and Task-level cancellation of worker runs."""

    def __init__(
        self,
        manager: RunManager,
        pools: WorkerPools,
        tasks: TaskRegistry,
        definitions: AgentDefinitionRegistry,
        launcher: ChildLauncher,
    ) -> None:
        self.manager = manager
        self.pools = pools
        self.tasks = tasks
        self.definitions = definitions
        self.launcher = launcher
        self.slots = WorkerSlots()
        self._deferred = TaskOwner("worker-run fallbacks")
        """Worker-run-end fallbacks: they finish even when the call that started them is cancelled."""

    # ================================================================== agent.list_workers

    def list_workers(self, session_id: str, worker_pool_id: str | None) -> dict[str, Any]:
        """Workers of one valid pool, or of all valid pools (config order, then entry order)."""
        pool_ids = [self.pools.resolve_pool(worker_pool_id)] if worker_pool_id is not None else None
        workers = (
            [w for p in pool_ids for w in self.pools.workers(p)] if pool_ids else self.pools.all_workers()
        )
        service = self.tasks.peek(session_id)
        out: list[dict[str, Any]] = []
        for worker in workers:
            slot = self.slots.get(session_id, worker)
            status = slot.status()
            definition = worker.definition
            entry: dict[str, Any] = {
                "worker_agent_id": worker.worker_id,
                "agent_definition_id": definition.agent_definition_id,
                "name": definition.name,
                "description": definition.description,
                "worker_pool_id": worker.pool_id,
                "status": status,
                "suggested_tools": self.definitions.suggested_tools_view(
                    definition, AgentRole.worker, ceiling=worker.ceiling
                ),
                "tags": list(definition.tags),
            }
            if status == "busy" and slot.run is not None:
                entry["current_run_id"] = slot.run.run_id
                step = (
                    service.claimed_step(slot.task_id, slot.run.run_id)
                    if service is not None and slot.task_id is not None
                    else None
                )
                if step is not None:
                    entry["current_step_id"] = step.step_id
            out.append(entry)
        return {"workers": out}

    # ================================================================== agent.dispatch_worker

    async def dispatch(
        self, call: ToolCall, ctx: ToolContext, *, selection_reason: str | None = None
    ) -> ToolResult:
        """``selection_reason`` overrides the reported reason (``"autonomous"`` for self-claiming workers)."""
        parent = self.manager.runs.get(ctx.run_id)
        if parent is None:
            raise InternalError(ErrorCode.internal_error, f"calling run {ctx.run_id!r} is not live")
        args = call.arguments
        failure: dict[str, Any] = {
            "task_id": args.get("task_id") if isinstance(args.get("task_id"), str) else None,
            "worker_pool_id": args.get("worker_pool_id")
            if isinstance(args.get("worker_pool_id"), str)
            else None,
            "worker_agent_id": args.get("worker_agent_id")
            if isinstance(args.get("worker_agent_id"), str)
            else None,
        }
        slot: WorkerSlot | None = None
        worktree: Worktree | None = None
        attached: EarlierDispatch | None = None
        try:
            inp = parse_input(DispatchInput, args)
            if not inp.instruction.strip():
                raise InvalidArgumentError(ErrorCode.validation_error, "instruction must not be empty")
            service = await self.tasks.get(ctx.session_id)
            attached = await started_before(
                self.manager.services, self.launcher.remote, self.pools, self.definitions, ctx
            )
            if attached is None:
                check = await service.check_dispatchable(
                    inp.task_id, worker_pool_id=inp.worker_pool_id, allowed_step_ids=inp.allowed_step_ids
                )
                failure["worker_pool_id"] = check.worker_pool_id
                worker, reason = self._select(ctx.session_id, check.worker_pool_id, inp)
                reason = selection_reason or reason
            else:
                check, worker = attached.check, attached.worker
                reason, worktree = attached.selection_reason, attached.worktree
            failure["worker_agent_id"] = worker.worker_id
            slot = self.slots.get(ctx.session_id, worker)
            slot.reserved = True
            scope = WorkerTaskScope(
                task_id=inp.task_id,
                worker_pool_id=check.worker_pool_id,
                worker_agent_id=worker.worker_id,
                allowed_step_ids=check.allowed_step_ids,
            )
            if attached is None:
                worktree = await self._worktree(inp.task_id, check.allowed_step_ids)
            spec = self._child_spec(ctx, parent, service, slot, scope, inp, reason, worktree)
            remote = self.launcher.remote
            if remote is not None and remote.handles(spec):
                spec.run_id = remote.run_id(ctx.run_id, ctx.tool_call_id)
                spec.attach = attached is not None
                if worktree is not None and attached is None:  # a retried step commits it too
                    spec.run_metadata["worktree"] = worktree_record(worktree)
            outcome = await self.launcher.run(ctx, spec)
        except AgentCoreError as exc:
            if worktree is not None and attached is None and (slot is None or slot.run is None):
                await discard_worktree(worktree)  # no run ever used it
            if slot is not None and slot.run is not None and slot.run.task is None:
                slot.run, slot.waiting = None, False  # admitted, but its rows could not be written
            await self._emit(
                parent,
                ev.WorkerDispatchFailed(
                    error=exc.to_payload(self.manager.services.redactor).model_dump(mode="json"),
                    task_id=failure["task_id"],
                    worker_pool_id=failure["worker_pool_id"],
                    worker_agent_id=failure["worker_agent_id"],
                    tool_call_id=ctx.tool_call_id,
                ),
                ctx.tool_call_id,
            )
            raise
        finally:
            if slot is not None:
                slot.reserved = False
        assert slot is not None
        slot.waiting = False
        state = outcome.state
        if state.terminal:
            fallback = self._deferred.spawn(
                service.on_worker_run_end(
                    state.run_id,
                    agent_id=state.agent_id,
                    task_id=inp.task_id,
                    ending=run_ending(state),
                    worker_agent_id=worker.worker_id,
                )
            )
            await asyncio.wait({fallback})  # an aborted call leaves the fallback to finish (it is owned)
            end = fallback.result()
            if worktree is not None:
                await self._finish_worktree(worktree, inp.task_id, end.claimed_step_id)
            facts = {
                "claimed_step_id": end.claimed_step_id,
                "step_status": end.step_status,
                "step_result_summary": end.step_result_summary,
                "no_step_claimed": end.no_step_claimed,
            }
        else:
            self._defer_run_end(service, state, inp.task_id, worker.worker_id, worktree)
            step = service.claimed_step(inp.task_id, state.run_id)
            facts = {
                "claimed_step_id": step.step_id if step is not None else None,
                "step_status": step.status.value if step is not None else None,
                "step_result_summary": step.result_summary if step is not None else None,
                "no_step_claimed": step is None,
            }
        body = {
            "worker_agent_id": worker.worker_id,
            "worker_pool_id": scope.worker_pool_id,
            **outcome.ids,
            "selection_reason": reason,
            "task_id": inp.task_id,
            **facts,
            "worker_result": outcome.result.model_dump(mode="json"),
        }
        if worktree is not None:
            body["worktree"] = worktree.facts()
        return outcome.tool_result(ctx.tool_call_id, call.name, body)

    async def _worktree(self, task_id: str, allowed_step_ids: Sequence[str] | None) -> Worktree | None:
        """The dispatch's own git worktree when ``agents.worker_isolation = "worktree"``."""
        if self.manager.services.settings.agents.worker_isolation != "worktree":
            return None
        single = allowed_step_ids[0] if allowed_step_ids and len(allowed_step_ids) == 1 else None
        return await create_worktree(self.manager.services.config.project, task_id, single)

    async def _finish_worktree(self, worktree: Worktree, task_id: str, step_id: str | None) -> None:
        try:
            await finish_worktree(worktree, task_id, step_id)
        except GitError as exc:  # the worker's files stay in the worktree; the result says why
            log.warning("cannot finish worktree %s: %s", worktree.path, exc)
            worktree.error = str(exc)

    def _select(self, session_id: str, pool_id: str, inp: DispatchInput) -> tuple[PoolWorker, str]:
        """Worker selection and the ``allowed_tools`` check (steps 6–7); never awaits."""
        workers = self.pools.workers(pool_id)
        if inp.worker_agent_id is not None:
            worker = next((w for w in workers if w.worker_id == inp.worker_agent_id), None)
            if worker is None:
                raise WorkerUnavailableError(
                    ErrorCode.worker_not_available,
                    f"worker {inp.worker_agent_id!r} is not a worker of pool {pool_id!r}",
                    details={"worker_agent_id": inp.worker_agent_id, "worker_pool_id": pool_id},
                )
            status = self.slots.get(session_id, worker).status()
            if status == "unavailable":
                raise WorkerUnavailableError(
                    ErrorCode.worker_not_available,
                    f"worker {worker.worker_id!r} is still winding down a cancelled run",
                    details={"worker_agent_id": worker.worker_id, "status": status},
                )
            if status == "busy":
                raise WorkerUnavailableError(
                    ErrorCode.worker_busy,
                    f"worker {worker.worker_id!r} is busy with another run",
                    details={"worker_agent_id": worker.worker_id},
                )
            self._check_tools(worker, inp.allowed_tools)
            return worker, "explicit"
        idle = [w for w in workers if self.slots.get(session_id, w).status() == "idle"]
        if not idle:
            raise WorkerUnavailableError(
                ErrorCode.worker_pool_busy,
                f"no idle worker in pool {pool_id!r}",
                details={"worker_pool_id": pool_id},
            )
        reasons: dict[str, Any] = {}
        for worker in idle:
            try:
                self._check_tools(worker, inp.allowed_tools)
            except AgentCoreError as exc:
                reasons[worker.worker_id] = {"message": exc.message, **exc.details}
                continue
            return worker, "fallback_first_idle"
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"no idle worker of pool {pool_id!r} accepts the requested allowed_tools",
            details={"workers": reasons},
        )

    def _check_tools(self, worker: PoolWorker, allowed_tools: list[str] | None) -> None:
        if allowed_tools is None:
            return
        services = self.manager.services
        validate_allowed_tools(
            allowed_tools,
            services.tools.definitions(),
            services.settings,
            AgentRole.worker,
            worker_entry_tools=worker.ceiling,
        )

    def _child_spec(
        self,
        ctx: ToolContext,
        parent: RunState,
        service: TaskService,
        slot: WorkerSlot,
        scope: WorkerTaskScope,
        inp: DispatchInput,
        reason: str,
        worktree: Worktree | None = None,
    ) -> ChildSpec:
        worker = slot.worker
        caller = TaskCaller(agent_id=slot.agent_id, run_id=None, role=AgentRole.worker, worker_scope=scope)
        allowed = list(scope.allowed_step_ids) if scope.allowed_step_ids is not None else None
        first_text = delegation_text(
            WORKER_DISPATCH,
            [
                ("task_id", inp.task_id),
                ("worker", f"{worker.worker_id} (pool {scope.worker_pool_id})"),
                ("allowed_step_ids", ", ".join(allowed) if allowed else None),
                ("instruction", inp.instruction),
                ("context", inp.context),
                ("constraints", "\n".join(f"- {c}" for c in inp.constraints) if inp.constraints else None),
                (
                    "expected_output_schema",
                    json.dumps(inp.expected_output_schema, indent=2, ensure_ascii=False)
                    if inp.expected_output_schema
                    else None,
                ),
                ("task_board", self.board(service, caller)),
                (
                    "worktree",
                    f"You work in your own git worktree {worktree.workdir} on branch {worktree.branch}; "
                    "your writes go there (not to the main project) and are committed on that branch "
                    "when your run ends."
                    if worktree is not None
                    else None,
                ),
            ],
        )

        async def on_admitted(state: RunState) -> None:
            created = await ensure_worker_agent(self.manager.services.storage, slot, parent)
            assert slot.root is not None
            cursor = state.cursor
            assert cursor is not None
            cursor.reset([slot.root])
            slot.run, slot.waiting, slot.task_id, slot.reserved = state, True, inp.task_id, False
            if created and not attach():
                child_created = ev.ChildAgentCreated(
                    child_agent_id=state.agent_id,
                    child_run_id=state.run_id,
                    agent_type=AgentType.sub.value,
                    purpose="worker",
                    agent_definition_id=worker.definition.agent_definition_id,
                    definition_source=worker.definition.source,
                    tool_call_id=ctx.tool_call_id,
                    worker_agent_id=worker.worker_id,
                    worker_pool_id=scope.worker_pool_id,
                )
                await self._emit(parent, child_created, ctx.tool_call_id)
            if attach():  # a retried tool step: the dispatch was announced by its first attempt
                return
            dispatched = ev.WorkerDispatched(
                worker_agent_id=worker.worker_id,
                worker_pool_id=scope.worker_pool_id,
                child_agent_id=state.agent_id,
                child_run_id=state.run_id,
                task_id=inp.task_id,
                allowed_step_ids=allowed,
                selection_reason=reason,
                tool_call_id=ctx.tool_call_id,
            )
            await self._emit(parent, dispatched, ctx.tool_call_id)

        def attach() -> bool:
            return spec.attach

        def step_id(state: RunState) -> str | None:
            step = service.claimed_step(inp.task_id, state.run_id)
            return step.step_id if step is not None else None

        def board() -> str | None:
            return self.board(service, caller)

        async def on_ended(_state: RunState) -> None:
            await service.catch_up(inp.task_id)

        spec = ChildSpec(
            role=AgentRole.worker,
            definition=worker.definition,
            tool_call_id=ctx.tool_call_id,
            first_text=first_text,
            purpose="worker",
            allowed_tools=inp.allowed_tools,
            expected_output_schema=inp.expected_output_schema,
            timeout_ms=inp.timeout_ms,
            base_path=[slot.root] if slot.root is not None else (),
            agent_id=slot.agent_id,
            worker_entry_tools=worker.ceiling,
            run_metadata={
                "task_id": inp.task_id,
                "allowed_step_ids": allowed,
                "worker_pool_id": scope.worker_pool_id,
                "worker_id": worker.worker_id,
                "selection_reason": reason,
            },
            first_node_metadata={
                "task_id": inp.task_id,
                "allowed_step_ids": allowed,
                "worker_pool_id": scope.worker_pool_id,
                "worker_id": worker.worker_id,
            },
            task_scope=scope,
            workdir=worktree.workdir if worktree is not None else None,
            task_board=board,
            step_id=step_id,
            on_admitted=on_admitted,
            on_ended=on_ended,
        )
        return spec

    def board(self, service: TaskService, caller: TaskCaller) -> str | None:
        """The Task board text for ``caller`` with the configured budgets
        (docs/context.md#the-task-board-summary)."""
        context = self.manager.services.settings.context
        return service.board_summary(
            caller,
            token_budget=context.task_board_token_budget,
            recent_limit=context.task_recent_changes_limit,
            recent_window_minutes=context.task_recent_changes_window_minutes,
            estimate_tokens=self.manager.services.counter.text,
        )

    async def _emit(self, parent: RunState, event: ev.EventPayload, tool_call_id: str | None) -> None:
        try:
            await parent.recorder.emit(event, tool_call_id=tool_call_id)
        except Exception:
            log.warning("could not emit %s on run %s", event.event_type.value, parent.run_id, exc_info=True)

    # ================================================================== run end and cancellation

    def _defer_run_end(
        self,
        service: TaskService,
        state: RunState,
        task_id: str,
        worker_id: str,
        worktree: Worktree | None = None,
    ) -> None:
        """A run abandoned after a cancel timeout gets its fallback once it really ends."""

        async def later() -> None:
            await state.done.wait()
            end = await service.on_worker_run_end(
                state.run_id,
                agent_id=state.agent_id,
                task_id=task_id,
                ending=run_ending(state),
                worker_agent_id=worker_id,
            )
            if worktree is not None:
                await self._finish_worktree(worktree, task_id, end.claimed_step_id)

        self._deferred.spawn(later(), name=f"worker-run end {state.run_id}")

    async def cancel_worker_runs(self, run_ids: list[str], reason: str) -> None:
        """TaskService callback for ``task_fail``/``task_cancel``: cancel holder runs in parallel and wait
        (each watcher is bounded by ``agents.child_cancel_timeout_ms``)."""
        watchers = []
        for run_id in run_ids:
            state = self.manager.runs.get(run_id)
            if state is None or state.terminal or state.parent is None:
                continue
            watchers.append(self.launcher.request_cancel(state, reason))
        if watchers:
            await asyncio.gather(*watchers, return_exceptions=True)

    async def close(self) -> None:
        """Lets deferred fallbacks of runs that ended during shutdown finish (bounded)."""
        await self._deferred.aclose(grace=2.0)
