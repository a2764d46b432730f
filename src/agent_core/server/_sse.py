"""Run event streams for ``GET /api/runs/{run_id}/events`` (surfaces.md §2).

A run's channel has a single consumer, so the server consumes it once per run it starts (a *pump* into a
:class:`RunFeed`) and every SSE client reads the feed. A client first gets the run's persisted events from
SQLite (after ``Last-Event-ID``), then the live ones. Contract of :func:`run_stream`:

* every persisted event of the run is delivered exactly once and in ``run_seq`` order (``id: <run_seq>``);
  transient events (deltas, progress) carry no id and only appear while the client follows live;
* the hand-over from storage to the feed needs no lock: an event is pushed to the channel only after its
  row committed, so every persisted feed entry seen after the storage read is either in the read or has
  a larger ``run_seq``; the client goes on in the feed right after the last persisted event it got (the
  transient events after it — the current message's deltas so far — included);
* runs this process did not start (child runs, runs of a previous process) are followed by polling SQLite
  until the run is terminal; the stream ends after the run's terminal event in both cases;
* ``debug=False`` delivers only user-visible events (runtime.md §9.7), exactly like ``run.events()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from agent_core.api.handles import RunHandle
from agent_core.events.stream import user_visible
from agent_core.storage.sqlite import StorageManager
from agent_core.types.runtime import RuntimeEvent

log = logging.getLogger("agent_core.server")

POLL_INTERVAL_S = 0.2


@dataclass(eq=False)
class RunFeed:
    """Every event of one live run in arrival order (debug included), shared by all SSE clients."""

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
        self._pumps: set[asyncio.Task[None]] = set()
        self.handles: dict[str, RunHandle] = {}
        """Handles of every run this server started (kept for cancel after the feed is gone)."""

    def get(self, run_id: str) -> RunFeed | None:
        return self._feeds.get(run_id)

    def start(self, handle: RunHandle) -> RunFeed:
        """Subscribes to ``handle``'s channel at once (nothing emitted since ``start()`` is lost)."""
        feed = RunFeed(handle.run_id, handle)
        self._feeds[handle.run_id] = feed
        self.handles[handle.run_id] = handle
        events = handle.events(debug=True)
        task = asyncio.ensure_future(self._pump(feed, events))
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)
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
        for task in list(self._pumps):
            task.cancel()
        for task in list(self._pumps):
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _visible(event: RuntimeEvent, debug: bool) -> bool:
    return debug or user_visible(event)


async def run_stream(
    storage: StorageManager,
    feeds: RunFeeds,
    *,
    run_id: str,
    session_id: str,
    after_run_seq: int,
    debug: bool,
) -> AsyncIterator[RuntimeEvent]:
    """The run's events after ``after_run_seq``: persisted ones from SQLite first, then live ones."""
    feed = feeds.get(run_id)
    last = after_run_seq
    last_seq: int | None = None
    for event in await storage.list_events(session_id, run_id=run_id):
        if event.run_seq is None or event.run_seq <= last:
            continue
        last, last_seq = event.run_seq, event.seq
        if _visible(event, debug):
            yield event
    if feed is not None:
        # go on right after the last persisted event already sent: the transient events after it (the
        # current message's deltas so far) are delivered too, so a late client sees the whole partial text
        index = 0
        for i in range(len(feed.events) - 1, -1, -1):
            rs = feed.events[i].run_seq
            if rs is not None and rs <= last:
                index = i + 1
                break
        while True:
            await feed.wait_beyond(index)
            while index < len(feed.events):
                event = feed.events[index]
                index += 1
                if event.run_seq is not None:
                    if event.run_seq <= last:
                        continue
                    last = event.run_seq
                if _visible(event, debug):
                    yield event
            if feed.closed and index >= len(feed.events):
                return
    # not started by this process: follow SQLite until the run is terminal
    while True:
        record = await storage.get_run(run_id)
        terminal = record is None or record.status.terminal
        from_seq = last_seq + 1 if last_seq is not None else None
        for event in await storage.list_events(session_id, run_id=run_id, from_seq=from_seq):
            if event.run_seq is None or event.run_seq <= last:
                continue
            last, last_seq = event.run_seq, event.seq
            if _visible(event, debug):
                yield event
        if terminal:
            return
        await asyncio.sleep(POLL_INTERVAL_S)
