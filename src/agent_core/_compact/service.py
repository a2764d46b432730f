"""The compaction service: background and recovery compaction wired into the loop
(docs/compaction.md#triggers, docs/compaction.md#stale-compactions).

:func:`install` builds the :class:`CompactionService` (``RunFeatures.compaction``): every non-compact
agent run gets an :class:`AgentCompaction` (the loop driver's ``CompactionHooks``):

- ``after_build``: when ``P > threshold`` and no compaction of this agent is in flight, records
  ``compact_pending`` (event + ``sessions.metadata_json.compact_pending[<agent_id>]``) and starts the compact
  fork as a background task; the loop sends the request it has just composed.
- ``before_build``: applies a finished background compaction of this agent (the next safe point).
  A finished compaction is applied at once when the agent has no active run.
- ``recover``: synchronous recovery compaction; the fork is cancelled together with the run.

Applying runs the stale check; a valid compaction node (role ``user``, node type ``compaction``) becomes the
agent's new tip in the same transaction as ``compact_completed``. Failures write ``compact_failed`` only.
``runtime.close()`` cancels in-flight forks; at startup leftover ``compact_pending`` entries are cleared and
the non-terminal fork runs they name are marked ``aborted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent_core._compact.policy import compaction_threshold, plan_cut, should_trigger, stale_reason
from agent_core._concurrency import TaskOwner, first_of, wait_uninterrupted
from agent_core._context.composer import Composition
from agent_core._ids import new_id
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.spec import CompactionHooks, NoCompaction
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core.errors import ErrorCode
from agent_core.types import events as ev
from agent_core.types.base import format_ts
from agent_core.types.content import ErrorPayload, TextBlock
from agent_core.types.enums import AgentRole, AgentStatus, MessageRole, NodeType, RunStatus

SESSION_POLL_S = 0.2
"""How often a finished background compaction looks whether another process's run still holds the session."""

if TYPE_CHECKING:  # the fork is imported when a compaction starts (cold start)
    from agent_core._compact.fork import CompactionDraft, CompactMode, CompactRequest, ForkResult

log = logging.getLogger("agent_core._compact")

PENDING_KEY = "compact_pending"
CLOSE_WAIT_S = 5.0


@dataclass(eq=False, slots=True)
class _Job:
    """A background compaction of one agent, from trigger until applied, failed or found stale."""

    request: CompactRequest
    task: asyncio.Task[None] | None = None
    ready: CompactionDraft | None = None
    finished: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)


