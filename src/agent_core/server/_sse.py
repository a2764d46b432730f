"""Run event streams for ``GET /api/runs/{run_id}/events`` (docs/serve.md#run-event-streams).

A run's channel has a single consumer, so the server consumes it once per run it starts (a *pump* into a
:class:`RunFeed`, subscribed with ``include_children=True``) and every SSE client reads the feed. The
stream of a run carries the run's own events and those of every descendant run (sub, fork, worker and
compaction children, grandchildren included) as :class:`NestedRuntimeEvent` tagged with ``parent_run_id``
and ``parent_tool_call_id``. A client first gets the persisted events of the run tree from SQLite (after
its cursor, in session ``seq`` order), then the live ones. Contract of :func:`run_stream`:

* every persisted event of the tree is delivered exactly once; the run's own events carry
  ``id: <run_seq>``, a descendant's ``id: <P>.<seq>`` (``P``: the run_seq of the run's last own event
  before it, ``seq``: the descendant event's session seq), so ids never decrease and ``Last-Event-ID``
  takes either form: ``N`` resumes after the own event ``N`` (and every descendant event before it),
  ``N.S`` after own event ``N`` and session seq ``S``;
* replayed and live streams agree: the replay holds exactly the tree's persisted events up to the run's
  terminal event, and live delivery follows commit order (an event is pushed only after its row
  committed; for parallel children the push order is the commit order in practice, so a resume never
  skips an event that was not delivered);
* the hand-over from storage to the feed needs no lock: every persisted feed event missing from the
  storage read has a larger ``seq`` than anything read; the client goes on in the feed right after the last
  persisted event the read covered (the transient events after it — partial text — included);
* runs this process did not start (a child run asked for directly, runs of a previous process) are
  followed by polling SQLite until the run is terminal; the stream ends after the run's terminal event;
* ``debug=False`` delivers only user-visible events (docs/events.md#catalogue), exactly like ``run.events()``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agent_core import RunHandle
from agent_core._concurrency import TaskOwner
from agent_core.store import SessionStore
from agent_core.types.runtime import NestedRuntimeEvent, RuntimeEvent

log = logging.getLogger("agent_core.server")

POLL_INTERVAL_S = 0.2
EVENT_ID = re.compile(r"([0-9]{1,12})(?:\.([0-9]{1,12}))?")
"""``Last-Event-ID``: ``<run_seq>`` or ``<run_seq>.<seq>``."""


@dataclass(eq=False, slots=True)
class RunFeed:
    """Every event of one live run tree in arrival order (debug included), shared by all SSE clients."""

    run_id: str
    handle: RunHandle
    events: list[RuntimeEvent] = field(default_factory=list)
    closed: bool = False
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def append(self, event: RuntimeEvent) -> None:
        self.events.append(event)
        self._wake()

    def close(self) -> None:
        self.closed = True
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def wait_beyond(self, index: int) -> None:
        """Returns once the feed holds more than ``index`` events or is closed."""
        while len(self.events) <= index and not self.closed:
            await self._changed.wait()


class RunFeeds:
    """The feeds of the runs started by this server, with their pump tasks."""

    def __init__(self) -> None:
        self._feeds: dict[str, RunFeed] = {}
        self._pumps = TaskOwner("run feed pumps")
        self.handles: dict[str, RunHandle] = {}
        """Handles of every run this server started (kept for cancel after the feed is gone)."""

    def get(self, run_id: str) -> RunFeed | None:
        return self._feeds.get(run_id)

    def start(self, handle: RunHandle) -> RunFeed:
        """Subscribes to ``handle``'s channel at once (nothing emitted since ``start()`` is lost)."""
        feed = RunFeed(handle.run_id, handle)
        self._feeds[handle.run_id] = feed
        self.handles[handle.run_id] = handle
        events = handle.events(debug=True, include_children=True)
        self._pumps.spawn(self._pump(feed, events), name=f"feed {handle.run_id}")
        return feed

    async def _pump(self, feed: RunFeed, events: AsyncIterator[RuntimeEvent]) -> None:
        try:
            async for event in events:
                feed.append(event)
        except Exception:
            log.exception("event pump of run %s failed", feed.run_id)
        finally:
            feed.close()
            self._feeds.pop(feed.run_id, None)

    async def close(self) -> None:
        await self._pumps.aclose()


@dataclass(frozen=True, slots=True)
class StreamItem:
    """One SSE message: the event and its ``id`` (``None`` for transient events)."""

    event: RuntimeEvent
    event_id: str | None


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a client resumes: after own event ``run_seq`` and (``N.S`` form) after session seq ``seq``."""

    run_seq: int = 0
    seq: int | None = None

    @classmethod
    def parse(cls, raw: str | None) -> Cursor | None:
        """``None`` for a malformed id; no header → the start."""
        if raw is None:
            return cls()
        match = EVENT_ID.fullmatch(raw)
        if match is None:
            return None
        return cls(int(match.group(1)), int(match.group(2)) if match.group(2) is not None else None)


class _Tree:
    """The run and its descendants (from ``runs.metadata_json``), with each descendant's parent ids."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.parents: dict[str, tuple[str | None, str | None]] = {}
        self.members: set[str] = {root}

    async def refresh(self, storage: SessionStore, session_id: str) -> None:
        links: dict[str, tuple[str | None, str | None]] = {}
        for record in await storage.list_runs(session_id):
            try:
                meta = json.loads(record.metadata_json or "{}")
            except ValueError:
                meta = {}
            if isinstance(meta, dict) and isinstance(meta.get("parent_run_id"), str):
                call = meta.get("tool_call_id")
                links[record.run_id] = (meta["parent_run_id"], call if isinstance(call, str) else None)
        members = {self.root}
        grew = True
        while grew:
            grew = False
            for run_id, (parent, _) in links.items():
                if parent in members and run_id not in members:
                    members.add(run_id)
                    grew = True
        self.members = members
        self.parents = {r: links[r] for r in members if r in links}

    def tagged(self, event: RuntimeEvent) -> RuntimeEvent:
        """A descendant's stored event tagged like the live one (:class:`NestedRuntimeEvent`)."""
        if event.run_id == self.root or isinstance(event, NestedRuntimeEvent):
            return event
        parent, call = self.parents.get(event.run_id or "", (None, None))
        values = {name: getattr(event, name) for name in RuntimeEvent.model_fields}
        return NestedRuntimeEvent.model_construct(**values, parent_run_id=parent, parent_tool_call_id=call)


