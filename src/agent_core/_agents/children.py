"""The child-run launcher shared by sub, fork and worker runs (docs/multi-agent.md).

:meth:`ChildLauncher.run` is called from an agent-tool handler and returns when the child reached a
terminal state (or was abandoned after a cancel timeout). Contracts:

* Before anything is written (no ``agents``/``runs`` row, no event): the parent must not be cancelled,
  ``allowed_tools`` must pass ``validate_allowed_tools`` for the child role, ``expected_output_schema``
  must be in the core subset (``validation_error``), the model resolves via the definition profile and a
  registered provider (``config_error``), and the limits ``agents.max_children_per_run`` /
  ``max_concurrent_children_per_session`` hold (``child_agent_limit_exceeded``, no queuing). These
  checks and the slot reservation run without awaiting, so parallel calls are admitted in model order.
* The child gets its own agent (one-shot) or reuses ``ChildSpec.agent_id`` (workers), its own run and
  :class:`RunState` (in ``parent.children``, ``session.live_runs`` and ``manager.runs``), its own event
  channel (no buffering before subscription), an effective tool set computed for its role with
  ``requested=allowed_tools``, the ``agent_definition:<id>`` block (``RunState.definition_block``), and a first
  synthetic user node ``<delegated_task>``/``<worker_dispatch>`` on ``ChildSpec.base_path``. It never moves
  ``sessions.active_node_id``.
* Parent-stream summary events go through the parent's recorder: ``child_agent_created``,
  ``child_agent_completed`` / ``child_agent_failed`` / ``child_result_schema_validation_failed``, and the
  cancellation events of :meth:`ChildLauncher.request_cancel` (``child_agent_cancel_requested`` →
  ``child_agent_cancelled`` or, after ``agents.child_cancel_timeout_ms``, ``child_agent_cancel_timeout``;
  nothing is force-killed and a timed-out child keeps running in the background).
* ``child_agent_created`` is emitted only for a new agent; ``ChildSpec.on_admitted`` runs after admission
  and before the rows (workers create their reused agent and announce the dispatch there).
* A child timeout ends the run ``aborted`` with error code ``timeout``. After a timeout or a parent
  cancellation the caller waits for the cancel watcher; the pipeline cancelling the agent-tool handler
  after its grace period does not interrupt that wait or the result bookkeeping (only shutdown does).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.results import (
    build_result,
    output_artifact_ids,
    run_error,
    schema_problems,
    structured_output,
)
from agent_core._agents.spec import ChildOutcome, ChildSpec, RemoteChildRuns
from agent_core._concurrency import TaskOwner, cancel_and_wait, first_of
from agent_core._events.stream import EventChannel
from agent_core._ids import new_id
from agent_core._jsontext import compact_json
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.spec import Interruption
from agent_core._runtime import lifecycle
from agent_core._runtime.agent_run import AgentRunSpec
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState, SessionState
from agent_core.config.model import ModelProfile, ResolvedModelConfig
from agent_core.config.schema import Settings
from agent_core.errors import (
    ChildAgentLimitError,
    ConfigError,
    ErrorCode,
    InternalError,
    InvalidArgumentError,
    OperationCancelledError,
    SchemaError,
)
from agent_core.tools._effective import EffectiveTools, compute_effective_tools, validate_allowed_tools
from agent_core.tools._schema import check_schema
from agent_core.tools.context import RunScope, ToolContext
from agent_core.types import events as ev
from agent_core.types.base import format_ts
from agent_core.types.content import ErrorPayload, TextBlock
from agent_core.types.enums import (
    AgentRole,
    AgentStatus,
    AgentType,
    MessageRole,
    NodeType,
    RunStatus,
)
from agent_core.types.runtime import AgentDefinition, ChildAgentResult
from agent_core.types.storage import AgentRecord

log = logging.getLogger("agent_core._agents")
T = TypeVar("T")

__all__ = ["ChildLauncher", "ChildOutcome", "ChildSpec", "ModelPolicy"]

ModelPolicy = Callable[[AgentDefinition, AgentRole], ModelProfile | dict[str, Any] | None]
"""Internal runtime/SDK policy hook: a partial profile layered over the definition's (it wins)."""
_HIDDEN_ARTIFACT_KINDS = frozenset(
    {"provider_raw", "context_report", "debug", "traceback", "hook_log", "context_degradation"}
)
_ROLE_AGENT_TYPE = {
    AgentRole.sub: AgentType.sub,
    AgentRole.fork: AgentType.fork,
    AgentRole.worker: AgentType.sub,
}