class CompactionService:
    """Per-runtime compaction state: in-flight background jobs and the ``compact_pending`` bookkeeping."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self.jobs: dict[str, _Job] = {}
        self.tasks = TaskOwner("background compactions")
        """In-flight background compactions by compacted agent id (at most one per agent)."""
        self.pending: dict[str, dict[str, dict[str, Any]]] = {}
        """``session_id -> agent_id -> pending entry``; mirrors ``sessions.metadata_json.compact_pending``."""
        self.closing = False

    @property
    def is_closing(self) -> bool:
        return self.closing or self.manager.closing

    # ---- wiring -----------------------------------------------------------------------------------
    def hooks_for(self, state: RunState, cursor: AgentCursor, role: AgentRole) -> CompactionHooks:
        """The loop's compaction hooks of one agent run: compact forks never compact themselves."""
        if role == AgentRole.compact:
            return NoCompaction()
        return AgentCompaction(self, state, cursor)

    def request(
        self, state: RunState, cursor: AgentCursor, composition: Composition, mode: CompactMode
    ) -> CompactRequest | None:
        """The compaction of ``state``'s agent for this build, or ``None`` when there is nothing to compact."""
        session = self.manager.sessions.get(state.session_id)
        if session is None:
            return None
        settings = self.manager.services.settings
        budget = composition.budget.non_system_budget
        plan = plan_cut(
            cursor.path,
            keep_recent_tokens=settings.compact.keep_recent_tokens,
            non_system_budget=budget,
            summary_reserve=min(settings.compact.max_summary_tokens, budget // 2),
            counter=self.manager.services.counter,
        )
        if plan is None:
            return None
        from agent_core._compact.fork import CompactRequest

        return CompactRequest(
            session=session,
            trigger=state,
            cursor=cursor,
            root_agent=state.agent_id == session.root_agent_id,
            plan=plan,
            mode=mode,
            tokens_before=composition.total_tokens,
        )

    # ---- background -------------------------------------------------------------------------------
    async def start_background(self, req: CompactRequest, threshold: int) -> None:
        agent_id = req.target_agent_id
        job = _Job(req)
        self.jobs[agent_id] = job
        try:
            await req.trigger.recorder.emit(
                ev.CompactPending(
                    tokens_estimate=req.tokens_before, threshold=threshold, target_agent_id=agent_id
                ),
            )
            entry = {
                "compact_run_id": req.compact_run_id,
                "covered_tip_node_id": req.plan.covered_tip_node_id,
                "mode": req.mode,
                "requested_at": format_ts(),
            }
            await self._set_pending(req, entry)
        except BaseException:
            del self.jobs[agent_id]
            raise
        job.task = self.tasks.spawn(self._background(job), name=f"compact {agent_id}")

    async def _background(self, job: _Job) -> None:
        req = job.request
        try:
            from agent_core._compact.fork import CompactFailure, run_compact_fork

            result = await run_compact_fork(self.manager, req)
            if isinstance(result, CompactFailure):
                await self.fail(req, result.reason, result.error)
                return
            job.ready = result
            while not job.finished:
                active = self._active_run(req)
                if active is None:
                    if await self._apply_if_session_free(job):
                        return
                    job.wake.clear()  # another process runs the session: look again shortly
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(job.wake.wait(), SESSION_POLL_S)
                    continue
                job.wake.clear()
                async with TaskOwner() as waiters:
                    done = waiters.spawn(active.done.wait())
                    await first_of(done, job.wake)
        except asyncio.CancelledError:
            if not job.finished:
                job.finished = True
                error = ErrorPayload(
                    code=ErrorCode.cancelled, message="the runtime closed before the compaction"
                )
                with contextlib.suppress(Exception):  # recorded even if cancelled again meanwhile
                    await wait_uninterrupted(self.fail(req, "cancelled", error))
            raise
        except Exception:
            log.exception("background compaction of %s failed", req.target_agent_id)
            if not job.finished:
                job.finished = True
                error = ErrorPayload(
                    code=ErrorCode.internal_error, message="the background compaction failed"
                )
                with contextlib.suppress(Exception):
                    await self.fail(req, "error", error)
        finally:
            job.finished = True
            if self.jobs.get(req.target_agent_id) is job:
                del self.jobs[req.target_agent_id]

    async def _apply_if_session_free(self, job: _Job) -> bool:
        """Applies a finished compaction while no run of the session runs in any process sharing the
        store (its lease held for the write; several processes on one home, issue 40); ``False`` when
        another process's run holds the session (nothing written)."""
        req = job.request
        storage = self.manager.services.storage
        lease = storage.session_lease(req.session.session_id)
        entered = lease.try_enter()
        if entered is False:
            return False
        try:
            if entered and req.root_agent:  # another process may have moved the session on
                await self._follow_store(req)
            await self._apply(job)
        finally:
            if entered:
                await lease.__aexit__(None, None, None)
        return True

    async def _follow_store(self, req: CompactRequest) -> None:
        """Points the session at its stored active node (and the cursor along its path) when another
        process wrote the store since the session was read (its crash recovery is left to the next run)."""
        storage = self.manager.services.storage
        session = req.session
        if await storage.writes_elsewhere() == session.store_seen:
            return
        record = await storage.get_session(session.session_id)
        session.active_node_id = record.active_node_id if record else None
        active = session.active_node_id
        if not req.cursor.truncate_to(active):
            req.cursor.reset(await storage.node_path(session.session_id, active) if active else [])

    def _active_run(self, req: CompactRequest) -> RunState | None:
        """The compacted agent's non-terminal run in this runtime, if any (compact forks excluded)."""
        for run in req.session.live_runs.values():
            if run.agent_id == req.target_agent_id and not run.terminal and run.role != AgentRole.compact:
                return run
        return None

    async def apply_ready(self, agent_id: str) -> None:
        """Applies this agent's finished background compaction now (called at a safe point)."""
        job = self.jobs.get(agent_id)
        if job is not None and job.ready is not None and not job.finished:
            await self._apply(job)

    async def _apply(self, job: _Job) -> None:
        job.finished = True
        job.wake.set()
        req = job.request
        draft = job.ready
        assert draft is not None
        if req.root_agent and self._active_run(req) is None:
            req.cursor.truncate_to(req.session.active_node_id)
        try:
            await self.write_compaction(req, draft)
        except Exception as exc:
            log.exception("writing the compaction of %s failed", req.target_agent_id)
            error = ErrorPayload(code=ErrorCode.storage_error, message=f"{type(exc).__name__}: {exc}")
            with contextlib.suppress(Exception):
                await self.fail(req, "error", error.redacted_copy(self.manager.services.redactor))

    # ---- shared by both modes ---------------------------------------------------------------------
    async def write_compaction(self, req: CompactRequest, draft: CompactionDraft) -> bool:
        """Stale check, then the compaction node + ``compact_completed`` in one transaction."""
        problem = stale_reason(req.cursor.path, req.plan.covered_tip_node_id)
        if problem is not None:
            await self.fail(req, "stale", None, stale=True, message=problem)
            return False
        rec = req.trigger.recorder
        node_id = new_id("node_")
        completed = ev.CompactCompleted(
            stale=False,
            tokens_before=req.tokens_before,
            first_kept_node_id=req.plan.first_kept_node_id,
            summary_tokens=draft.summary_tokens,
            mode=req.mode,
            compact_run_id=req.compact_run_id,
            compaction_node_id=node_id,
        )
        await rec.write_node(
            node_id=node_id,
            role=MessageRole.user,
            node_type=NodeType.compaction,
            content=[TextBlock(text=draft.summary)],
            metadata=draft.metadata,
            events=[(completed, None)],
        )
        if req.root_agent:
            req.session.active_node_id = req.cursor.visible_tip
        await self._set_pending(req, None)
        return True

    async def fail(
        self,
        req: CompactRequest,
        reason: str,
        error: ErrorPayload | None,
        *,
        stale: bool = False,
        message: str | None = None,
    ) -> None:
        failed = ev.CompactFailed(
            error=error.model_dump(mode="json") if error is not None else None,
            stale=stale,
            reason=reason,
            mode=req.mode,
            compact_run_id=req.compact_run_id,
            target_agent_id=req.target_agent_id,
            message=message or ev.ABSENT,
        )
        await req.trigger.recorder.emit(failed)
        await self._set_pending(req, None)

    async def _set_pending(self, req: CompactRequest, entry: dict[str, Any] | None) -> None:
        if req.mode != "auto":
            return
        session_id = req.session.session_id
        entries = self.pending.setdefault(session_id, {})
        if entry is None:
            current = entries.get(req.target_agent_id)
            if current is None or current.get("compact_run_id") != req.compact_run_id:
                return
            del entries[req.target_agent_id]
        else:
            entries[req.target_agent_id] = entry
        snapshot = dict(entries) or None
        if not entries:
            self.pending.pop(session_id, None)
        await self.manager.services.storage.append(session_id, session_metadata={PENDING_KEY: snapshot})

    # ---- lifecycle --------------------------------------------------------------------------------
    async def clear_leftovers(self) -> None:
        """Startup: clears ``compact_pending`` entries of processes that are gone (their forks went with
        them); the entries of another live process on the same home (its store owns the fork run) stay."""
        storage = self.manager.services.storage
        for record in await storage.list_sessions():
            try:
                meta = json.loads(record.metadata_json) if record.metadata_json else {}
            except ValueError:
                continue
            entries = meta.get(PENDING_KEY) if isinstance(meta, dict) else None
            if not entries:
                continue
            try:
                listed = (
                    [e for e in entries.values() if isinstance(e, dict)] if isinstance(entries, dict) else []
                )
                run_ids = [e["compact_run_id"] for e in listed if isinstance(e.get("compact_run_id"), str)]
                live = await storage.runs_live_elsewhere(run_ids) if run_ids else set()
                if live:
                    continue  # another live process compacts in this session: its entries are its own
                for entry in listed:
                    run_id = entry.get("compact_run_id")
                    run = await storage.get_run(run_id) if isinstance(run_id, str) else None
                    if run is None or run.status.terminal:
                        continue
                    error = ErrorPayload(
                        code=ErrorCode.cancelled,
                        message="the runtime stopped before this compaction finished",
                    )
                    await storage.update_run(
                        run.run_id, status=RunStatus.aborted.value, error_json=error.model_dump_json()
                    )
                    await storage.update_agent(run.agent_id, status=AgentStatus.failed.value)
                await storage.append(record.session_id, session_metadata={PENDING_KEY: None})
            except Exception:
                log.exception("could not clear leftover compactions of session %s", record.session_id)

    async def close(self) -> None:
        """Runtime close: cancels in-flight forks; finished ones are applied when the agent is idle."""
        self.closing = True
        jobs = list(self.jobs.values())
        for job in jobs:
            job.wake.set()
        await self.tasks.aclose(grace=CLOSE_WAIT_S, bound=2)


class AgentCompaction:
    """The ``CompactionHooks`` of one agent run (never raises into the loop)."""

    def __init__(self, service: CompactionService, state: RunState, cursor: AgentCursor) -> None:
        self.service = service
        self.state = state
        self.cursor = cursor
        self.recovery_attempted = False
        """True once a recovery compaction ran for this run (the driver's ``compact_attempted``)."""

    @property
    def _settings(self) -> Any:
        return self.service.manager.services.settings.compact

    async def before_build(self) -> None:
        try:
            await self.service.apply_ready(self.state.agent_id)
        except Exception:
            log.exception("applying the compaction of %s failed", self.state.agent_id)

    async def after_build(self, composition: Composition) -> bool:
        settings = self._settings
        if not (settings.enabled and settings.auto_background) or self.service.is_closing:
            return False
        if self.state.agent_id in self.service.jobs:
            return False
        budget = composition.budget
        threshold = compaction_threshold(
            budget.context_window, budget.reserve_output_tokens, settings.reserve_tokens
        )
        if not should_trigger(composition.total_tokens, threshold):
            return False
        try:
            req = self.service.request(self.state, self.cursor, composition, "auto")
            if req is None:
                return False
            await self.service.start_background(req, threshold)
        except Exception:
            log.exception("starting a background compaction of %s failed", self.state.agent_id)
            return False
        return True

    async def recover(self, composition: Composition) -> bool:
        settings = self._settings
        if not (settings.enabled and settings.recovery_sync) or self.service.is_closing:
            return False
        try:
            req = self.service.request(self.state, self.cursor, composition, "recovery")
            if req is None:
                return False
            self.recovery_attempted = True
            from agent_core._compact.fork import CompactFailure, run_compact_fork

            result: ForkResult = await run_compact_fork(self.service.manager, req, follow_cancel=self.state)
            if isinstance(result, CompactFailure):
                await self.service.fail(req, result.reason, result.error)
                return False
            return await self.service.write_compaction(req, result)
        except Exception:
            log.exception("recovery compaction of %s failed", self.state.agent_id)
            return False


async def install(manager: RunManager) -> CompactionService:
    """Builds the compaction service and clears leftover pending compactions."""
    service = CompactionService(manager)
    await service.clear_leftovers()
    return service
