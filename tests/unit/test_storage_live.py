"""The live channel (agent_core._storage.live): message framing, the follower's ordering, and the sqlite
backend's loopback transport between a publisher and a follower."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agent_core._storage.live import LiveFeed, LoopbackLive, messages


def test_messages_stay_under_the_limit_and_keep_the_order() -> None:
    events = [json.dumps({"n": i, "text": "x" * 20}) for i in range(10)]
    out = messages(7, events, 120)
    assert len(out) > 1 and all(len(m.encode()) <= 120 for m in out)
    decoded = [json.loads(m) for m in out]
    assert {d["a"] for d in decoded} == {7}
    assert [e["n"] for d in decoded for e in d["e"]] == list(range(10))


def test_an_event_over_the_limit_is_dropped_and_a_wake_up_has_no_events() -> None:
    out = messages(3, [json.dumps({"big": "y" * 500}), json.dumps({"n": 1})], 100)
    assert [json.loads(m)["e"] for m in out] == [[{"n": 1}]]
    assert [json.loads(m) for m in messages(4, [], 100)] == [{"a": 4}]


def test_the_feed_releases_live_events_after_the_stored_event_they_followed() -> None:
    feed = LiveFeed()
    feed.receive(json.dumps({"a": 2, "e": [{"n": 1}]}))
    feed.receive(json.dumps({"a": 5, "e": [{"n": 2}]}))
    feed.receive(json.dumps({"a": 6}))
    feed.receive("not json")
    assert feed.stored_seq == 6 and feed.woken.is_set()
    assert [json.loads(t)["n"] for t in feed.take(4)] == [1]
    assert feed.take(4) == []
    assert [json.loads(t)["n"] for t in feed.take(5)] == [2]


def test_a_permission_wake_up_sets_the_feed_s_permission_event_only() -> None:
    assert [json.loads(m) for m in messages(0, [], 100, permission=True)] == [{"a": 0, "p": 1}]
    feed = LiveFeed()
    feed.receive(messages(3, [], 100)[0])
    assert feed.stored_seq == 3 and not feed.permission.is_set()
    feed.receive(messages(0, [], 100, permission=True)[0])
    assert feed.permission.is_set() and feed.stored_seq == 3  # the stored seq it announced stays


async def test_loopback_delivers_in_order_while_followed_and_drops_otherwise(tmp_path: Path) -> None:
    publisher, follower = LoopbackLive(tmp_path / "live"), LoopbackLive(tmp_path / "live")
    await publisher.publish("run_1", 0, [json.dumps({"n": 0})])  # nobody follows yet: dropped
    async with follower.follow("run_1") as feed:
        assert (tmp_path / "live" / "run_1.port").exists()
        for n in range(1, 6):
            await publisher.publish("run_1", n, [json.dumps({"n": n})])
        await publisher.publish("run_1", 9, [])
        for _ in range(100):
            if feed.stored_seq == 9:
                break
            await asyncio.sleep(0.01)
        assert [json.loads(t)["n"] for t in feed.take(9)] == [1, 2, 3, 4, 5]
    assert not (tmp_path / "live" / "run_1.port").exists()
    await publisher.close()
    await follower.close()
