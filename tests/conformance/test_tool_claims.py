"""Conformance: the temporal engine's tool call claims (docs/scale-out.md#3-what-a-workflow-does crash
semantics) on every backend.

Two stores open on one database stand for two worker processes: a call is claimed by exactly one of
them, a claim of a superseded plan is refused, a claim is taken over only from an owner that released it
or is dead (never from a live one), and the claims go with their session.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

from agent_core._ids import new_id
from agent_core._storage.protocol import SessionStore
from agent_core._storage.tool_claims import CallKey, RunningClaim, ToolCallClaims
from tests.conformance.conftest import make_store
from tests.conformance.helpers import new_run, new_session
from tests.fixtures.storage_env import make_redactor


def gone_owner(store: SessionStore) -> str:
    """The owner id of a process that has ended (PostgreSQL: an owner lock nobody holds)."""
    if store.backend == "postgres":
        return "pg:1"
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    return f"pid:{socket.gethostname()}:{int(proc.stdout)}:"


async def test_a_call_is_claimed_once_and_a_superseded_plan_claims_nothing(
    store: SessionStore, backend: str, tmp_path: Path
) -> None:
    other = make_store(backend, tmp_path, make_redactor())
    await other.open()
    try:
        sid, aid = await new_session(store)
        rid = await new_run(store, sid, aid)
        mine, theirs = ToolCallClaims(store), ToolCallClaims(other)
        key = CallKey(rid, sid, new_id("node_"), "call_1")
        await mine.stage(rid, sid, "plan_a")
        pairs = [(mine, store), (theirs, other)] * 4
        claims = await asyncio.gather(*(c.claim(key, "plan_a", s.claim_owner) for c, s in pairs))
        won = [c for c in claims if c.state == "won"]
        assert len(won) == 1 and won[0].attempts == 1 and not won[0].taken_over
        assert {c.state for c in claims} == {"won", "held"}
        assert {c.owner for c in claims} == {won[0].owner}
        winner = store if won[0].owner == store.claim_owner else other
        assert await mine.running(rid, key.assistant_node_id) == [
            RunningClaim(key.claim_key, winner.claim_owner)
        ]
        # the turn is staged again: the old plan claims nothing, the running claim stays its owner's
        await theirs.stage(rid, sid, "plan_b")
        later = CallKey(rid, sid, key.assistant_node_id, "call_2")
        assert (await mine.claim(later, "plan_a", store.claim_owner)).state == "superseded"
        assert (await mine.claim(key, "plan_b", "someone-else")).state == "held"
        await ToolCallClaims(winner).settle(key, winner.claim_owner, done=True)
        done = await theirs.claim(key, "plan_b", other.claim_owner)
        assert (done.state, done.owner, done.attempts) == ("done", winner.claim_owner, 1)
        assert await mine.running(rid, key.assistant_node_id) == []
    finally:
        await other.close()


async def test_a_claim_is_taken_over_only_when_released_or_its_owner_is_dead(
    store: SessionStore, backend: str, tmp_path: Path
) -> None:
    other = make_store(backend, tmp_path, make_redactor())
    await other.open()
    try:
        assert await store.live_owners([store.claim_owner, other.claim_owner]) == {
            store.claim_owner,
            other.claim_owner,
        }
        dead = gone_owner(store)
        assert await store.live_owners([dead]) == set()
        sid, aid = await new_session(store)
        rid = await new_run(store, sid, aid)
        claims = ToolCallClaims(store)
        await claims.stage(rid, sid, "plan_a")
        node = new_id("node_")
        released, crashed = CallKey(rid, sid, node, "call_1"), CallKey(rid, sid, node, "call_2")
        assert (await claims.claim(released, "plan_a", other.claim_owner)).state == "won"
        await claims.settle(released, other.claim_owner, done=False)
        again = await claims.claim(released, "plan_a", store.claim_owner)
        assert (again.state, again.attempts, again.taken_over) == ("won", 2, True)
        assert (await claims.claim(crashed, "plan_a", dead)).state == "won"
        # naming another owner dead takes nothing over; naming the claimant dead takes it over
        assert (await claims.claim(crashed, "plan_a", store.claim_owner, dead="pg:2")).state == "held"
        taken = await claims.claim(crashed, "plan_a", store.claim_owner, dead=dead)
        assert (taken.state, taken.owner, taken.attempts) == ("won", store.claim_owner, 2)
        await claims.settle(crashed, dead, done=True)  # the old owner's late settle changes nothing
        assert {c.claim_key for c in await claims.running(rid, node)} == {
            released.claim_key,
            crashed.claim_key,
        }
    finally:
        await other.close()
    if backend == "postgres":  # a closed store's owner lock is released: its claims can be taken over
        for _ in range(200):  # the server ends the closed connection's backend asynchronously
            if not await store.live_owners([other.claim_owner]):
                break
            await asyncio.sleep(0.05)
        assert await store.live_owners([other.claim_owner]) == set()


async def test_claims_go_with_their_session(store: SessionStore) -> None:
    sid, aid = await new_session(store)
    rid = await new_run(store, sid, aid)
    claims = ToolCallClaims(store)
    await claims.stage(rid, sid, "plan_a")
    key = CallKey(rid, sid, new_id("node_"), "call_1")
    assert (await claims.claim(key, "plan_a", store.claim_owner)).state == "won"
    await claims.stopped("attempt_1", rid, sid)
    assert await claims.has_stopped("attempt_1") and not await claims.has_stopped("attempt_2")
    await store.delete_session_rows(sid)
    assert await claims.running(rid, key.assistant_node_id) == []
    assert not await claims.has_stopped("attempt_1")
    assert (await claims.claim(key, "plan_a", store.claim_owner)).state == "superseded"
