"""The inbox of one runtime: delivery, the wake-up path and each run's drain (``RunFeatures.inbox``).

Contracts:

- :meth:`Inbox.deliver` stores one entry for one agent of a session (one transaction, bounded by
  ``[agents] inbox_max_entries``: overflow is a ``validation_error`` to the sender and nothing is stored),
  writes ``inbox_delivered`` (on the recipient's live run when it has one here, else on its session),
  then wakes the agent: a live run reads the entry before its next model step; an idle session root
  agent gets a wake-up run (``RunManager.wake``: a root run without a user message, FIFO with user
  runs); a non-root agent without a live run reads it at the start of its next run (a pool worker). An
  ended one-shot child or a stopped teammate takes no entries (``validation_error``).
- Before every model step of a run, :class:`RunInbox` writes the agent's unread entries as ONE
  synthetic ``<inbox>`` note at the tail of the conversation, together with ``inbox_drained`` and the
  entries' acknowledgement, in one transaction: a crash before that commit leaves them unread (read
  again by the next run), never twice after. Between two steps the store is read only when this process
  delivered something to the agent meanwhile, or another process wrote the home's database since the
  last read (``writes_elsewhere()``; a shared store is read every step); the first step of every run
  always reads it.
- A root run that ends while entries that asked for a wake-up are unread (they arrived after its last
  model step) is followed by a wake-up run. A wake-up run that finds nothing to read ends ``completed``
  without a model call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agent_core._concurrency import TaskOwner, first_of
from agent_core._ids import new_id, validate_session_id
from agent_core._inbox.note import NOTE_SOURCE, inbox_note
from agent_core._loop.outcome import LoopOutcome
from agent_core._storage.drafts import EventDraft
from agent_core._storage.inbox import InboxAckConflict, StoredEntry
from agent_core._storage.writer import Txn
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError, StorageError
from agent_core.tools._effective import EffectiveTools
from agent_core.types import events as ev
from agent_core.types.base import utc_now
from agent_core.types.content import TextBlock
from agent_core.types.enums import AgentRole, AgentStatus, EndReason, MessageRole, NodeType, RunStatus
from agent_core.types.inbox import InboxDelivery, InboxEntry

if TYPE_CHECKING:
    from agent_core._runtime.runs import RunManager
    from agent_core._runtime.state import RunState, SessionState

log = logging.getLogger("agent_core._inbox")

Key = tuple[str, str]
"""``(session_id, agent_id)`` of one inbox."""
SHARED_POLL_S = 1.0
"""How often a waiter checks for deliveries of other processes (they wake nobody here): a shared store
is re-read, a SQLite home only when its ``writes_elsewhere()`` changed."""
_ENDED = frozenset({AgentStatus.completed.value, AgentStatus.failed.value, AgentStatus.cancelled.value})


def as_entry(entry: InboxEntry | Mapping[str, Any]) -> InboxEntry:
    """``entry`` with an ``entry_id`` and ``created_at`` (a mapping is validated: ``validation_error``)."""
    if not isinstance(entry, InboxEntry):
        if not isinstance(entry, Mapping):
            raise InvalidArgumentError(
                ErrorCode.validation_error, "an inbox entry is an InboxEntry or a mapping"
            )
        try:
            entry = InboxEntry.model_validate(dict(entry))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "entry"
            raise InvalidArgumentError(
                ErrorCode.validation_error, f"invalid inbox entry: {where}: {first['msg']}"
            ) from exc
    update: dict[str, Any] = {}
    if entry.entry_id is None:
        update["entry_id"] = new_id("inbox_")
    if entry.created_at is None:
        update["created_at"] = utc_now()
    return entry.model_copy(update=update) if update else entry


class Inbox:
    """Every inbox of one runtime (one instance, ``RunFeatures.inbox``)."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self.max_entries = manager.services.settings.agents.inbox_max_entries
        self._versions: dict[Key, int] = {}
        """Deliveries this process made to each inbox (a drain compares it with what it last read)."""
        self._read: dict[Key, int] = {}
        """The delivery count each inbox had when a drain last read it."""
        self._wake_wanted: dict[Key, int] = {}
        """Inboxes whose unread entries asked for a wake-up while their agent was busy: the delivery
        count at that time (a drain that read at least that far satisfies it)."""
        self._signals: dict[Key, asyncio.Event] = {}
        self._early: dict[str, RunInbox] = {}
        """Drains that ran before their run's first node, waiting for the run's loop (by run id)."""

    @property
    def shared(self) -> bool:
        """Other processes deliver to the inboxes this process drains (a shared store, or the temporal
        engine's workers): every model step reads the store instead of trusting local deliveries."""
        services = self.manager.services
        return bool(services.storage.SHARED) or services.settings.engine.kind == "temporal"

    # ---- delivery ----------------------------------------------------------------------------------
    async def deliver(
        self,
        session_id: str,
        agent_id: str | None,
        entry: InboxEntry | Mapping[str, Any],
        *,
        wake: bool = True,
        guard: Callable[[Txn], bool] | None = None,
    ) -> InboxDelivery | None:
        """Stores ``entry`` for ``agent_id`` (``None``: the session's root agent) and wakes it (see the
        module docstring). ``guard(txn) -> bool`` runs in the delivery's transaction; ``False`` delivers
        nothing and returns ``None``."""
        validate_session_id(session_id)
        entry = as_entry(entry)
        storage = self.manager.services.storage
        record = await storage.get_session(session_id)
        if record is None:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"unknown session {session_id!r}",
                details={"session_id": session_id},
            )
        agent_id = agent_id or record.root_agent_id
        root = agent_id == record.root_agent_id
        if root:  # loaded (a teammate's session gets its profile): a stopped teammate takes nothing
            session = await self.manager.get_session(session_id)
            if session.profile is not None and session.profile.closed:
                raise InvalidArgumentError(ErrorCode.validation_error, session.profile.closed)
        if not root:
            agent = await storage.get_agent(agent_id)
            if agent is not None and agent.session_id == session_id and agent.status in _ENDED:
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"agent {agent_id} has ended ({agent.status}); its inbox takes no more entries",
                    details={"session_id": session_id, "agent_id": agent_id},
                )
        depth = await storage.deliver_inbox(
            session_id, agent_id, [entry], max_entries=self.max_entries, guard=guard
        )
        if depth is None:
            return None
        key = (session_id, agent_id)
        version = self._bump(key)
        carrier = self._carrier(session_id, agent_id, root)
        woke: RunState | None = None
        if wake and root:
            if carrier is None:
                try:
                    run, created = await self.manager.wake(session_id)
                except AgentCoreError as exc:
                    log.warning("could not wake session %s: %s", session_id, exc.message)
                else:
                    if created:
                        woke = run
                    else:
                        carrier = run
                        self._wake_wanted[key] = version
            else:
                self._wake_wanted[key] = version
        payload = ev.InboxDelivered(
            entry_id=entry.entry_id or "",
            kind=entry.kind,
            sender=entry.from_,
            depth=depth,
            request_id=entry.request_id if entry.request_id else ev.ABSENT,
            woke_run_id=woke.run_id if woke is not None else ev.ABSENT,
        )
        await self._emit(session_id, agent_id, carrier, payload)
        reader = woke if woke is not None else carrier
        return InboxDelivery(
            entry=entry,
            session_id=session_id,
            agent_id=agent_id,
            depth=depth,
            run_id=reader.run_id if reader is not None else None,
            woke=woke is not None,
        )

    def _bump(self, key: Key) -> int:
        version = self._versions.get(key, 0) + 1
        self._versions[key] = version
        signal = self._signals.pop(key, None)
        if signal is not None:
            signal.set()
        return version

    def _carrier(self, session_id: str, agent_id: str, root: bool) -> RunState | None:
        """The run of this process that will read the agent's inbox next: its live run, else (root
        agent) its session's queued run."""
        session = self.manager.sessions.get(session_id)
        if session is None:
            return None
        for run in session.live_runs.values():
            if run.agent_id == agent_id and not run.terminal and run.status != RunStatus.queued:
                return run
        if root and session.queue:
            return session.queue[0]
        return None

    async def _emit(
        self, session_id: str, agent_id: str, carrier: RunState | None, payload: ev.EventPayload
    ) -> None:
        if carrier is not None and not carrier.terminal:
            try:
                await carrier.recorder.emit(payload)
                return
            except AgentCoreError:
                log.warning("could not write inbox_delivered on run %s", carrier.run_id, exc_info=True)
        await self.manager.services.storage.append(
            session_id,
            events=[EventDraft.of(payload, agent_id=agent_id, run_id=None, created_at=utc_now())],
        )

    # ---- waiting --------------------------------------------------------------------------------
    async def wait_for(
        self,
        session_id: str,
        agent_id: str,
        predicate: Callable[[StoredEntry], bool],
        cancel_event: asyncio.Event,
    ) -> StoredEntry | None:
        """The first unread entry of the agent for which ``predicate(stored)`` holds, waiting until one
        is delivered (``None`` once ``cancel_event`` is set). Nothing is acknowledged here."""
        key = (session_id, agent_id)
        storage = self.manager.services.storage
        elsewhere: int | None = None
        read = True
        while not cancel_event.is_set():
            signal = self._signals.setdefault(key, asyncio.Event())
            if not self.shared:  # read before the entries: a later write elsewhere is seen next time
                elsewhere, before = await storage.writes_elsewhere(), elsewhere
                read = read or elsewhere != before
            if read:
                for stored in await storage.pending_inbox(session_id, agent_id):
                    if predicate(stored):
                        return stored
            async with TaskOwner() as waiters:  # the signal's waiter ends with this wait
                waiter = waiters.spawn(signal.wait())
                # this process's deliveries set the signal; another process's are seen by polling
                await first_of(waiter, cancel_event, SHARED_POLL_S)
                read = self.shared or waiter.done()
        return None

    # ---- RunFeatures.inbox -----------------------------------------------------------------------
    def hook_for(self, state: RunState, effective: EffectiveTools) -> RunInbox | None:
        if state.role == AgentRole.compact:
            return None
        early = self._early.pop(state.run_id, None)
        return early or RunInbox(self, state, can_respond="agent.team_respond" in effective.names)

    async def before_first_node(self, state: RunState, effective: EffectiveTools) -> bool:
        """A root run of a user message reads its inbox before that message is written (entries that
        arrived while the agent was idle come first, in delivery order); returns whether it wrote a note.
        The run's loop keeps the same drain (:meth:`hook_for`)."""
        hook = RunInbox(self, state, can_respond="agent.team_respond" in effective.names)
        self._early[state.run_id] = hook
        return await hook.drain_early()

    async def after_root_run(self, session: SessionState, state: RunState) -> None:
        self._early.pop(state.run_id, None)
        key = (session.session_id, session.root_agent_id)
        wanted = self._wake_wanted.get(key)
        if wanted is None or session.busy:
            return
        if self._read.get(key, 0) >= wanted:
            self._wake_wanted.pop(key, None)
            return
        profile = session.profile
        if profile is not None and profile.closed is not None:
            return
        storage = self.manager.services.storage
        if not await storage.pending_inbox(session.session_id, session.root_agent_id, limit=1):
            self._wake_wanted.pop(key, None)
            return
        self._wake_wanted.pop(key, None)
        await self.manager.wake(session.session_id)

    def _drained(self, key: Key, version: int) -> None:
        self._read[key] = max(self._read.get(key, 0), version)
        wanted = self._wake_wanted.get(key)
        if wanted is not None and wanted <= version:
            del self._wake_wanted[key]

    def version(self, key: Key) -> int:
        return self._versions.get(key, 0)


