"""The runtime side of the ``temporal`` engine: a root run leaving the session queue starts a workflow.

The run row, the session FIFO queue and the :class:`~agent_core._api.handles.RunHandle` stay in the runtime
that started the run; the workflow's steps run on ``soong-agent worker`` processes and write the run's
nodes and events to the shared store. This side follows the run there: it delivers the run's stored
events to the handle's stream in ``seq`` order, with the live events (deltas, never stored) the worker
sends on the storage backend's live channel placed after the stored event they followed (a stored
event waits for them until the worker announced it, at most ``LIVE_GRACE_S``; the announcement also
wakes the follower before its next poll), turns ``RunHandle.cancel`` into workflow cancellation, answers the run's permission requests (workflow
signals) with this runtime's permission callback, and ends the run state with the stored outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import TaskOwner
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState, SessionState
from agent_core._storage.live import LiveChannel, LiveFeed, live_channel
from agent_core.engine.temporal._live import deliver_live
from agent_core.engine.temporal._payloads import (
    MAX_MESSAGE_BYTES,
    WORKFLOW_ID_PREFIX,
    WORKFLOW_NAME,
    RunInput,
    RunResult,
)
from agent_core.engine.temporal._permissions import Answer, answer_pending
from agent_core.engine.temporal._structured import record_output_schema, stored_output
from agent_core.errors import ConfigError, ErrorCode, InternalError, InvalidArgumentError
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EventType, RunStatus
from agent_core.types.permissions import PermissionRequest
from agent_core.types.runtime import RuntimeEvent

if TYPE_CHECKING:
    from temporalio.client import Client

    from agent_core.config.schema import TemporalSection

log = logging.getLogger("agent_core.engine.temporal")
POLL_S = 0.1
"""How often the store is read for the run's new events until the worker's announcements arrive."""
LIVE_POLL_S = 1.0
"""How often the store is read anyway once they arrive (an announcement of stored events, the run's
cancellation and the workflow's end wake the follower at once; a lost announcement delays events at most
this long). Each read is two queries per followed run."""
PERMISSION_POLL_S = 0.5
"""How often the workflow is asked for new permission requests after the worker said one waits (until
it was found, at most ``PERMISSION_HOT_S``)."""
PERMISSION_HOT_S = 3.0
PERMISSION_FALLBACK_S = 5.0
"""How often the workflow is asked while the run is in a tool turn and no worker said a request waits
(the live channel is best effort). Each query is a task for a worker: they are not sent every turn."""
LIVE_GRACE_S = 1.0
"""How long a stored event the worker did not announce live waits for the live events before it."""


def workflow_id(run_id: str) -> str:
    return f"{WORKFLOW_ID_PREFIX}{run_id}"


async def connect(settings: TemporalSection) -> Client:
    """A client of ``[engine.temporal]``; ``config_error`` naming the keys when the service is unreachable."""
    from temporalio.client import Client

    from agent_core.engine.temporal._converter import DATA_CONVERTER

    try:
        return await Client.connect(
            settings.address, namespace=settings.namespace, data_converter=DATA_CONVERTER
        )
    except Exception as exc:
        raise ConfigError(
            ErrorCode.config_error,
            f"cannot reach the Temporal service at engine.temporal.address = {settings.address!r} "
            f"(namespace {settings.namespace!r}): {type(exc).__name__}: {exc}",
            details={"config_keys": ["engine.temporal.address", "engine.temporal.namespace"]},
        ) from exc


class TemporalEngine:
    """``RunFeatures.engine``: runs each root run as a workflow."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self.settings = manager.services.settings.engine.temporal
        self._client: Client | None = None
        self._lock = asyncio.Lock()
        self._live: LiveChannel | None = None
        self._following = 0

    async def client(self) -> Client:
        async with self._lock:
            if self._client is None:
                self._client = await connect(self.settings)
            return self._client

    async def run_root(self, session: SessionState, state: RunState) -> None:
        assert state.message is not None
        message_json = state.message.model_dump_json()
        if len(message_json.encode()) > MAX_MESSAGE_BYTES:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"the message is {len(message_json.encode())} bytes; the temporal engine carries at most "
                f"{MAX_MESSAGE_BYTES} bytes in a workflow input (store large content as an artifact)",
            )
        if self._live is None:
            self._live = live_channel(self.manager.services.storage, self.manager.services.settings)
        live = self._live
        self._following += 1
        try:
            async with live.follow(state.run_id) as feed:
                await self._run_workflow(session, state, message_json, feed)
        finally:
            self._following -= 1
            if self._following == 0 and self._live is live:  # no run followed: no open listener
                self._live = None
                await live.close()

    async def _run_workflow(
        self, session: SessionState, state: RunState, message_json: str, feed: LiveFeed
    ) -> None:
        """Starts the run's workflow and follows the run in the store (and live) until it ended."""
        observers = self.manager.features.event_observers
        storage = self.manager.services.storage
        if state.output_schema is not None:  # the workers judge the answers with it
            await record_output_schema(storage, state.run_id, state.output_schema, state.output_retries)
        known = await storage.list_events(state.session_id, run_id=state.run_id)
        next_seq = (max((e.seq or 0) for e in known) + 1) if known else 1
        client = await self.client()
        # SessionStart hooks run for this runtime's first run of the session (as on the local engine)
        session_start, session.session_started = not session.session_started, True
        handle = await client.start_workflow(
            WORKFLOW_NAME,
            RunInput(
                state.run_id,
                state.session_id,
                message_json,
                heartbeat_timeout_ms=self.settings.heartbeat_timeout_ms,
                session_start=session_start,
            ),
            id=workflow_id(state.run_id),
            task_queue=self.settings.task_queue,
            result_type=RunResult,
        )
        state.status = RunStatus.running
        # the workflow's result, the permission answerer and the cancel waker end with this follower
        follower = TaskOwner(f"run {state.run_id} follower")
        result = follower.spawn(handle.result())
        result.add_done_callback(_retrieve)  # a cancelled or failed workflow's error: the stored outcome
        phase = _Phase()
        follower.spawn(self._answer_permissions(handle, result, phase, feed))
        follower.spawn(_wake_on(state.cancel_event, feed))
        result.add_done_callback(lambda _: feed.woken.set())
        cancel_sent = refreshed = False
        held: list[RuntimeEvent] = []
        """Stored events read before the worker announced them live: the live events before them may
        still be on their way (held until announced, at most ``LIVE_GRACE_S``)."""
        held_since, fetch_seq, clock = 0.0, next_seq, asyncio.get_running_loop().time
        try:
            while True:
                run = await storage.get_run(state.run_id)
                fresh = await storage.list_events(state.session_id, from_seq=fetch_seq, run_id=state.run_id)
                if fresh:
                    fetch_seq = (fresh[-1].seq or fetch_seq) + 1
                    held_since = held_since if held else clock()
                    held.extend(fresh)
                ended = run is not None and run.status.terminal
                overdue = clock() - held_since >= LIVE_GRACE_S
                # also after the run ended: its last live events (coalesced by the worker) may still be
                # on their way, announced with the stored events they precede
                while held and (overdue or (held[0].seq or 0) <= feed.stored_seq):
                    event = held.pop(0)
                    held_since = clock()
                    await deliver_live(feed, (event.seq or next_seq) - 1, state.channel, observers)
                    next_seq = (event.seq or next_seq) + 1
                    phase.in_tools = event.event_type not in MODEL_PHASE
                    await state.channel.push(event)
                    for observer in observers:
                        try:
                            observer(event)
                        except Exception:
                            log.exception("event observer failed")
                await deliver_live(feed, next_seq - 1, state.channel, observers)
                if ended and not held and run is not None:
                    error = ErrorPayload.model_validate_json(run.error_json) if run.error_json else None
                    if state.output_schema is not None and run.status == RunStatus.completed:
                        nodes = await storage.list_nodes(state.session_id, run_id=state.run_id)
                        state.output_accepted, state.output_value = stored_output(state.output_schema, nodes)
                    # the session's path first: a caller woken by the run's end may start the next run
                    await _refresh_cursor(self.manager, session)
                    refreshed = True
                    # the follower's tasks end before the run's end is announced: a caller woken by it
                    # finds the session free (the finally below then has nothing left to wait for)
                    await follower.aclose()
                    state.finish(run.status, run.end_reason, error)
                    break
                if result.done() and not await _terminal_soon(self.manager, state.run_id):
                    exc = result.exception()
                    raise InternalError(
                        ErrorCode.internal_error,
                        f"the workflow of run {state.run_id} ended without finishing the run: "
                        f"{type(exc).__name__ if exc else 'no error'}: {exc}",
                    )
                if state.cancel_event.is_set() and not cancel_sent and not ended:
                    cancel_sent = True
                    await handle.cancel()
                target = (held[0].seq or next_seq) if held else fetch_seq
                poll = POLL_S if held or not feed.stored_seq else LIVE_POLL_S
                interrupted = _never if ended else functools.partial(_interrupted, result, state, cancel_sent)
                await _until_stored(feed, target, next_seq - 1, state, observers, poll, interrupted)
        finally:
            await follower.aclose()  # the result's outcome, if it still ends with one, is retrieved
            if not refreshed:
                await _refresh_cursor(self.manager, session)

    async def _answer_permissions(
        self, handle: Any, result: asyncio.Future[Any], phase: _Phase, feed: LiveFeed
    ) -> None:
        """The run's permission requests (workflow signals) go to this runtime's permission callback.

        The workflow is queried (a query is a task for a worker) when the worker said on the live
        channel that a request waits (every ``PERMISSION_POLL_S`` until one is found, at most
        ``PERMISSION_HOT_S``), else every ``PERMISSION_FALLBACK_S`` of a tool turn."""
        asked: set[str] = set()
        clock = asyncio.get_running_loop().time
        last, hot_until = clock(), 0.0
        while not result.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(feed.permission.wait(), PERMISSION_POLL_S)
            now = clock()
            if feed.permission.is_set():
                feed.permission.clear()
                hot_until = now + PERMISSION_HOT_S
            if now >= hot_until and (not phase.in_tools or now - last < PERMISSION_FALLBACK_S):
                last = last if phase.in_tools else now  # the fallback counts from the turn's start
                continue
            last = now
            try:
                if await answer_pending(handle, asked, self._ask):
                    hot_until = 0.0
            except Exception:  # the workflow is finishing, or the service is briefly unreachable
                log.debug("could not read the permission requests of %s", handle.id, exc_info=True)

    async def _ask(self, request: PermissionRequest) -> Answer:
        return await self.manager.services.gate.ask_callback(request)


