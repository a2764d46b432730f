"""``first_of`` races a task against a run's cancel event without a waiter task, like ``asyncio.wait``."""

from __future__ import annotations

import asyncio

import pytest

from agent_core._concurrency import CancelEvent, first_of


@pytest.mark.parametrize("event_type", [CancelEvent, asyncio.Event])
async def test_returns_when_the_task_finishes_first(event_type: type[asyncio.Event]) -> None:
    event = event_type()
    task = asyncio.ensure_future(asyncio.sleep(0.01, result="done"))
    await first_of(task, event)
    assert task.done() and task.result() == "done" and not event.is_set()
    if isinstance(event, CancelEvent):
        assert event._callbacks == []  # the waker is removed


@pytest.mark.parametrize("event_type", [CancelEvent, asyncio.Event])
async def test_returns_when_the_event_is_set_first_and_leaves_the_task_running(
    event_type: type[asyncio.Event],
) -> None:
    event = event_type()
    task = asyncio.ensure_future(asyncio.sleep(10))
    asyncio.get_running_loop().call_later(0.01, event.set)
    await first_of(task, event)
    assert event.is_set() and not task.done()
    task.cancel()


@pytest.mark.parametrize("event_type", [CancelEvent, asyncio.Event])
async def test_timeout_and_already_decided_cases(event_type: type[asyncio.Event]) -> None:
    event = event_type()
    task = asyncio.ensure_future(asyncio.sleep(10))
    await first_of(task, event, timeout=0.01)
    assert not task.done() and not event.is_set()
    event.set()
    await first_of(task, event)  # already set: returns at once
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await first_of(task, event_type())  # already done: returns at once


async def test_cancelling_the_caller_cancels_neither_the_task_nor_the_event() -> None:
    event = CancelEvent()
    task = asyncio.ensure_future(asyncio.sleep(10))
    racer = asyncio.ensure_future(first_of(task, event))
    await asyncio.sleep(0)
    racer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await racer
    assert not task.done() and event._callbacks == []
    task.cancel()


def test_callbacks_run_once_when_set_and_can_be_removed() -> None:
    event = CancelEvent()
    calls: list[str] = []
    event.on_set(lambda: calls.append("a"))
    remove_b = event.on_set(lambda: calls.append("b"))
    remove_b()
    remove_b()  # removing twice is harmless
    event.set()
    event.set()
    assert calls == ["a"] and event.is_set()