class RunInbox:
    """One run's inbox drain (``LoopSpec.inbox``)."""

    __slots__ = ("_can_respond", "_early", "_elsewhere", "_inbox", "_key", "_seen", "_state")

    def __init__(self, inbox: Inbox, state: RunState, *, can_respond: bool) -> None:
        self._inbox = inbox
        self._state = state
        self._key: Key = (state.session_id, state.agent_id)
        self._seen: int | None = None
        self._elsewhere: int | None = None
        """The store's ``writes_elsewhere()`` at the last drain (another process's deliveries)."""
        self._can_respond = can_respond
        self._early: list[InboxEntry] = []

    async def drain_early(self) -> bool:
        version = self._inbox.version(self._key)
        self._early = await self._drain(first=True)
        self._seen = version
        self._inbox._drained(self._key, version)
        return bool(self._early)

    async def before_model_step(self, turns: int) -> LoopOutcome | None:
        inbox, state = self._inbox, self._state
        version = inbox.version(self._key)
        drained, self._early = self._early, []
        # another process on the same home may have delivered (read before the drain: later writes count)
        elsewhere = None if inbox.shared else await inbox.manager.services.storage.writes_elsewhere()
        if self._seen is None or version != self._seen or inbox.shared or elsewhere != self._elsewhere:
            self._elsewhere = elsewhere
            drained += await self._drain()
            self._seen = version
            inbox._drained(self._key, version)
        elif not drained:
            return None
        session = inbox.manager.sessions.get(state.session_id)
        profile = session.profile if session is not None and state.parent is None else None
        if drained and profile is not None and profile.on_drained is not None:
            ended = await profile.on_drained(state, drained)
            if ended is not None:
                return ended
        wake_up = state.parent is None and state.message is None and state.root_options is None
        if not drained and turns == 0 and wake_up:  # a wake-up run with nothing left to read
            return LoopOutcome(RunStatus.completed, EndReason.completed)
        return None

    async def _drain(self, *, first: bool = False) -> list[InboxEntry]:
        """Writes the unread entries as one note (retried when another drain took some meanwhile);
        ``first``: the note is the run's first node."""
        state = self._state
        storage = self._inbox.manager.services.storage
        rec = state.recorder
        first = first or (state.parent is None and state.message is None and not rec.written_node_ids)
        for _attempt in range(8):
            pending = await storage.pending_inbox(state.session_id, state.agent_id)
            if not pending:
                return []
            entries = [p.entry for p in pending]
            ids = [p.entry_id for p in pending]
            node_id = new_id("node_")
            try:
                await rec.write_node(
                    node_id=node_id,
                    role=MessageRole.user,
                    node_type=NodeType.system_note,
                    content=[TextBlock(text=inbox_note(entries, can_respond=self._can_respond))],
                    metadata={
                        "synthetic": True,
                        "source": NOTE_SOURCE,
                        "entry_ids": ids,
                        "kinds": [e.kind for e in entries],
                        "senders": [e.from_ for e in entries],
                    },
                    events=[
                        (
                            ev.InboxDrained(entry_ids=ids, kinds=[e.kind for e in entries], count=len(ids)),
                            None,
                        )
                    ],
                    run_update={"start_node_id": node_id} if first else None,
                    inbox_entry_ids=ids,
                )
            except InboxAckConflict:
                continue
            return entries
        raise StorageError(ErrorCode.storage_error, "the inbox kept changing while it was read")


def delivered_guard(statement: str, params: Sequence[Any]) -> Callable[[Txn], bool]:
    """A delivery guard: runs ``statement`` (an ``UPDATE`` that claims the delivery) in the delivery's
    transaction; the entry is stored only when it changed a row (a job result delivered once)."""

    def guard(txn: Txn) -> bool:
        return txn.execute(statement, params) > 0

    return guard