class _Phase:
    """Whether the run may be asking for permission: its last stored event is not of a model call."""

    in_tools = False


MODEL_PHASE = frozenset(
    {EventType.loop_started, EventType.message_created, EventType.context_built, EventType.model_started}
)
"""Stored events after which the run is building its prompt or streaming (it cannot be asking)."""


def _interrupted(result: asyncio.Future[Any], state: RunState, cancel_sent: bool) -> bool:
    """The follower has more to do than wait for events: the workflow ended or the run was cancelled."""
    return result.done() or (not cancel_sent and state.cancel_event.is_set())


def _retrieve(result: asyncio.Future[Any]) -> None:
    """Marks the workflow's result as seen: the run's outcome is read from the store, and a cancelled
    workflow's error would otherwise be logged as never retrieved when the future is collected."""
    if not result.cancelled():
        result.exception()


def _never() -> bool:
    """An ended run's follower only waits for the announcement of its held events (or the grace)."""
    return False


async def _wake_on(event: asyncio.Event, feed: LiveFeed) -> None:
    """Wakes the follower when ``event`` is set (the run is cancelled)."""
    await event.wait()
    feed.woken.set()


async def _until_stored(
    feed: LiveFeed,
    seq: int,
    delivered_seq: int,
    state: RunState,
    observers: list[Callable[[RuntimeEvent], None]],
    poll: float,
    interrupted: Callable[[], bool],
) -> None:
    """Delivers the live events after stored events up to ``delivered_seq`` until the worker announces
    the stored event ``seq``, ``interrupted()`` (checked when woken), or ``poll`` seconds passed (the
    store is read then anyway)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + poll
    while feed.stored_seq < seq and not interrupted():
        left = deadline - loop.time()
        if left <= 0:
            return
        await feed.wait(left)
        await deliver_live(feed, delivered_seq, state.channel, observers)


async def _terminal_soon(manager: RunManager, run_id: str) -> bool:
    """After the workflow ended: whether the run row is (now) terminal."""
    run = await manager.services.storage.get_run(run_id)
    return run is not None and run.status.terminal


async def _refresh_cursor(manager: RunManager, session: SessionState) -> None:
    """The session's path as the workers left it (the next run of this runtime starts from there)."""
    storage = manager.services.storage
    record = await storage.get_session(session.session_id)
    active = record.active_node_id if record else None
    session.cursor.reset(await storage.node_path(session.session_id, active) if active else [])
    session.active_node_id = active


def install(manager: RunManager) -> TemporalEngine:
    """Root runs of this runtime execute as Temporal workflows (``[engine] kind = "temporal"``)."""
    return TemporalEngine(manager)
