"""A run's live event channel (docs/events.md#the-live-stream).

Rules implemented here:

- Visibility: ``events(debug=False)`` delivers the events whose ``RuntimeEvent.user_visible`` is true.
- Single consumer: a second concurrent :meth:`EventChannel.subscribe` raises ``validation_error``.
- Attachment: the channel exists from ``start()``; events emitted before the first subscription are
  buffered (never blocking the producer) so the first iterator sees them. After an iterator closes early,
  events are discarded until a new iterator subscribes (unless ``replay_buffer=False`` channels for
  children, which never buffer before subscription).
- Backpressure: while subscribed, the producer awaits when :data:`QUEUE_CAPACITY` undelivered events are
  waiting; structural events are never dropped.
- Coalescing: an undelivered text delta merges into the latest undelivered delta of the same type and run
  when only text deltas lie between them, so text is never lost or reordered and never merged across any
  other event.
- Termination: :meth:`close` marks the end; iterators finish after delivering everything buffered.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from agent_core.errors import ErrorCode, InvalidArgumentError
from agent_core.types.enums import EventType
from agent_core.types.runtime import RuntimeEvent

QUEUE_CAPACITY = 256
_TEXT_DELTAS = frozenset({EventType.message_delta, EventType.model_text_delta})


class EventChannel:
    """Live events of one run, delivered to at most one consumer at a time."""

    __slots__ = (
        "_buffer",
        "_buffer_before_subscribe",
        "_closed",
        "_consumer",
        "_consumer_seen",
        "_include_children",
        "_merged",
        "_space",
        "_subscribed",
        "_wake",
    )

    def __init__(self, *, buffer_before_subscribe: bool = True) -> None:
        self._buffer: deque[RuntimeEvent] = deque()
        self._buffer_before_subscribe = buffer_before_subscribe
        self._subscribed = False
        self._consumer = False
        self._consumer_seen = False
        self._closed = False
        self._include_children = False
        self._merged: dict[int, list[str]] = {}
        """Text parts merged into a queued delta (keyed by the queued event's id), joined at delivery so
        coalescing stays linear in the text length however far the consumer lags."""
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def wants_children(self) -> bool:
        """Whether the current consumer asked for child runs' events (``subscribe(include_children=True)``)."""
        return self._include_children and self._subscribed

    def _accepting(self) -> bool:
        return self._subscribed or (self._buffer_before_subscribe and not self._consumer_seen)

    async def push(self, event: RuntimeEvent) -> None:
        """Queues ``event``; waits for space only while a consumer is subscribed."""
        if self._closed:
            return
        if not self._accepting():
            return
        if event.event_type in _TEXT_DELTAS and self._coalesce(event):
            return
        while self._subscribed and len(self._buffer) >= QUEUE_CAPACITY:
            self._space.clear()
            await self._space.wait()
            if self._closed or not self._accepting():
                return
        self._buffer.append(event)
        self._wake.set()

    def push_nowait(self, event: RuntimeEvent) -> bool:
        """:meth:`push` when it need not wait; ``False`` (nothing queued) when the producer would have
        to wait for space: then :meth:`push` it."""
        if self._closed or not self._accepting():
            return True
        if event.event_type in _TEXT_DELTAS and self._coalesce(event):
            return True
        if self._subscribed and len(self._buffer) >= QUEUE_CAPACITY:
            return False
        self._buffer.append(event)
        self._wake.set()
        return True

    def _coalesce(self, event: RuntimeEvent) -> bool:
        for queued in reversed(self._buffer):
            if queued.event_type not in _TEXT_DELTAS:
                return False
            if queued.event_type == event.event_type and queued.run_id == event.run_id:
                parts = self._merged.get(id(queued))
                if parts is None:
                    parts = self._merged[id(queued)] = [queued.data.get("text", "")]
                parts.append(event.data.get("text", ""))
                return True
        return False

    def close(self) -> None:
        """No more events will be pushed; consumers end after draining the buffer."""
        self._closed = True
        self._wake.set()
        self._space.set()

    def subscribe(
        self, *, debug: bool = False, include_children: bool = False
    ) -> AsyncIterator[RuntimeEvent]:
        if self._consumer:
            raise InvalidArgumentError(
                ErrorCode.validation_error, "this run's event stream already has an active consumer"
            )
        self._consumer = True
        self._subscribed = True
        self._include_children = include_children
        return self._iterate(debug)

    async def _iterate(self, debug: bool) -> AsyncIterator[RuntimeEvent]:
        try:
            while True:
                while self._buffer:
                    event = self._buffer.popleft()
                    parts = self._merged.pop(id(event), None) if self._merged else None
                    if parts is not None:
                        event.data["text"] = "".join(parts)
                    if len(self._buffer) < QUEUE_CAPACITY:
                        self._space.set()
                    if debug or event.user_visible:
                        yield event
                if self._closed:
                    return
                self._wake.clear()
                if self._buffer or self._closed:
                    continue
                await self._wake.wait()
        finally:
            self._subscribed = False
            self._include_children = False
            self._consumer = False
            self._consumer_seen = True
            self._buffer.clear()
            self._merged.clear()
            self._space.set()
