"""A worker's live run contexts: the loop of each run it executes, rebuilt from the store on a miss.

A run's steps usually land on the worker that ran the previous one, which keeps the run's
:class:`LoopSpec` and :class:`LoopState` (recorder, prompt caches, limits) in memory, so the steps behave
exactly like the local loop. When a step lands elsewhere (its worker died, or another one picked it up),
the context is rebuilt from the shared store — session, active path, run row — and the
:class:`~agent_core.engine.temporal._payloads.Checkpoint` the workflow carries restores the loop state.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core._concurrency import TaskOwner
from agent_core._events.stream import EventChannel
from agent_core._loop._limits import Breach, RepeatState
from agent_core._loop.cursor import AgentCursor
from agent_core._loop.driver import ModelTurn
from agent_core._loop.spec import LoopSpec, LoopState
from agent_core._runtime.agent_run import prepare_agent_loop
from agent_core._runtime.runs import RunManager, root_model
from agent_core._runtime.state import RunState, SessionState
from agent_core._storage.live import LiveChannel
from agent_core.engine.temporal._live import LivePublisher
from agent_core.engine.temporal._payloads import CallResult, Checkpoint
from agent_core.engine.temporal._structured import RETRIES_KEY, output_schema_of, restore_attempts
from agent_core.engine.temporal._worker_runs import is_worker_run, worker_run_loop
from agent_core.errors import (
    ErrorCode,
    InternalError,
    NotFoundError,
    SessionNotFoundError,
)
from agent_core.permissions._modes import stored_permission_mode
from agent_core.tools._pipeline import StagedTurn
from agent_core.types.content import ToolCallBlock, ToolResultBlock, text_of
from agent_core.types.enums import AgentRole, AgentType, EndReason, MessageRole, RunMode, RunStatus
from agent_core.types.model import ModelCompleted, StopReason, ToolCall, Usage
from agent_core.types.runtime import Node, UserMessage
from agent_core.types.storage import RunRecord
from agent_core.types.tools import ToolResult

KEPT_SESSIONS = 512
"""How many sessions' cursors a worker keeps between their runs."""


@dataclass(eq=False, slots=True)
class RunContext:
    """One run as this worker executes it."""

    session: SessionState
    state: RunState
    loop: LoopSpec
    loop_state: LoopState
    tools: StagedTools | None = None
    """The answer's tool calls while their activities run on this worker."""


@dataclass(eq=False, slots=True)
class StagedTools:
    """The tool calls of one answer staged on this worker (``plan_id`` names them in the workflow);
    ``arrived[i]`` is set when call ``i``'s activity reached the worker; ``running[i]`` is call ``i``
    while it runs here (a retried attempt of the call waits for it instead of running it again)."""

    plan_id: str
    calls: list[ToolCall]
    staged: StagedTurn
    arrived: list[asyncio.Event]
    running: dict[int, asyncio.Future[CallResult]] = field(default_factory=dict)
    assistant_node_id: str = ""
    """The answer whose calls these are (with the call id, the key of a call's claim in the store)."""


