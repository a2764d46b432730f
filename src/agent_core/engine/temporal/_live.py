"""Live events of the temporal engine: a worker's run deltas reach the runtime that started the run.

On the worker, :class:`LivePublisher` is the root run recorder's ``forward``: it sees every event of the
run in order, sends the transient ones (``message_delta``, ``tool_progress``, …; never stored, never in the
workflow history) on the storage backend's live channel (:mod:`agent_core._storage.live`), each batch
tagged with the seq of the last stored event before it, and announces newly stored events (a wake-up).
Batches leave every ``flush_s`` (coalesced), in order. On the starting runtime, :func:`deliver_live` hands
the received events to the run's stream right after the stored event they followed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from agent_core._concurrency import TaskOwner
from agent_core._events.stream import EventChannel
from agent_core._storage.live import LiveChannel, LiveFeed
from agent_core.types.runtime import RuntimeEvent

log = logging.getLogger("agent_core.engine.temporal")
FLUSH_S = 0.02


class LivePublisher:
    """Publishes one run's transient events and stored-event wake-ups (best effort, in order)."""

    def __init__(
        self, channel: LiveChannel, run_id: str, owner: TaskOwner, *, flush_s: float = FLUSH_S
    ) -> None:
        self.channel = channel
        self.run_id = run_id
        self.flush_s = flush_s
        self._stored_seq = 0
        self._sent_seq = 0
        self._batches: list[tuple[int, list[str]]] = []
        self._flushes = owner
        """Owns the flush task (the worker's run contexts: closed when the worker stops)."""
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, event: RuntimeEvent) -> None:
        if event.run_id != self.run_id:  # a child run's event: the follower reads it from the store
            return
        if event.seq is None:
            if not self._batches or self._batches[-1][0] != self._stored_seq:
                self._batches.append((self._stored_seq, []))
            self._batches[-1][1].append(event.model_dump_json())
        else:
            self._stored_seq = max(self._stored_seq, event.seq)
        if (self._task is None or self._task.done()) and not self._flushes.closed:  # best effort
            self._task = self._flushes.spawn(self._flush(), name=f"live flush {self.run_id}")

    async def _flush(self) -> None:
        while self._batches or self._sent_seq < self._stored_seq:
            await asyncio.sleep(self.flush_s)
            batches, self._batches = self._batches, []
            for after, events in batches:
                await self.channel.publish(self.run_id, after, events)
                self._sent_seq = max(self._sent_seq, after)
            if self._sent_seq < self._stored_seq:
                stored = self._stored_seq
                await self.channel.publish(self.run_id, stored, [])
                self._sent_seq = max(self._sent_seq, stored)


async def deliver_live(
    feed: LiveFeed,
    delivered_seq: int,
    channel: EventChannel,
    observers: list[Callable[[RuntimeEvent], None]],
) -> None:
    """Pushes the received live events that follow stored events up to ``delivered_seq``."""
    for text in feed.take(delivered_seq):
        try:
            event = RuntimeEvent.model_validate_json(text)
        except ValueError:
            log.debug("an undecodable live event was dropped")
            continue
        for observer in observers:
            try:
                observer(event)
            except Exception:
                log.exception("event observer failed")
        await channel.push(event)
