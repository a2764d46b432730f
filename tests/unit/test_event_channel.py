"""Event channel delivery rules (docs/events.md#the-live-stream)."""

from __future__ import annotations

import asyncio

import pytest

from agent_core._events.stream import QUEUE_CAPACITY, EventChannel
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.enums import EventType
from agent_core.types.runtime import RuntimeEvent


def ev(event_type: EventType, text: str | None = None, run_id: str = "run_a") -> RuntimeEvent:
    payload = {"text": text} if text is not None else {}
    return RuntimeEvent(
        event_id="evt_x", session_id="sess_x", run_id=run_id, event_type=event_type, payload=payload
    )


async def drain(channel: EventChannel, debug: bool = False) -> list[RuntimeEvent]:
    return [e async for e in channel.subscribe(debug=debug)]


async def test_events_before_subscription_are_buffered_and_delivered() -> None:
    ch = EventChannel()
    await ch.push(ev(EventType.run_queued))
    await ch.push(ev(EventType.loop_started))
    ch.close()
    got = await drain(ch)
    assert [e.event_type for e in got] == [EventType.run_queued, EventType.loop_started]


async def test_second_consumer_is_rejected() -> None:
    ch = EventChannel()
    it = ch.subscribe()
    with pytest.raises(AgentCoreError) as info:
        ch.subscribe()
    assert info.value.code == ErrorCode.validation_error
    ch.close()
    assert [e async for e in it] == []


async def test_text_deltas_coalesce_without_losing_text() -> None:
    ch = EventChannel()
    text = "".join(chr(ord("a") + i % 26) for i in range(5000))
    await ch.push(ev(EventType.loop_started))
    for c in text:
        await ch.push(ev(EventType.model_text_delta, c))
        await ch.push(ev(EventType.message_delta, c))
    await ch.push(ev(EventType.message_completed, text))
    ch.close()
    got = await drain(ch, debug=True)
    deltas = [e for e in got if e.event_type == EventType.message_delta]
    model_deltas = [e for e in got if e.event_type == EventType.model_text_delta]
    assert "".join(e.data["text"] for e in deltas) == text
    assert "".join(e.data["text"] for e in model_deltas) == text
    assert len(deltas) == 1 and len(got) == 4  # merged, never across structural events
    assert got[-1].event_type == EventType.message_completed


async def test_deltas_never_merge_across_structural_events() -> None:
    ch = EventChannel()
    await ch.push(ev(EventType.message_delta, "a"))
    await ch.push(ev(EventType.tool_started))
    await ch.push(ev(EventType.message_delta, "b"))
    ch.close()
    got = await drain(ch)
    assert [(e.event_type, e.data.get("text")) for e in got] == [
        (EventType.message_delta, "a"),
        (EventType.tool_started, None),
        (EventType.message_delta, "b"),
    ]


async def test_backpressure_blocks_producer_while_subscribed() -> None:
    ch = EventChannel()
    it = ch.subscribe().__aiter__()
    for _ in range(QUEUE_CAPACITY):
        await ch.push(ev(EventType.tool_started))
    blocked = asyncio.create_task(ch.push(ev(EventType.tool_completed)))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    first = await it.__anext__()
    assert first.event_type == EventType.tool_started
    await asyncio.wait_for(blocked, 1)
    ch.close()
    rest = [e async for e in it]
    assert len(rest) == QUEUE_CAPACITY
    assert rest[-1].event_type == EventType.tool_completed


async def test_debug_filter_applies_at_delivery() -> None:
    ch = EventChannel()
    for t in (
        EventType.loop_started,
        EventType.context_built,
        EventType.model_started,
        EventType.task_created,
    ):
        await ch.push(ev(t))
    ch.close()
    assert [e.event_type for e in await drain(ch)] == [EventType.loop_started]


async def test_early_close_discards_until_next_subscriber() -> None:
    ch = EventChannel()
    await ch.push(ev(EventType.loop_started))
    agen = ch.subscribe()
    first = await agen.__anext__()
    assert first.event_type == EventType.loop_started
    await agen.aclose()
    await ch.push(ev(EventType.message_created))  # discarded: nobody subscribed
    it2 = ch.subscribe()
    await ch.push(ev(EventType.loop_completed))
    ch.close()
    assert [e.event_type async for e in it2] == [EventType.loop_completed]


async def test_child_channel_yields_only_events_after_subscription() -> None:
    ch = EventChannel(buffer_before_subscribe=False)
    await ch.push(ev(EventType.loop_started))
    it = ch.subscribe()
    await ch.push(ev(EventType.loop_completed))
    ch.close()
    assert [e.event_type async for e in it] == [EventType.loop_completed]


async def test_memory_bounded_with_slow_consumer_and_many_deltas() -> None:
    ch = EventChannel()
    it = ch.subscribe().__aiter__()
    got: list[str] = []

    async def consume() -> None:
        async for e in it:
            got.append(e.data.get("text", ""))
            await asyncio.sleep(0.001)

    consumer = asyncio.create_task(consume())
    for _ in range(20000):
        await ch.push(ev(EventType.message_delta, "x"))
        assert len(ch._buffer) <= QUEUE_CAPACITY
    ch.close()
    await asyncio.wait_for(consumer, 10)
    assert "".join(got) == "x" * 20000