class RunContexts:
    """The run contexts of one worker process, keyed by run id."""

    def __init__(self, manager: RunManager, live: LiveChannel | None = None) -> None:
        self.manager = manager
        self.live = live
        """The storage backend's live channel: a root run's deltas reach the runtime that started it."""
        self._contexts: dict[str, RunContext] = {}
        self.tasks = TaskOwner("live publishing")
        """The runs' live flushes (short: each ends once its events are published)."""
        self._cursors: OrderedDict[str, AgentCursor] = OrderedDict()
        """The path (and prompt caches) each session had when its last run on this worker ended, by
        session id; reused by the session's next run here when the store's active node is its tip."""

    def cached(self, run_id: str) -> RunContext | None:
        return self._contexts.get(run_id)

    def drop(self, run_id: str) -> None:
        ctx = self._contexts.pop(run_id, None)
        if ctx is not None:
            if ctx.state.agent_id == ctx.session.root_agent_id:  # a root run: the session's own path
                self._keep_cursor(ctx.session)
            if self.manager.runs.get(run_id) is ctx.state:  # a dispatching side's state stays
                del self.manager.runs[run_id]
            if ctx.session.live_runs.get(run_id) is ctx.state:
                del ctx.session.live_runs[run_id]
            if ctx.session.active is ctx.state:
                ctx.session.active = None

    def abandon(self) -> None:
        """Forgets every run (worker shutdown): closing the runtime then cancels none of them — they
        continue on another worker."""
        for run_id in list(self._contexts):
            self.drop(run_id)

    async def open(
        self,
        run_id: str,
        session_id: str,
        checkpoint: Checkpoint,
        message: UserMessage | None = None,
        *,
        session_start: bool = False,
    ) -> RunContext:
        """The run's context: the cached one, else rebuilt from the store with ``checkpoint`` applied.

        With ``message`` (the run's first step) the run's ``loop_started`` and first nodes are written
        unless the store already has them (a retried first step); ``session_start``: they begin with the
        SessionStart hooks.
        """
        ctx = self._contexts.get(run_id)
        if ctx is not None:
            return ctx
        storage = self.manager.services.storage
        run = await storage.get_run(run_id)
        if run is None or run.session_id != session_id:
            raise NotFoundError(
                ErrorCode.validation_error, f"unknown run {run_id!r} in session {session_id!r}"
            )
        meta = json.loads(run.metadata_json or "{}")
        if is_worker_run(meta):  # a dispatched worker run (a child workflow on its pool's queue)
            return await self._open_worker_run(run, meta, checkpoint, message)
        session = await self._load_session(session_id)
        session.session_started = not session_start
        mode = RunMode(meta.get("mode", RunMode.normal.value))
        started = run.start_node_id is not None
        if message is None and not started:
            raise InternalError(
                ErrorCode.internal_error, f"run {run_id!r} has no first nodes to continue from"
            )
        state = RunState(
            run_id=run_id,
            session_id=session_id,
            agent_id=run.agent_id,
            mode=mode,
            role=AgentRole.orchestrator if mode == RunMode.orchestrator else AgentRole.main,
            agent_type=AgentType(meta.get("agent_type", AgentType.main.value)),
            status=RunStatus.pending,
            channel=EventChannel(buffer_before_subscribe=False),
            message=message or UserMessage(content="(continued)"),
            output_schema=output_schema_of(meta),
            output_retries=meta.get(RETRIES_KEY),
            permission_mode=stored_permission_mode(meta, self.manager.services.settings),
            max_turns=meta.get("max_turns"),
        )
        purpose = "orchestrator" if mode == RunMode.orchestrator else "main"
        profile = (meta.get("model") or {}).get("profile")  # AgentRuntime.start(model_profile=...)
        state.model = root_model(
            self.manager.services.config, purpose, profile if isinstance(profile, str) else None
        )
        recorder = self.manager.recorder_for(state, session.cursor, root_agent=True)
        if self.live is not None:
            recorder.forward = LivePublisher(self.live, run_id, self.tasks)
        self.manager.runs[run_id] = state
        session.live_runs[run_id] = state
        session.active = state
        if not started:
            await self.manager.prepare_root_run(state)
        spec, first_nodes = await self.manager.root_run_spec(session, state)
        loop = await prepare_agent_loop(
            self.manager.services, self.manager.features, spec, first_nodes, started=started
        )
        loop_state = LoopState()
        restore(loop, loop_state, checkpoint)
        restore_attempts(loop, run_id)
        ctx = RunContext(session=session, state=state, loop=loop, loop_state=loop_state)
        self._contexts[run_id] = ctx
        return ctx

    async def _open_worker_run(
        self, run: RunRecord, meta: dict[str, Any], checkpoint: Checkpoint, message: UserMessage | None
    ) -> RunContext:
        session = self.manager.sessions.get(run.session_id) or await self._load_session(run.session_id)
        state, loop = await worker_run_loop(self.manager, session, run, meta, message)
        self.manager.runs.setdefault(run.run_id, state)
        session.live_runs.setdefault(run.run_id, state)
        assert state.cursor is not None
        loop_state = LoopState()
        restore(loop, loop_state, checkpoint)
        ctx = RunContext(session=session, state=state, loop=loop, loop_state=loop_state)
        self._contexts[run.run_id] = ctx
        return ctx

    async def _load_session(self, session_id: str) -> SessionState:
        """The session as stored now (another worker may have moved it); no crash recovery runs here:
        the engine continues the session's live run instead of closing it."""
        storage = self.manager.services.storage
        record = await storage.get_session(session_id)
        if record is None:
            raise SessionNotFoundError(
                ErrorCode.validation_error,
                f"unknown session {session_id!r}",
                details={"session_id": session_id},
            )
        root = await storage.get_agent(record.root_agent_id)
        mode = RunMode.orchestrator if root and root.agent_type == AgentType.orchestrator else RunMode.normal
        cursor = self._cursors.pop(session_id, None)
        if cursor is None or cursor.agent_id != record.root_agent_id or cursor.tip != record.active_node_id:
            # not kept, or another worker moved the session since: read its path (a node's path to the
            # root never changes, so a kept cursor whose tip is the active node holds the stored path)
            path = await storage.node_path(session_id, record.active_node_id) if record.active_node_id else []
            cursor = AgentCursor(record.root_agent_id, path)
        session = SessionState(
            session_id=session_id,
            mode=mode,
            root_agent_id=record.root_agent_id,
            cwd=record.cwd,
            cursor=cursor,
            active_node_id=record.active_node_id,
            session_started=True,  # the starting runtime decides (RunInput.session_start)
        )
        self.manager.sessions[session_id] = session
        return session

    def _keep_cursor(self, session: SessionState) -> None:
        """Keeps the session's cursor for its next run on this worker (the most recent ``KEPT_SESSIONS``)."""
        self._cursors[session.session_id] = session.cursor
        self._cursors.move_to_end(session.session_id)
        while len(self._cursors) > KEPT_SESSIONS:
            self._cursors.popitem(last=False)