@dataclass(kw_only=True, slots=True)
class _Prepared:
    model: ResolvedModelConfig
    effective: EffectiveTools
    allowed_tools: list[str] | None
    timeout_ms: int
    requested_timeout_ms: int | None


class ChildLauncher:
    """Starts child runs for agent tools and propagates cancellation from parents."""

    def __init__(self, manager: RunManager, registry: AgentDefinitionRegistry) -> None:
        self.manager = manager
        self.registry = registry
        self.model_policy: ModelPolicy | None = None
        self.remote: RemoteChildRuns | None = None
        """Where the children it handles execute instead of in this process (temporal workers)."""
        self.tasks = TaskOwner("child runs")
        """The child runs' tasks, their cancel watchers and the result assembly the agent tools await."""

    @property
    def settings(self) -> Settings:
        return self.manager.services.settings

    # ---- admission ----------------------------------------------------------------------------
    def _prepare(self, spec: ChildSpec) -> _Prepared:
        services = self.manager.services
        definitions = services.tools.definitions()
        allowed = None
        if spec.allowed_tools is not None:
            allowed = validate_allowed_tools(
                spec.allowed_tools,
                definitions,
                services.settings,
                spec.role,
                worker_entry_tools=spec.worker_entry_tools,
            )
        if spec.expected_output_schema is not None:
            try:
                check_schema(spec.expected_output_schema, where="expected_output_schema")
            except SchemaError as exc:
                raise InvalidArgumentError(
                    ErrorCode.validation_error, f"unsupported expected_output_schema: {exc.message}"
                ) from exc
        agents = services.settings.agents
        requested = spec.timeout_ms
        if requested is not None and (isinstance(requested, bool) or requested < 1):
            raise InvalidArgumentError(ErrorCode.validation_error, "timeout_ms must be an integer >= 1")
        timeout_ms = (
            min(requested, agents.default_child_timeout_ms) if requested else agents.default_child_timeout_ms
        )
        policy = self.model_policy(spec.definition, spec.role) if self.model_policy else None
        model = self.registry.resolve_model(spec.definition, purpose=spec.role.value, policy=policy)
        if model.provider not in services.providers:
            raise ConfigError(
                ErrorCode.config_error,
                f"agent definition {spec.definition.agent_definition_id!r}: model provider "
                f"{model.provider!r} is not registered",
            )
        effective = compute_effective_tools(
            definitions,
            services.settings,
            spec.role,
            requested=allowed,
            worker_entry_tools=spec.worker_entry_tools,
        )
        return _Prepared(
            model=model,
            effective=effective,
            allowed_tools=allowed,
            timeout_ms=timeout_ms,
            requested_timeout_ms=requested,
        )

    def _check_limits(self, parent: RunState, session: SessionState) -> None:
        agents = self.settings.agents
        per_run = sum(1 for c in parent.children.values() if _counts(c))
        if per_run >= agents.max_children_per_run:
            raise ChildAgentLimitError(
                ErrorCode.child_agent_limit_exceeded,
                f"run {parent.run_id} already has {per_run} active child run(s) "
                f"(agents.max_children_per_run = {agents.max_children_per_run})",
                details={"limit": "max_children_per_run", "value": agents.max_children_per_run},
            )
        per_session = sum(1 for r in session.live_runs.values() if r.parent is not None and _counts(r))
        if per_session >= agents.max_concurrent_children_per_session:
            raise ChildAgentLimitError(
                ErrorCode.child_agent_limit_exceeded,
                f"session {session.session_id} already has {per_session} active child run(s) "
                f"(agents.max_concurrent_children_per_session = {agents.max_concurrent_children_per_session})",
                details={
                    "limit": "max_concurrent_children_per_session",
                    "value": agents.max_concurrent_children_per_session,
                },
            )

    # ---- the run ------------------------------------------------------------------------------
    async def run(self, ctx: ToolContext, spec: ChildSpec) -> ChildOutcome:
        """Validates, starts and awaits one child run (raises ``AgentCoreError`` before any start)."""
        manager = self.manager
        parent = manager.runs.get(ctx.run_id)
        session = manager.sessions.get(ctx.session_id)
        if parent is None or session is None:
            raise InternalError(ErrorCode.internal_error, f"calling run {ctx.run_id!r} is not live")
        if parent.cancel_event.is_set() or manager.closing:
            raise OperationCancelledError(
                ErrorCode.cancelled, "the calling run is being cancelled; no child starts"
            )
        prepared = self._prepare(spec)
        if spec.attach:
            return await self._attach(ctx, parent, session, spec, prepared)
        self._check_limits(parent, session)
        state = self._register(parent, session, spec, prepared)
        created = ev.ChildAgentCreated(
            child_agent_id=state.agent_id,
            child_run_id=state.run_id,
            agent_type=state.agent_type.value,
            purpose=spec.purpose,
            agent_definition_id=spec.definition.agent_definition_id,
            definition_source=spec.definition.source,
            tool_call_id=spec.tool_call_id,
            fork_from_node_id=spec.fork_from_node_id if spec.fork_from_node_id is not None else ev.ABSENT,
        )
        try:
            if spec.on_admitted is not None:
                await spec.on_admitted(state)
            await self._write_rows(state, parent, spec, prepared)
            if spec.agent_id is None:
                await self._parent_emit(parent, created, spec.tool_call_id)
        except BaseException:
            self._unregister(state, parent, session)
            raise
        state.status = RunStatus.pending
        remote = self.remote if self.remote is not None and self.remote.handles(spec) else None
        execution = (
            self._execute_remote(remote, state, parent, session, spec)
            if remote is not None
            else self._execute(state, parent, session, spec, prepared)
        )
        state.task = self.tasks.spawn(execution, name=f"child run {state.run_id}")
        timed_out = await self._await_child(ctx, state, prepared.timeout_ms)
        return await self._uninterrupted(self._finish(state, parent, spec, prepared, timed_out))

    async def _attach(
        self, ctx: ToolContext, parent: RunState, session: SessionState, spec: ChildSpec, prepared: _Prepared
    ) -> ChildOutcome:
        """Awaits the child a previous attempt of this tool step started (``ChildSpec.attach``)."""
        remote = self.remote
        if remote is None or not remote.handles(spec):
            raise InternalError(ErrorCode.internal_error, "only a remote child run can be attached to")
        state = self._register(parent, session, spec, prepared)
        try:
            if spec.on_admitted is not None:
                await spec.on_admitted(state)
        except BaseException:
            self._unregister(state, parent, session)
            raise
        state.status = RunStatus.running
        state.task = self.tasks.spawn(
            self._execute_remote(remote, state, parent, session, spec), name=f"child run {state.run_id}"
        )
        timed_out = await self._await_child(ctx, state, prepared.timeout_ms)
        return await self._uninterrupted(self._finish(state, parent, spec, prepared, timed_out))

    async def _uninterrupted(self, work: Awaitable[T]) -> T:
        """``work``'s result, awaited to the end even if the handler is cancelled meanwhile: the parent's
        tool pipeline cancels an agent-tool handler after its grace period, when the child was already
        asked to stop, and the handler's answer is the child's outcome. Only runtime shutdown interrupts
        (a coroutine is then cancelled; a future such as a cancel watcher is left to :attr:`tasks`)."""
        future = work if isinstance(work, asyncio.Future) else self.tasks.spawn(work)
        while not future.done():
            try:
                await asyncio.wait({future})
            except asyncio.CancelledError:
                if self.manager.closing:
                    if future is not work:
                        await cancel_and_wait(future)
                    raise
        return future.result()

    async def close(self) -> None:
        """Runtime close (after the runs were cancelled): cancels and awaits what is still running."""
        await self.tasks.aclose(bound=2.0)  # a task ignoring its cancellation longer is logged and left

    def _register(
        self, parent: RunState, session: SessionState, spec: ChildSpec, prepared: _Prepared
    ) -> RunState:
        agent_id = spec.agent_id or new_id("agent_")
        run_id = spec.run_id or new_id("run_")
        state = RunState(
            run_id=run_id,
            session_id=parent.session_id,
            agent_id=agent_id,
            mode=parent.mode,
            role=spec.role,
            agent_type=_ROLE_AGENT_TYPE.get(spec.role, AgentType.sub),
            status=RunStatus.pending,
            channel=EventChannel(buffer_before_subscribe=False),
            purpose=spec.purpose,
            permission_mode=parent.permission_mode,
            parent=parent,
            model=prepared.model,
            cursor=AgentCursor(agent_id, spec.base_path),
            launched_by=self,
            parent_tool_call_id=spec.tool_call_id,
            definition_block=self.registry.definition_block(spec.definition),
        )
        assert state.cursor is not None
        self.manager.recorder_for(state, state.cursor, root_agent=False)
        parent.children[run_id] = state
        session.live_runs[run_id] = state
        self.manager.runs[run_id] = state
        return state

    def _unregister(self, state: RunState, parent: RunState, session: SessionState) -> None:
        parent.children.pop(state.run_id, None)
        session.live_runs.pop(state.run_id, None)
        self.manager.runs.pop(state.run_id, None)

    async def _write_rows(
        self, state: RunState, parent: RunState, spec: ChildSpec, prepared: _Prepared
    ) -> None:
        storage = self.manager.services.storage
        now = format_ts()
        definition = spec.definition
        if spec.agent_id is None:
            agent_meta = {
                "name": definition.name,
                "purpose": spec.purpose,
                "agent_definition_id": definition.agent_definition_id,
                "definition_source": definition.source,
                "mode": parent.mode.value,
                **spec.agent_metadata,
            }
            await storage.insert_agent(
                AgentRecord(
                    agent_id=state.agent_id,
                    session_id=state.session_id,
                    parent_agent_id=parent.agent_id,
                    agent_type=state.agent_type,
                    created_by_run_id=parent.run_id,
                    fork_from_node_id=spec.fork_from_node_id,
                    status=AgentStatus.running,
                    metadata_json=compact_json(agent_meta),
                    created_at=now,
                    updated_at=now,
                )
            )
        else:
            await storage.update_agent(state.agent_id, status=AgentStatus.running.value)
        run_meta: dict[str, Any] = {
            "mode": parent.mode.value,
            "agent_type": state.agent_type.value,
            "agent_role": spec.role.value,
            "purpose": spec.purpose,
            "parent_agent_id": parent.agent_id,
            "parent_run_id": parent.run_id,
            "tool_call_id": spec.tool_call_id,
            "agent_definition_id": definition.agent_definition_id,
            "definition_source": definition.source,
            "model": lifecycle.model_meta(prepared.model),
            "effective_tools": sorted(prepared.effective.names),
            "allowed_tools": prepared.allowed_tools,
            "timeout_ms": prepared.timeout_ms,
            "permission_mode": parent.permission_mode,
            **spec.run_metadata,
        }
        if prepared.requested_timeout_ms is not None and prepared.requested_timeout_ms > prepared.timeout_ms:
            run_meta["requested_timeout_ms"] = prepared.requested_timeout_ms
            run_meta["timeout_clamped"] = True
        await lifecycle.insert_run_row(
            storage,
            run_id=state.run_id,
            session_id=state.session_id,
            agent_id=state.agent_id,
            status=RunStatus.pending,
            metadata=run_meta,
        )

    async def _execute(
        self, state: RunState, parent: RunState, session: SessionState, spec: ChildSpec, prepared: _Prepared
    ) -> None:
        rec = state.recorder
        cursor = state.cursor
        assert cursor is not None
        node_id = new_id("node_")
        run_spec = AgentRunSpec(
            state=state,
            session=session,
            cursor=cursor,
            model=prepared.model,
            effective=prepared.effective,
            role=spec.role,
            root_agent=False,
            current_user_node_id=node_id,
            parent_agent_id=parent.agent_id,
            parent_run_id=parent.run_id,
            task_scope=spec.task_scope,
            workdir=spec.workdir,
            purpose=spec.purpose,
            agent_type=state.agent_type,
            task_board=spec.task_board,
            interruption=lambda: _interruption(state),
            inherit_from=_prefix_parent(parent, session, spec, prepared),
        )

        async def first_nodes(_scope: RunScope) -> None:
            metadata = {
                "synthetic": True,
                "source": "agent_tool",
                "parent_agent_id": parent.agent_id,
                "parent_run_id": parent.run_id,
                "tool_call_id": spec.tool_call_id,
                "agent_definition_id": spec.definition.agent_definition_id,
                **spec.first_node_metadata,
            }
            await rec.write_node(
                node_id=node_id,
                role=MessageRole.user,
                node_type=NodeType.message,
                content=[TextBlock(text=spec.first_text)],
                metadata=metadata,
                events=[(ev.MessageCreated(text_preview=spec.first_text[:200]), None)],
                run_update={"start_node_id": node_id},
            )

        try:
            if state.cancel_event.is_set():
                await lifecycle.cancel_before_loop(state, _interruption(state))
            else:
                state.outcome = await self.manager.execute_agent_run(run_spec, first_nodes)
        except Exception as exc:
            await lifecycle.fail_before_loop(self.manager.services, state, exc)
        finally:
            lifecycle.ended_unexpectedly(state)  # the task itself was cancelled (runtime shutdown)
            session.live_runs.pop(state.run_id, None)
            if state.finalized and spec.agent_id is None:
                with contextlib.suppress(Exception):
                    await self.manager.services.storage.update_agent(
                        state.agent_id, status=_agent_status(state.status).value
                    )

    async def _execute_remote(
        self,
        remote: RemoteChildRuns,
        state: RunState,
        parent: RunState,
        session: SessionState,
        spec: ChildSpec,
    ) -> None:
        """The child's task when it executes elsewhere: ends with the run's stored outcome."""
        try:
            await remote.execute(state, parent, spec)
        except Exception as exc:
            await lifecycle.fail_before_loop(self.manager.services, state, exc)
        finally:
            lifecycle.ended_unexpectedly(state)
            session.live_runs.pop(state.run_id, None)

    async def _await_child(self, ctx: ToolContext, state: RunState, timeout_ms: int) -> bool:
        """Waits for the child; on timeout or parent cancellation requests its cancel and waits for the
        cancel watcher (bounded by ``agents.child_cancel_timeout_ms``). Returns whether it timed out."""
        interrupted = False
        async with TaskOwner() as waiters:
            done = waiters.spawn(state.done.wait())
            try:
                await first_of(done, ctx.cancel_event, timeout_ms / 1000)
            except asyncio.CancelledError:
                interrupted = True
        if state.terminal:
            return False
        parent_cancel = interrupted or ctx.cancel_event.is_set()
        if not parent_cancel:
            state.timed_out = True
        watcher = self.request_cancel(state, "parent_cancelled" if parent_cancel else "timeout")
        await self._uninterrupted(watcher)
        return not parent_cancel

    # ---- cancellation -------------------------------------------------------------------------
    def request_cancel(self, child: RunState, reason: str) -> asyncio.Future[None]:
        """Sets the child's cancel request (idempotent) and starts its watcher, which emits
        ``child_agent_cancel_requested`` then ``child_agent_cancelled`` or ``child_agent_cancel_timeout``.

        While a watcher is pending it is returned; a child still running after its watcher timed out gets
        a new request (e.g. a Task-level cancel of a worker abandoned after its own timeout)."""
        watcher = child.cancel_watcher
        if watcher is not None and (not watcher.done() or child.terminal):
            return watcher
        child.cancel_reason = child.cancel_reason or reason
        child.cancel_event.set()
        future: asyncio.Future[None] = self.tasks.spawn(self._watch_cancel(child, reason))
        child.cancel_watcher = future
        return future

    async def _watch_cancel(self, child: RunState, reason: str) -> None:
        parent = child.parent
        if parent is None:
            return
        ids = (child.agent_id, child.run_id)
        await self._parent_emit(parent, ev.ChildAgentCancelRequested(*ids, reason=reason))
        limit_ms = self.settings.agents.child_cancel_timeout_ms
        try:
            await asyncio.wait_for(child.done.wait(), limit_ms / 1000)
        except TimeoutError:
            await self._parent_emit(
                parent, ev.ChildAgentCancelTimeout(*ids, child_cancel_timeout_ms=limit_ms)
            )
            return
        await self._parent_emit(parent, ev.ChildAgentCancelled(*ids))

    async def on_parent_cancel(self, parent: RunState) -> None:
        """``RunFeatures.children``: cancel requests to every active child this launcher started."""
        for child in list(parent.children.values()):
            if not child.terminal and child.launched_by is self:
                self.request_cancel(child, "parent_cancelled")

    async def _parent_emit(
        self,
        parent: RunState,
        event: ev.EventPayload,
        tool_call_id: str | None = None,
    ) -> None:
        try:
            await parent.recorder.emit(event, tool_call_id=tool_call_id)
        except Exception:
            log.warning("could not emit %s on run %s", event.event_type.value, parent.run_id, exc_info=True)

    # ---- result -------------------------------------------------------------------------------
    async def _finish(
        self, state: RunState, parent: RunState, spec: ChildSpec, prepared: _Prepared, timed_out: bool
    ) -> ChildOutcome:
        if spec.on_ended is not None and state.terminal:
            await spec.on_ended(state)
        outcome = state.outcome
        run_status = (
            state.status if state.terminal else (RunStatus.aborted if timed_out else RunStatus.cancelled)
        )
        final_text = outcome.final_text if outcome is not None else ""
        output = structured_output(final_text) if run_status == RunStatus.completed else None
        error = run_error(
            run_status,
            state.error,
            timed_out=timed_out,
            end_reason=state.end_reason.value if state.end_reason else None,
        )
        metadata: dict[str, Any] = {
            "agent_definition_id": spec.definition.agent_definition_id,
            "model": {
                "provider": prepared.model.provider,
                "name": prepared.model.name,
                "profile": prepared.model.profile,
            },
            "end_reason": state.end_reason.value if state.end_reason else None,
            "turn_count": outcome.turn_count if outcome is not None else 0,
            "usage": outcome.usage.model_dump() if outcome is not None else None,
        }
        result = build_result(
            run_status=run_status,
            final_text=final_text,
            output=output,
            error=error,
            artifacts=await self._artifacts(state, output),
            metadata=metadata,
            step_id=spec.step_id(state) if spec.step_id else None,
        )
        problems: list[dict[str, str]] = []
        if error is None and spec.expected_output_schema is not None:
            problems = self.manager.services.redactor.value(
                schema_problems(spec.expected_output_schema, output)
            )
            if problems:
                result = result.model_copy(update={"status": "failed"})
                error = ErrorPayload(
                    code=ErrorCode.schema_error,
                    message="the child's structured output does not match expected_output_schema",
                    details={"errors": problems},
                )
        state.child_result = result
        ids = (state.agent_id, state.run_id)
        if problems:
            await self._parent_emit(parent, ev.ChildResultSchemaValidationFailed(*ids, errors=problems))
        if error is None:
            completed = ev.ChildAgentCompleted(*ids, status=result.status, summary=result.summary)
            await self._parent_emit(parent, completed, spec.tool_call_id)
        elif error.code != ErrorCode.cancelled:
            failed = ev.ChildAgentFailed(*ids, error=error.model_dump(mode="json"), summary=result.summary)
            await self._parent_emit(parent, failed, spec.tool_call_id)
        elif state.cancel_watcher is None:
            await self._parent_emit(parent, ev.ChildAgentCancelled(*ids), spec.tool_call_id)
        await self._store_result(state, spec, result)
        return ChildOutcome(state=state, result=result, error=error, schema_errors=problems)

    async def _artifacts(self, state: RunState, output: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        storage = self.manager.services.storage
        refs: list[dict[str, Any]] = []
        seen: set[str] = set()
        try:
            records = await storage.list_artifacts(run_id=state.run_id)
            for record in records:
                kind = json.loads(record.metadata_json or "{}").get("kind")
                if kind in _HIDDEN_ARTIFACT_KINDS:
                    continue
                refs.append(_artifact_ref(record.artifact_id, record.summary, record.mime_type))
                seen.add(record.artifact_id)
            for artifact_id in output_artifact_ids(output):
                if artifact_id in seen:
                    continue
                listed = await storage.get_artifact(artifact_id)
                if listed is not None and listed.session_id == state.session_id:
                    refs.append(_artifact_ref(artifact_id, listed.summary, listed.mime_type))
                    seen.add(artifact_id)
        except Exception:
            log.warning("could not list the artifacts of child run %s", state.run_id, exc_info=True)
        return refs

    async def _store_result(self, state: RunState, spec: ChildSpec, result: ChildAgentResult) -> None:
        storage = self.manager.services.storage
        try:
            if spec.agent_id is None:
                status = _agent_status(state.status) if state.terminal else _agent_status_for(result)
                await storage.update_agent(
                    state.agent_id, status=status.value, result_json=result.model_dump_json()
                )
            else:
                row = await storage.get_run(state.run_id)
                meta = json.loads(row.metadata_json or "{}") if row is not None else {}
                meta["result"] = result.model_dump(mode="json")
                await storage.update_run(state.run_id, metadata_json=compact_json(meta))
                await storage.update_agent(state.agent_id, status=AgentStatus.idle.value)
        except Exception:
            log.warning("could not store the result of child run %s", state.run_id, exc_info=True)
        state.finalized = True


# ---------------------------------------------------------------------------------------------------
# Helpers


def _counts(run: RunState) -> bool:
    """Active child runs counted by the limits (compact forks never count)."""
    return not run.terminal and run.role != AgentRole.compact


def _prefix_parent(
    parent: RunState, session: SessionState, spec: ChildSpec, prepared: _Prepared
) -> AgentCursor | None:
    """The cursor whose last request a sub-agent's or fork's requests start with: its parent's, for a child
    with its default tools (one narrowed by ``allowed_tools`` is shown only those) on the parent's model
    (a provider's cache is per model). Workers keep prompts of their own (their agents outlive a
    dispatch)."""
    if spec.role not in (AgentRole.fork, AgentRole.sub) or prepared.allowed_tools is not None:
        return None
    cursor = parent.cursor or (session.cursor if parent.agent_id == session.root_agent_id else None)
    if parent.model is None or cursor is None:
        return None
    mine, theirs = prepared.model, parent.model
    same = (mine.provider, mine.base_url, mine.name) == (theirs.provider, theirs.base_url, theirs.name)
    return cursor if same else None


def _interruption(state: RunState) -> Interruption:
    if state.timed_out:
        error = ErrorPayload(code=ErrorCode.timeout, message="the child run exceeded its timeout_ms")
        return Interruption(status=RunStatus.aborted, reason="timeout", error=error)
    return Interruption(reason=state.cancel_reason or "cancel_requested")


def _agent_status(status: RunStatus) -> AgentStatus:
    if status == RunStatus.completed:
        return AgentStatus.completed
    if status == RunStatus.cancelled:
        return AgentStatus.cancelled
    return AgentStatus.failed


def _agent_status_for(result: ChildAgentResult) -> AgentStatus:
    return AgentStatus.cancelled if result.status == "cancelled" else AgentStatus.failed


def _artifact_ref(artifact_id: str, summary: str | None, mime_type: str | None) -> dict[str, Any]:
    ref: dict[str, Any] = {"artifact_id": artifact_id}
    if summary:
        ref["summary"] = summary
    if mime_type:
        ref["mime_type"] = mime_type
    return ref