class _Ids:
    """Assigns SSE ids and decides what a resuming client has already seen."""

    def __init__(self, root: str, cursor: Cursor, resume_seq: int) -> None:
        self.root = root
        self.cursor = cursor
        self.resume_seq = resume_seq
        self.last_own = cursor.run_seq

    def seen(self, event: RuntimeEvent) -> bool:
        assert event.seq is not None and event.run_seq is not None
        if event.run_id == self.root:
            return event.run_seq <= self.cursor.run_seq
        return event.seq <= self.resume_seq

    def assign(self, event: RuntimeEvent) -> str:
        assert event.seq is not None and event.run_seq is not None
        if event.run_id == self.root:
            self.last_own = max(self.last_own, event.run_seq)
            return str(event.run_seq)
        return f"{self.last_own}.{event.seq}"


def _resume_seq(cursor: Cursor, own: list[RuntimeEvent]) -> int:
    """The session seq a cursor stands for: ``S`` of ``N.S``, else the seq of own event ``N`` (or of the
    last own event before it)."""
    if cursor.seq is not None:
        return cursor.seq
    best = 0
    for event in own:
        if event.run_seq is not None and event.seq is not None and event.run_seq <= cursor.run_seq:
            best = max(best, event.seq)
    return best


async def run_stream(
    storage: SessionStore,
    feeds: RunFeeds,
    *,
    run_id: str,
    session_id: str,
    cursor: Cursor,
    debug: bool,
) -> AsyncIterator[StreamItem]:
    """The run tree's events after ``cursor``: persisted ones from SQLite first, then live ones."""
    feed = feeds.get(run_id)
    tree = _Tree(run_id)
    await tree.refresh(storage, session_id)
    stored = await storage.list_events(session_id)
    own = [e for e in stored if e.run_id == run_id]
    ids = _Ids(run_id, cursor, _resume_seq(cursor, own))
    read_seq = max((e.seq for e in stored if e.seq is not None), default=0)
    if feed is None:
        # not live here: follow SQLite until the run is terminal
        async for item in _follow_storage(storage, tree, ids, session_id, stored, debug):
            yield item
        return
    for event in stored:
        if event.run_id in tree.members and event.run_seq is not None and not ids.seen(event):
            stored_id = ids.assign(event)
            if debug or event.user_visible:
                yield StreamItem(tree.tagged(event), stored_id)
    # live: persisted feed events the read missed (seq beyond it), and the transient events after the last
    # persisted feed event the read covered
    index = 0
    handover = 0
    for i, event in enumerate(feed.events):
        if event.seq is not None and event.seq <= read_seq:
            handover = i + 1
    while True:
        await feed.wait_beyond(index)
        while index < len(feed.events):
            event = feed.events[index]
            index += 1
            if event.seq is not None and event.run_seq is not None:
                if event.seq <= read_seq or ids.seen(event):
                    continue
                event_id: str | None = ids.assign(event)
            elif index <= handover:
                continue
            else:
                event_id = None
            if debug or event.user_visible:
                yield StreamItem(event, event_id)
        if feed.closed and index >= len(feed.events):
            return


async def _follow_storage(
    storage: SessionStore,
    tree: _Tree,
    ids: _Ids,
    session_id: str,
    stored: list[RuntimeEvent],
    debug: bool,
) -> AsyncIterator[StreamItem]:
    batch = stored
    last_seq = 0
    while True:
        record = await storage.get_run(tree.root)
        terminal = record is None or record.status.terminal
        if batch is not stored:
            batch = await storage.list_events(session_id, from_seq=last_seq + 1)
        if any(e.run_id not in tree.members and e.run_id is not None for e in batch):
            await tree.refresh(storage, session_id)
        # a terminal run's stream ends with its own last event (a child winding down later is not shown)
        end = max((e.seq or 0 for e in batch if e.run_id == tree.root), default=0) if terminal else None
        for event in batch:
            last_seq = max(last_seq, event.seq or 0)
            if end is not None and (event.seq or 0) > end:
                continue
            if event.run_id in tree.members and event.run_seq is not None and not ids.seen(event):
                event_id = ids.assign(event)
                if debug or event.user_visible:
                    yield StreamItem(tree.tagged(event), event_id)
        if terminal:
            return
        batch = []
        await asyncio.sleep(POLL_INTERVAL_S)