def checkpoint(ctx: RunContext) -> Checkpoint:
    """The loop state to hand to the next step (small: counters, usage, limits; no content)."""
    st, limits = ctx.loop_state, ctx.loop.limits
    budget: dict[str, Any] = {}
    repeat: dict[str, Any] = {}
    if limits is not None:
        b = limits.budget
        budget = {
            "tokens": b.tokens,
            "tool_calls": b.tool_calls,
            "cost_usd": b.cost_usd,
            "elapsed_ms": b.elapsed_ms(),
        }
        if limits.repeat is not None:
            state = limits.repeat.snapshot()
            repeat = {"last": state.last, "streak": state.streak, "warned": list(state.warned)}
    return Checkpoint(
        turns=st.turns,
        continuations=st.continuations,
        continued_text=st.continued_text,
        stop_denials=st.stop_denials,
        usages=[u.model_dump(mode="json") for u in st.usages],
        usage_models=list(st.usage_models),
        final=_breach_dump(st.final),
        final_node_id=st.final_node_id,
        budget=budget,
        repeat=repeat,
        tip_node_id=ctx.loop.recorder.cursor.tip,
    )


def restore(loop: LoopSpec, st: LoopState, cp: Checkpoint) -> None:
    st.turns = cp.turns
    st.continuations = cp.continuations
    st.continued_text = cp.continued_text
    st.stop_denials = cp.stop_denials
    st.usages = [Usage.model_validate(u) for u in cp.usages]
    st.usage_models = list(cp.usage_models)
    st.final = Breach(**{**cp.final, "end_reason": EndReason(cp.final["end_reason"])}) if cp.final else None
    st.final_node_id = cp.final_node_id
    limits = loop.limits
    if limits is not None and cp.budget:
        b = limits.budget
        b.tokens = int(cp.budget["tokens"])
        b.tool_calls = int(cp.budget["tool_calls"])
        b.cost_usd = float(cp.budget["cost_usd"])
        b.started = time.monotonic() - int(cp.budget["elapsed_ms"]) / 1000
    if limits is not None and limits.repeat is not None and cp.repeat:
        limits.repeat.restore(
            RepeatState(
                last=cp.repeat["last"], streak=int(cp.repeat["streak"]), warned=tuple(cp.repeat["warned"])
            )
        )
    if cp.final_node_id is not None:
        for node in reversed(loop.recorder.cursor.path):
            if node.node_id == cp.final_node_id:
                st.final_text = text_of(node.content)
                break


def _breach_dump(breach: Breach | None) -> dict[str, Any] | None:
    if breach is None:
        return None
    data = dataclasses.asdict(breach)
    data["end_reason"] = breach.end_reason.value
    return data


def stored_answer(ctx: RunContext, cp: Checkpoint) -> Node | None:
    """The assistant answer of this run that a previous attempt of the model step already stored (the
    tip moved past ``cp.tip_node_id`` to a complete assistant node of this run), else ``None``."""
    path = ctx.loop.recorder.cursor.path
    if not path or path[-1].node_id == cp.tip_node_id:
        return None
    node = path[-1]
    if node.role != MessageRole.assistant or node.run_id != ctx.state.run_id or node.metadata.get("partial"):
        return None
    return node


def turn_from_node(node: Node) -> ModelTurn:
    """The :class:`ModelTurn` of a stored assistant answer (its calls, stop reason and usage)."""
    calls = [
        ToolCall(tool_call_id=b.tool_call_id, name=b.name, arguments=b.arguments)
        for b in node.content
        if isinstance(b, ToolCallBlock)
    ]
    meta = node.metadata
    stop = (
        StopReason.model_validate(meta["stop_reason"])
        if meta.get("stop_reason")
        else StopReason(reason="tool_use" if calls else "end_turn")
    )
    usage = Usage.model_validate(meta["usage"]) if meta.get("usage") else Usage()
    completed = ModelCompleted.model_construct(
        content=list(node.content), tool_calls=calls, stop_reason=stop, usage=usage, metadata={}
    )
    return ModelTurn(completed, node.node_id)


def stored_results(path: Sequence[Node], wanted: set[str]) -> dict[str, ToolResult]:
    """The stored results of the calls ``wanted`` on the agent's path, by ``tool_call_id`` (a completed
    tool call is never executed again)."""
    found: dict[str, ToolResult] = {}
    for node in path:
        if node.role != MessageRole.tool:
            continue
        for block in node.content:
            if isinstance(block, ToolResultBlock) and block.tool_call_id in wanted:
                found[block.tool_call_id] = ToolResult(
                    tool_call_id=block.tool_call_id,
                    tool_name=str(node.metadata.get("tool_name", "")),
                    content=list(block.content),
                    is_error=block.is_error,
                    error=block.error,
                    metadata=dict(block.metadata),
                )
    return found
