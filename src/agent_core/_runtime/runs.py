"""Starting, queueing, running and cancelling runs (docs/runs.md#starting-a-run, docs/runs.md#the-agent-loop,
docs/runs.md#cancellation).

:class:`RunManager` owns the sessions loaded in this runtime, the per-session FIFO queue of user runs and
the live :class:`RunState` of every run. Root runs go through :meth:`RunManager._run_root`; child runs
(sub/fork/worker/compact) use :meth:`RunManager.execute_agent_run`, which shares the loop driver.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from agent_core._concurrency import TaskOwner
from agent_core._events.stream import EventChannel
from agent_core._ids import new_id, validate_session_id
from agent_core._jsontext import compact_json
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.outcome import LoopOutcome
from agent_core._loop.recorder import RunRecorder
from agent_core._loop.spec import Interruption
from agent_core._media import Prepared, sniff, store_media
from agent_core._runtime import lifecycle
from agent_core._runtime.agent_run import AgentRunSpec, execute_agent_run
from agent_core._runtime.features import RunFeatures
from agent_core._runtime.recovery import recover_before_root_run, recover_session
from agent_core._runtime.services import Services
from agent_core._runtime.session_lease import hold_session_lease
from agent_core._runtime.state import RootRunOptions, RunState, SessionState
from agent_core.config._profiles import resolve_model, resolve_purpose_model
from agent_core.config.loaded import LoadedConfig
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import (
    ConfigError,
    ErrorCode,
    InvalidArgumentError,
    PermissionDeniedError,
    SessionBusyError,
    SessionNotFoundError,
)
from agent_core.tools._effective import EffectiveToolsMemo, adjust_effective
from agent_core.tools.context import RunScope
from agent_core.types import events as ev
from agent_core.types.base import format_ts
from agent_core.types.content import TextBlock, text_of
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
from agent_core.types.permissions import PermissionMode
from agent_core.types.runtime import UserMessage
from agent_core.types.storage import AgentRecord, SessionRecord

if TYPE_CHECKING:
    from agent_core._hooks.callbacks import CallbackHooks
    from agent_core._loop._output import OutputSchema
    from agent_core.types._results import CancelResult

log = logging.getLogger("agent_core._runtime")
RECENT_RUNS = 64
"""Ended root runs kept reachable by id (:meth:`RunManager.root_run`)."""


class RunManager:
    """The sessions loaded in this runtime, their run queues and every live run (docs/runs.md#starting-a-run,
    docs/runs.md#the-agent-loop, docs/runs.md#cancellation).

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
        self._recent: OrderedDict[str, RunState] = OrderedDict()

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
        seen = await self.services.storage.writes_elsewhere()  # before reading: later writes count
        record = await self.services.storage.get_session(session_id)
        if record is None:
            raise SessionNotFoundError(
                ErrorCode.validation_error,
                f"unknown session {session_id!r}",
                details={"session_id": session_id},
            )
        if record.status != SessionStatus.active:
            raise InvalidArgumentError(ErrorCode.validation_error, f"session {session_id!r} is archived")
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
            store_seen=seen,
        )
        await recover_session(self.services, state, live_run_ids=set(self.runs))
        if self.features.team is not None:
            await self.features.team.on_session_loaded(state)
        self.sessions[session_id] = state
        return state

    async def _new_session(
        self,
        mode: RunMode,
        *,
        metadata: dict[str, object] | None = None,
        agent_metadata: dict[str, object] | None = None,
    ) -> SessionState:
        """Creates a session and its root agent (``metadata`` / ``agent_metadata``: extra keys of their
        rows' metadata, e.g. a teammate's link to its lead)."""
        storage = self.services.storage
        seen = await storage.writes_elsewhere()
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
                metadata_json=compact_json({"mode": mode.value, **(metadata or {})}),
                created_at=now,
                updated_at=now,
            ),
            AgentRecord(
                agent_id=agent_id,
                session_id=session_id,
                agent_type=agent_type,
                status=AgentStatus.idle,
                metadata_json=compact_json({"name": name, "mode": mode.value, **(agent_metadata or {})}),
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
            store_seen=seen,
        )
        self.sessions[session_id] = state
        return state

    async def new_session(
        self,
        mode: RunMode,
        *,
        metadata: dict[str, object] | None = None,
        agent_metadata: dict[str, object] | None = None,
    ) -> SessionState:
        """A new, empty session of this project (no run yet): a schedule's firing, a teammate."""
        if self.closing:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is closing")
        return await self._new_session(mode, metadata=metadata, agent_metadata=agent_metadata)

    # ---- start --------------------------------------------------------------------------------
    async def start(
        self,
        message: UserMessage,
        session_id: str | None,
        mode: RunMode,
        output_schema: OutputSchema | None = None,
        output_retries: int | None = None,
        *,
        model_profile: str | None = None,
        max_turns: int | None = None,
        wait_if_busy: bool = True,
        permission_mode: PermissionMode | None = None,
    ) -> RunState:
        """Registers a root run (``output_schema``: the run's structured output; ``model_profile`` a
        ``[model_overrides.<name>]`` profile over ``[model]``; ``max_turns`` the run's turn limit:
        ``AgentRuntime.start``). ``wait_if_busy=False``: ``session_active`` instead when a run of the
        session runs or waits, in this runtime or in another process sharing the store."""
        purpose = "orchestrator" if mode == RunMode.orchestrator else "main"
        model = root_model(self.services.config, purpose, model_profile)
        if model.provider not in self.services.providers:
            raise ConfigError(
                ErrorCode.config_error,
                f"{self.services.config.config_path}: [model].provider {model.provider!r} is not a registered "
                f"provider (known: {', '.join(self.services.providers.keys())})",
            )
        if session_id is not None:
            session = await self.get_session(session_id)
            if session.mode != mode:
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"session {session_id!r} runs in {session.mode.value!r} mode; cannot start a {mode.value!r} run",
                )
            if mode == RunMode.orchestrator and self.features.tasks is not None:
                await self.features.tasks.check()
            if not wait_if_busy:
                await self._refuse_if_busy(session)
        else:
            if mode == RunMode.orchestrator and self.features.tasks is not None:
                await self.features.tasks.check()
            session = await self._new_session(mode)
        if session.profile is not None:
            if session.profile.closed is not None:
                raise InvalidArgumentError(ErrorCode.validation_error, session.profile.closed)
            model = session.profile.model or model
        async with session.lock:  # the queue decision and the registration are atomic per session
            state = await self._register_root_run(
                session,
                message,
                mode,
                model,
                output_schema,
                output_retries,
                max_turns=max_turns,
                permission_mode=permission_mode,
            )
        return state

    async def _refuse_if_busy(self, session: SessionState) -> None:
        sid = session.session_id
        if session.busy:
            raise SessionBusyError(
                ErrorCode.session_active,
                f"session {sid} is busy: a run of this runtime is running it",
                details={"session_id": sid},
            )
        holder = await self.services.storage.session_busy(sid)
        if holder is not None:
            raise SessionBusyError(
                ErrorCode.session_active,
                f"session {sid} is busy: a run of another process ({holder}) is running it",
                details={"session_id": sid, "holder": holder},
            )

    async def wake(self, session_id: str, options: RootRunOptions | None = None) -> tuple[RunState, bool]:
        """The root run that will read the session root agent's inbox and whether it is new: its last
        queued or its active run, else a new wake-up run without a user message, queued FIFO with user
        runs. ``options``: always a new run of that kind (an autonomous teammate's
        claimed step)."""
        session = await self.get_session(session_id)
        if self.closing:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is closing")
        if self.features.engine is not None and not session.busy:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "the temporal engine starts no wake-up runs: the entry is read by the session's next run",
                details={"config_key": "engine.kind"},
            )
        profile = session.profile
        if profile is not None and profile.closed is not None:
            raise InvalidArgumentError(ErrorCode.validation_error, profile.closed)
        purpose = "orchestrator" if session.mode == RunMode.orchestrator else "main"
        model = (profile.model if profile is not None else None) or resolve_purpose_model(
            self.services.config, purpose
        )
        async with session.lock:
            if options is None:
                if session.queue:
                    return session.queue[-1], False
                if session.active is not None and not session.active.terminal:
                    return session.active, False
            state = await self._register_root_run(session, None, session.mode, model, root_options=options)
            return state, True

    async def _register_root_run(
        self,
        session: SessionState,
        message: UserMessage | None,
        mode: RunMode,
        model: ResolvedModelConfig,
        output_schema: OutputSchema | None = None,
        output_retries: int | None = None,
        *,
        root_options: RootRunOptions | None = None,
        max_turns: int | None = None,
        permission_mode: PermissionMode | None = None,
    ) -> RunState:
        """Registers a root run: of a user ``message``, or (``message=None``) a wake-up run that reads the
        root agent's inbox, or a run of ``root_options``."""
        queued = session.busy
        run_id = root_options.run_id if root_options is not None and root_options.run_id else new_id("run_")
        agent_type = AgentType.orchestrator if mode == RunMode.orchestrator else AgentType.main
        metadata: dict[str, object] = {
            "mode": mode.value,
            "model": lifecycle.model_meta(model),
            "agent_type": agent_type.value,
        }
        permission_mode = permission_mode or self.services.settings.permissions.mode
        metadata["permission_mode"] = permission_mode
        if message is None:
            metadata["trigger"] = root_options.trigger if root_options is not None else "inbox"
        if max_turns is not None:
            metadata["max_turns"] = max_turns
        await lifecycle.insert_run_row(
            self.services.storage,
            run_id=run_id,
            session_id=session.session_id,
            agent_id=session.root_agent_id,
            status=RunStatus.queued if queued else RunStatus.pending,
            metadata=metadata,
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
            root_options=root_options,
            max_turns=max_turns,
            permission_mode=permission_mode,
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
        waited_elsewhere = False

        async def wait_elsewhere(position: int) -> None:
            nonlocal waited_elsewhere
            waited_elsewhere = state.was_queued = True
            state.status = RunStatus.queued
            await rec.emit_event(
                ev.RunQueued(queue_position=position, mode=state.mode.value),
                run_update={"status": RunStatus.queued.value},
            )

        try:
            # one running root run per session across every process sharing the database (FIFO)
            await hold_session_lease(lease, storage, session.session_id, state.cancel_event, wait_elsewhere)
            seen = await storage.writes_elsewhere()
            moved = seen != session.store_seen
            session.store_seen = seen
            if moved:  # another process may have moved the session on meanwhile
                record = await storage.get_session(session.session_id)
                session.active_node_id = record.active_node_id if record else None
            if waited_elsewhere and state.cancel_event.is_set():
                await rec.emit(ev.RunDequeued(reason="cancelled"))
            elif state.was_queued:
                state.status = RunStatus.pending
                await rec.emit_event(
                    ev.RunDequeued(reason="started"),
                    run_update={"status": RunStatus.pending.value},
                )
            if state.cancel_event.is_set():
                await lifecycle.cancel_before_loop(state, self._interruption(state))
                return
            if (moved or session.live_elsewhere) and self.features.engine is None:
                # holding the lease: a process that ran the session may have died since it was loaded
                await recover_before_root_run(self.services, session, live_run_ids=set(self.runs))
            if self.features.engine is not None:
                await self.features.engine.run_root(session, state)
                return
            await self.prepare_root_run(state)
            spec, first_nodes = await self.root_run_spec(session, state)
            state.outcome = await self.execute_agent_run(spec, first_nodes)
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
                self._start_next(session)
                await self._after_root_run(session, state)
                self._forget(state)  # only now: closing the runtime waits for this task until here
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
        definitions = self.services.tools.definitions()
        effective = self._effective.get(definitions, self.services.settings, state.role, failed_mcp)
        profile, options = session.profile, state.root_options
        if profile is not None or options is not None:
            effective = adjust_effective(
                effective,
                definitions,
                self.services.settings,
                remove=profile.remove_tools if profile is not None else (),
                add=(profile.extra_tools if profile is not None else frozenset())
                | (options.extra_tools if options is not None else frozenset()),
            )
            if profile is not None and profile.budget is not None:
                state.budget = profile.budget()
        cursor = session.cursor
        if not cursor.truncate_to(session.active_node_id):
            record = await self.services.storage.get_session(session.session_id)
            active = record.active_node_id if record else None
            session.active_node_id = active
            cursor.reset(await self.services.storage.node_path(session.session_id, active) if active else [])
        user_node_id = new_id("node_") if state.message is not None else None
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
            dynamic_sources=list(profile.dynamic_sources) if profile is not None else [],
            workdir=profile.workdir if profile is not None else None,
            task_scope=options.task_scope if options is not None else None,
            task_session_id=options.task_session_id if options is not None else None,
            max_turns=state.max_turns,
        )

        async def first_nodes(scope: RunScope) -> None:
            hooks = self.services.hooks
            if not session.session_started:
                session.session_started = True
                resumed = session.active_node_id is not None
                await hooks.session_start(scope=scope, sink=rec, source="resume" if resumed else "new")
            if state.message is None:  # a wake-up run: its inbox note comes first (``agent_core._inbox``)
                if options is not None and options.first_note is not None:
                    note_id = new_id("node_")
                    await rec.write_node(
                        node_id=note_id,
                        role=MessageRole.user,
                        node_type=NodeType.system_note,
                        content=[TextBlock(text=options.first_note)],
                        metadata={
                            "synthetic": True,
                            "source": options.trigger,
                            **options.first_note_metadata,
                        },
                        run_update={"start_node_id": note_id},
                    )
                    session.active_node_id = note_id
                return
            assert user_node_id is not None
            callbacks = self.services.hook_callbacks
            if callbacks is not None and callbacks.has_prompt_hooks:  # may block or replace the message
                await submit_prompt(callbacks, state, scope)
            inbox = self.features.inbox
            noted = inbox is not None and await inbox.before_first_node(state, effective)
            text = text_of(state.message.content)
            content = list(state.message.content)
            for index, attachment in enumerate(state.message.attachments):
                prepared = Prepared(attachment.data, attachment.mime_type or sniff(attachment.data) or "")
                content.append(
                    await store_media(
                        self.services.artifacts,
                        prepared,
                        filename=attachment.filename or f"attachment-{index + 1}",
                        session_id=state.session_id,
                        kind="attachment",
                        agent_id=state.agent_id,
                        run_id=state.run_id,
                        detail=attachment.detail,
                    )
                )
            await rec.write_node(
                node_id=user_node_id,
                role=MessageRole.user,
                node_type=NodeType.message,
                content=content,
                metadata=dict(state.message.metadata),
                events=[(ev.MessageCreated(text_preview=text[:200]), None)],
                run_update=None if noted else {"start_node_id": user_node_id},
            )
            session.active_node_id = user_node_id
            await hooks.user_prompt_submit(
                scope=scope,
                sink=rec,
                prompt=text,
                message=state.message.model_dump(mode="json", exclude={"attachments"}),
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

    async def _after_root_run(self, session: SessionState, state: RunState) -> None:
        """A root run ended: its own end callback, then the team (a teammate idles, stops or claims the
        next step), then the inbox (a wake-up run for entries that arrived after its last model step)."""
        options = state.root_options
        if options is not None and options.on_ended is not None:
            try:
                await options.on_ended(state)
            except Exception:
                log.exception("the end callback of run %s failed", state.run_id)
        if self.closing:
            return
        for feature in (self.features.team, self.features.inbox):
            if feature is None:
                continue
            try:
                await feature.after_root_run(session, state)
            except Exception:
                log.exception("%s after run %s failed", type(feature).__name__, state.run_id)

    async def _after_run(self, state: RunState) -> None:
        if self.features.memory is not None:
            try:
                await self.features.memory.on_run_end(state)
            except Exception:
                log.exception("run-end observer failed for %s", state.run_id)

    def _forget(self, state: RunState) -> None:
        """Drops a terminal root run from :attr:`runs` (which holds live runs only), so a long-lived
        runtime does not keep every finished run, its recorder and its buffers; its handle still works.
        The last :data:`RECENT_RUNS` ended root runs stay reachable by id (:meth:`root_run`)."""
        if state.terminal and self.runs.get(state.run_id) is state:
            del self.runs[state.run_id]
            self._recent[state.run_id] = state
            while len(self._recent) > RECENT_RUNS:
                self._recent.popitem(last=False)

    def root_run(self, run_id: str) -> RunState | None:
        """A live root run of this runtime, or one of the last ended ones (a wake-up run a delivery
        started may end before its caller asks for it)."""
        state = self.runs.get(run_id) or self._recent.get(run_id)
        return state if state is not None and state.parent is None else None

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
        for feature in (
            features.children,
            features.team,
            features.memory,
            features.compaction,
            features.telemetry,
        ):
            if feature is None:
                continue
            try:
                await feature.close()
            except Exception:
                log.exception("closing %s failed", type(feature).__name__)


async def submit_prompt(callbacks: CallbackHooks, state: RunState, scope: RunScope) -> None:
    """The in-process UserPromptSubmit hooks, before the user message node is written: a replacement
    becomes the run's message (the original is not kept); a block fails the run (``permission_denied``)."""
    assert state.message is not None
    verdict = await callbacks.submit_prompt(scope=scope, sink=state.recorder, message=state.message)
    if verdict.blocked_by is not None:
        raise PermissionDeniedError(
            ErrorCode.permission_denied,
            f"the message was blocked by the UserPromptSubmit hook {verdict.blocked_by}: {verdict.reason}",
            details={"hook": verdict.blocked_by, "reason": verdict.reason, "type": "hook_denied"},
        )
    if verdict.message is not None:
        metadata = {**verdict.message.metadata, "replaced_by_hooks": list(verdict.replaced_by)}
        state.message = verdict.message.model_copy(update={"metadata": metadata})


def root_model(config: LoadedConfig, purpose: str, profile: str | None) -> ResolvedModelConfig:
    """A root run's model: ``[model]``, with the named ``[model_overrides.<profile>]`` over it when given
    (an unknown name is a ``config_error`` naming the table)."""
    if profile is None:
        return resolve_purpose_model(config, purpose)
    return resolve_model(config, purpose=purpose, profile=profile, source_key="model_profile")
