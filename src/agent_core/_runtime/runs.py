"""Starting, queueing, running and cancelling runs (runtime.md §6–§8).

:class:`RunManager` owns the sessions loaded in this runtime, the per-session FIFO queue of user runs and
the live :class:`RunState` of every run. Root runs go through :meth:`RunManager._run_root`; child runs
(sub/fork/worker/compact) use :meth:`RunManager.execute_agent_run`, which shares the loop driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from agent_core._concurrency import TaskOwner
from agent_core._events import payloads as ev
from agent_core._events.stream import EventChannel
from agent_core._ids import new_id, validate_session_id
from agent_core._jsontext import compact_json
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.recorder import RunRecorder
from agent_core._loop.spec import Interruption
from agent_core._runtime import lifecycle
from agent_core._runtime.agent_run import AgentRunSpec, execute_agent_run
from agent_core._runtime.features import RunFeatures
from agent_core._runtime.recovery import recover_before_root_run, recover_session
from agent_core._runtime.services import Services
from agent_core._runtime.session_lease import hold_session_lease
from agent_core._runtime.state import RunState, SessionState
from agent_core.config._profiles import resolve_purpose_model
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.tools._effective import EffectiveToolsMemo
from agent_core.tools.context import RunScope
from agent_core.types.base import format_ts
from agent_core.types.content import text_of
from agent_core.types.enums import (
    AgentRole,
    AgentStatus,
    AgentType,
    MessageRole,
    NodeType,
    RunMode,
    RunStatus,
    SessionStatus,
)
from agent_core.types.runtime import UserMessage
from agent_core.types.storage import AgentRecord, SessionRecord

if TYPE_CHECKING:
    from agent_core._loop._output import OutputSchema
    from agent_core.types._results import CancelResult

log = logging.getLogger("agent_core._runtime")


class RunManager:
    """The sessions loaded in this runtime, their run queues and every live run (runtime.md §6–§8).

    ``features`` is set once by ``open_services`` before the first run; the points where runs call into
    it are the code below (``start``, ``_register_root_run``, ``_run_root``, ``cancel``, ``close``)."""

    def __init__(self, services: Services, features: RunFeatures | None = None) -> None:
        self.services = services
        self.features = features if features is not None else RunFeatures()
        self.sessions: dict[str, SessionState] = {}
        self.runs: dict[str, RunState] = {}
        self.closing = False
        self._session_load_lock = asyncio.Lock()
        self.tasks = TaskOwner("runs")
        """The root runs' tasks (also those finishing their run-end observers); :meth:`close` closes it."""
        self._effective = EffectiveToolsMemo()

    # ---- sessions ---------------------------------------------------------------------------------
    async def get_session(self, session_id: str) -> SessionState:
        """The loaded session, loading it from SQLite on first use (``validation_error`` if unknown)."""
        validate_session_id(session_id)
        state = self.sessions.get(session_id)
        if state is not None:
            return state
        async with self._session_load_lock:  # concurrent first uses load (and recover) a session once
            state = self.sessions.get(session_id)
            if state is not None:
                return state
            return await self._load_session(session_id)

    async def _load_session(self, session_id: str) -> SessionState:
        record = await self.services.storage.get_session(session_id)
        if record is None:
            raise AgentCoreError(ErrorCode.validation_error, f"unknown session {session_id!r}")
        if record.status != SessionStatus.active:
            raise AgentCoreError(ErrorCode.validation_error, f"session {session_id!r} is archived")
        root = await self.services.storage.get_agent(record.root_agent_id)
        mode = RunMode.orchestrator if root and root.agent_type == AgentType.orchestrator else RunMode.normal
        path = (
            await self.services.storage.node_path(session_id, record.active_node_id)
            if record.active_node_id
            else []
        )
        state = SessionState(
            session_id=session_id,
            mode=mode,
            root_agent_id=record.root_agent_id,
            cwd=record.cwd,
            cursor=AgentCursor(record.root_agent_id, path),
            active_node_id=record.active_node_id,
        )
        await recover_session(self.services, state, live_run_ids=set(self.runs))
        self.sessions[session_id] = state
        return state

    async def _new_session(self, mode: RunMode) -> SessionState:
        storage = self.services.storage
        now = format_ts()
        while True:
            session_id = new_id("sess_")
            if session_id not in self.sessions and await storage.get_session(session_id) is None:
                break
        agent_id = new_id("agent_")
        agent_type = AgentType.orchestrator if mode == RunMode.orchestrator else AgentType.main
        name = "Orchestrator" if mode == RunMode.orchestrator else "main"
        project = str(self.services.config.project)
        await storage.create_session(
            SessionRecord(
                session_id=session_id,
                cwd=project,
                root_agent_id=agent_id,
                status=SessionStatus.active,
                metadata_json=compact_json({"mode": mode.value}),
                created_at=now,
                updated_at=now,
            ),
            AgentRecord(
                agent_id=agent_id,
                session_id=session_id,
                agent_type=agent_type,
                status=AgentStatus.idle,
                metadata_json=compact_json({"name": name, "mode": mode.value}),
                created_at=now,
                updated_at=now,
            ),
        )
        state = SessionState(
            session_id=session_id,
            mode=mode,
            root_agent_id=agent_id,
            cwd=project,
            cursor=AgentCursor(agent_id),
        )
        self.sessions[session_id] = state
        return state

    # ---- start --------------------------------------------------------------------------------
    async def start(
        self,
        message: UserMessage,
        session_id: str | None,
        mode: RunMode,
        output_schema: OutputSchema | None = None,
        output_retries: int | None = None,
    ) -> RunState:
        """Registers a root run (``output_schema``: the run's structured output, ``AgentRuntime.start``)."""
        purpose = "orchestrator" if mode == RunMode.orchestrator else "main"
        model = resolve_purpose_model(self.services.config, purpose)
        if model.provider not in self.services.providers:
            raise ConfigError(
                ErrorCode.config_error,
                f"{self.services.config.config_path}: [model].provider {model.provider!r} is not a registered "
                f"provider (known: {', '.join(self.services.providers.keys())})",
            )
        if session_id is not None:
            session = await self.get_session(session_id)
            if session.mode != mode:
                raise AgentCoreError(
                    ErrorCode.validation_error,
                    f"session {session_id!r} runs in {session.mode.value!r} mode; cannot start a {mode.value!r} run",
                )
            if mode == RunMode.orchestrator and self.features.tasks is not None:
                await self.features.tasks.check()
        else:
            if mode == RunMode.orchestrator and self.features.tasks is not None:
                await self.features.tasks.check()
            session = await self._new_session(mode)
        async with session.lock:  # the queue decision and the registration are atomic per session
            return await self._register_root_run(session, message, mode, model, output_schema, output_retries)

    async def _register_root_run(
        self,
        session: SessionState,
        message: UserMessage,
        mode: RunMode,
        model: ResolvedModelConfig,
        output_schema: OutputSchema | None = None,
        output_retries: int | None = None,
    ) -> RunState:
        queued = session.busy
        run_id = new_id("run_")
        agent_type = AgentType.orchestrator if mode == RunMode.orchestrator else AgentType.main
        await lifecycle.insert_run_row(
            self.services.storage,
            run_id=run_id,
            session_id=session.session_id,
            agent_id=session.root_agent_id,
            status=RunStatus.queued if queued else RunStatus.pending,
            metadata={
                "mode": mode.value,
                "model": lifecycle.model_meta(model),
                "agent_type": agent_type.value,
            },
        )
        promoted = queued and not session.busy  # the active run ended while the row was written
        if promoted:
            queued = False
        state = RunState(
            run_id=run_id,
            session_id=session.session_id,
            agent_id=session.root_agent_id,
            mode=mode,
            role=AgentRole.orchestrator if mode == RunMode.orchestrator else AgentRole.main,
            agent_type=agent_type,
            status=RunStatus.queued if queued else RunStatus.pending,
            channel=EventChannel(),
            message=message,
            was_queued=queued,
            model=model,
            output_schema=output_schema,
            output_retries=output_retries,
        )
        self.recorder_for(state, session.cursor, root_agent=True)
        self.runs[run_id] = state
        session.live_runs[run_id] = state
        if self.features.memory is not None:
            try:
                self.features.memory.on_run_start(state)
            except Exception:
                log.exception("run-start observer failed for %s", run_id)
        if queued:
            session.queue.append(state)
            await state.recorder.emit(ev.RunQueued(queue_position=len(session.queue), mode=mode.value))
        else:
            session.active = state
            if promoted:
                await self.services.storage.update_run(run_id, status=RunStatus.pending.value)
            state.task = self.tasks.spawn(self._run_root(session, state), name=f"run {run_id}")
        return state

    async def connect_mcp(
        self, state: RunState, *, needed: bool, servers: Sequence[str] | None = None
    ) -> set[str]:
        """Connects the MCP servers a run needs (lazily); returns the failed server ids."""
        mcp = self.services.mcp
        if mcp is None:
            return set()
        failed: set[str] = await mcp.ensure_connected(needed, state.recorder.emit, servers=servers)
        return failed

    def recorder_for(self, state: RunState, cursor: AgentCursor, *, root_agent: bool) -> RunRecorder:
        """Attaches the run's recorder (``lifecycle.attach_recorder`` with this runtime's observers)."""
        return lifecycle.attach_recorder(
            self.services, state, cursor, root_agent=root_agent, observers=self.features.event_observers
        )

    # ---- root runs ----------------------------------------------------------------------------
    async def _run_root(self, session: SessionState, state: RunState) -> None:
        rec = state.recorder
        storage = self.services.storage
        lease = contextlib.AsyncExitStack()
        try:
            # one running root run per session across every process sharing the database (FIFO)
            await hold_session_lease(lease, storage, session.session_id, state.cancel_event)
            if storage.SHARED:  # another process may have moved the session on meanwhile
                record = await storage.get_session(session.session_id)
                session.active_node_id = record.active_node_id if record else None
            if state.was_queued:
                await rec.emit_event(
                    ev.RunDequeued(reason="started"),
                    run_update={"status": RunStatus.pending.value},
                )
            if state.cancel_event.is_set():
                await lifecycle.cancel_before_loop(state, self._interruption(state))
                return
            if storage.SHARED and self.features.engine is None:
                # holding the lease: a process that ran the session may have died since it was loaded
                await recover_before_root_run(self.services, session, live_run_ids=set(self.runs))
            if self.features.engine is not None:
                await self.features.engine.run_root(session, state)
                return
            await self.prepare_root_run(state)
            spec, first_nodes = await self.root_run_spec(session, state)
            await self.execute_agent_run(spec, first_nodes)
        except Exception as exc:
            await lifecycle.fail_before_loop(self.services, state, exc)
        finally:
            try:
                lifecycle.ended_unexpectedly(state)
                session.active_node_id = session.cursor.visible_tip
                if session.active is state:
                    session.active = None
                session.live_runs.pop(state.run_id, None)
                await self._after_run(state)
                self._forget(state)
                self._start_next(session)
            finally:
                await lease.aclose()  # also when cancelled during the clean-up: never keep a session locked

    async def prepare_root_run(self, state: RunState) -> None:
        """Before a root run's loop: the session's Tasks are restored, then its background jobs resumed."""
        if self.features.tasks is not None:
            await self.features.tasks.before_root_run(state)
        if self.features.jobs is not None:
            await self.features.jobs.before_root_run(state)

    async def root_run_spec(
        self, session: SessionState, state: RunState
    ) -> tuple[AgentRunSpec, Callable[[RunScope], Awaitable[None]]]:
        """The :class:`AgentRunSpec` of a root run and the writer of its first nodes (hooks, user message).

        Connects the MCP servers the run needs and aligns the session cursor with the active node.
        """
        rec = state.recorder
        model = state.model
        assert model is not None
        failed_mcp = await self.connect_mcp(state, needed=True)
        effective = self._effective.get(
            self.services.tools.definitions(), self.services.settings, state.role, failed_mcp
        )
        cursor = session.cursor
        if not cursor.truncate_to(session.active_node_id):
            record = await self.services.storage.get_session(session.session_id)
            active = record.active_node_id if record else None
            session.active_node_id = active
            cursor.reset(await self.services.storage.node_path(session.session_id, active) if active else [])
        assert state.message is not None
        user_node_id = new_id("node_")
        spec = AgentRunSpec(
            state=state,
            session=session,
            cursor=cursor,
            model=model,
            effective=effective,
            role=state.role,
            root_agent=True,
            current_user_node_id=user_node_id,
            agent_type=state.agent_type,
            task_board=self.features.task_board_for(state, state.role),
        )

        async def first_nodes(scope: RunScope) -> None:
            assert state.message is not None
            hooks = self.services.hooks
            if not session.session_started:
                session.session_started = True
                resumed = session.active_node_id is not None
                await hooks.session_start(scope=scope, sink=rec, source="resume" if resumed else "new")
            text = text_of(state.message.content)
            await rec.write_node(
                node_id=user_node_id,
                role=MessageRole.user,
                node_type=NodeType.message,
                content=list(state.message.content),
                metadata=dict(state.message.metadata),
                events=[(ev.MessageCreated(text_preview=text[:200]), None)],
                run_update={"start_node_id": user_node_id},
            )
            session.active_node_id = user_node_id
            await hooks.user_prompt_submit(
                scope=scope, sink=rec, prompt=text, message=state.message.model_dump(mode="json")
            )

        return spec, first_nodes

    async def execute_agent_run(
        self, spec: AgentRunSpec, first_nodes: Callable[[RunScope], Awaitable[None]] | None = None
    ) -> LoopOutcome:
        """Runs one agent loop (see :func:`agent_core._runtime.agent_run.execute_agent_run`)."""
        return await execute_agent_run(self.services, self.features, spec, first_nodes)

    @staticmethod
    def _interruption(state: RunState) -> Interruption:
        return Interruption(reason=state.cancel_reason or "cancel_requested")

    async def _after_run(self, state: RunState) -> None:
        if self.features.memory is not None:
            try:
                await self.features.memory.on_run_end(state)
            except Exception:
                log.exception("run-end observer failed for %s", state.run_id)

    def _forget(self, state: RunState) -> None:
        """Drops a terminal root run from :attr:`runs` (which holds live runs only), so a long-lived
        runtime does not keep every finished run, its recorder and its buffers; its handle still works."""
        if state.terminal and self.runs.get(state.run_id) is state:
            del self.runs[state.run_id]

    def _start_next(self, session: SessionState) -> None:
        while session.queue and session.active is None and not self.tasks.closed:
            nxt = session.queue.popleft()
            if nxt.terminal:
                continue
            session.active = nxt
            nxt.status = RunStatus.pending
            nxt.task = self.tasks.spawn(self._run_root(session, nxt), name=f"run {nxt.run_id}")

    # ---- cancellation -------------------------------------------------------------------------
    async def cancel(self, state: RunState, *, reason: str = "cancel_requested") -> CancelResult:
        from agent_core.types._results import CancelResult  # imported on first use (cold start)

        if state.terminal:
            return CancelResult(
                run_id=state.run_id,
                status=state.status,
                cancelled=state.status == RunStatus.cancelled,
                already_terminal=True,
            )
        session = self.sessions.get(state.session_id)
        if state.status == RunStatus.queued and session is not None and state in session.queue:
            session.queue.remove(state)
            state.cancel_reason = reason
            state.cancel_event.set()
            await state.recorder.emit(ev.RunDequeued(reason="cancelled"))
            await lifecycle.cancel_before_loop(state, self._interruption(state))
            session.live_runs.pop(state.run_id, None)
            self._forget(state)
            return CancelResult(run_id=state.run_id, status=state.status, cancelled=True, was_queued=True)
        if not state.cancel_event.is_set():
            state.cancel_reason = state.cancel_reason or reason
            state.cancel_event.set()
            await self._propagate_cancel(state)
        timeout = self.services.settings.runtime.cancel_timeout_ms / 1000
        timed_out = False
        try:
            await asyncio.wait_for(state.done.wait(), timeout)
        except TimeoutError:
            timed_out = True
            with contextlib.suppress(Exception):
                await state.recorder.emit(
                    ev.CancelTimeout(cancel_timeout_ms=self.services.settings.runtime.cancel_timeout_ms),
                )
        return CancelResult(
            run_id=state.run_id,
            status=state.status,
            cancelled=state.status == RunStatus.cancelled,
            timed_out=timed_out,
        )

    async def _propagate_cancel(self, state: RunState) -> None:
        """A run's cancel request reaches its child runs, then its background jobs."""
        children, jobs = self.features.children, self.features.jobs
        try:
            if children is not None:
                await children.on_parent_cancel(state)
        except Exception:
            log.exception("cancelling the child runs of %s failed", state.run_id)
        try:
            if jobs is not None:
                await jobs.on_run_cancel(state)
        except Exception:
            log.exception("cancelling the jobs of %s failed", state.run_id)

    async def close(self) -> None:
        """Cancels queued then active runs, waiting at most ``runtime.cancel_timeout_ms`` overall."""
        self.closing = True
        for session in self.sessions.values():
            for queued in list(session.queue):
                await self.cancel(queued, reason="runtime_closed")
        live = [r for r in self.runs.values() if not r.terminal]
        for run in live:
            if not run.cancel_event.is_set():
                run.cancel_reason = run.cancel_reason or "runtime_closed"
                run.cancel_event.set()
        # also the tasks of runs that are already terminal but still run their run-end observers (memory
        # trigger, ...): storage closes after this returns, so none of them may outlive it (issue 13)
        timeout = self.services.settings.runtime.cancel_timeout_ms / 1000
        await self.tasks.aclose(grace=timeout, bound=2)
        features = self.features
        for feature in (features.children, features.memory, features.compaction, features.telemetry):
            if feature is None:
                continue
            try:
                await feature.close()
            except Exception:
                log.exception("closing %s failed", type(feature).__name__)
