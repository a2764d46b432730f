"""The postgres live channel (``NOTIFY`` / ``LISTEN``): a follower receives a run's events in order, and
closing the channel leaves no listener task behind (its reader belongs to the channel, issue 35 item 7)."""

from __future__ import annotations

import asyncio

import pytest

from agent_core._storage.live import PostgresLive

pytestmark = pytest.mark.postgres


async def test_a_follower_receives_published_events_and_close_ends_the_listener(postgres_dsn: str) -> None:
    before = asyncio.all_tasks()
    live = PostgresLive(postgres_dsn)
    async with live.follow("run_live_1") as feed:
        await live.publish("run_live_1", 3, ['{"seq": 4}', '{"seq": 5}'])
        async with asyncio.timeout(10):
            while not feed.batches:
                feed.woken.clear()
                await feed.woken.wait()
        assert feed.batches == [(3, ['{"seq": 4}', '{"seq": 5}'])]
    listeners = asyncio.all_tasks() - before
    assert listeners, "the channel listens through a reader task while followed"
    await live.close()
    assert all(task.done() for task in listeners), "close awaits the listener's reader"
