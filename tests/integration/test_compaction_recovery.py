"""Recovery (synchronous) compaction and prompt_too_long (docs/compaction.md#recovery-compaction,
docs/compaction.md#the-conversation, docs/compaction.md#failures; case M2)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_core import RunStatus
from agent_core.types.content import text_of
from agent_core.types.enums import EndReason
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, fail, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, wait_for
from tests.integration.compaction_support import (
    SUMMARY_MARK,
    compact_input,
    compact_turn,
    held_compact,
    is_compact,
    recovery_config,
    register_blob,
    route_compact,
    words,
)

# recovery_config: no background trigger, only the overflow path. Six 600-token tool results of the
# current run (all protected, none large enough for artifact degradation) overflow the ~3270-token
# non-system budget.


def blob_calls(count: int = 6) -> list[Turn]:
    return [tool_calls(("demo.blob", {"n": 480}, f"call_{i}")) for i in range(count)]


def _nodes(env: SoongEnv, sid: str, node_type: str) -> list[dict[str, Any]]:
    found = rows(env, f'SELECT * FROM "nodes_{sid}" WHERE node_type = ? ORDER BY node_seq', node_type)
    return [{**dict(r), "metadata": json.loads(r["metadata_json"] or "{}")} for r in found]


def _compact_agents(env: SoongEnv) -> list[Any]:
    return rows(env, "SELECT * FROM agents WHERE json_extract(metadata_json, '$.purpose') = 'compact'")


async def test_recovery_blocks_the_main_request_then_continues_with_summary(
    soong_env: SoongEnv,
) -> None:
    """Case M2."""
    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await recovery_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        register_blob(rt)
        fake.script(*blob_calls(), text("all done"))
        run = await rt.start("collect the blobs")
        collector = asyncio.create_task(collect(run, debug=True))
        await wait_for(lambda: any(is_compact(r) for r in fake.requests))
        main_before = [r for r in fake.requests if not is_compact(r)]
        await asyncio.sleep(0.1)
        # no main-agent request while the recovery fork is running
        assert [r for r in fake.requests if not is_compact(r)] == main_before and len(main_before) == 6
        assert not _nodes(soong_env, run.session_id, "compaction")
        gate.set()
        events = await collector
    assert run.status == RunStatus.completed, run.error
    sid = run.session_id
    (comp,) = _nodes(soong_env, sid, "compaction")
    meta = comp["metadata"]
    assert meta["mode"] == "recovery" and meta["details"]["split_turn"] is True
    assert meta["details"]["turn_start_node_id"] == run_first_node(soong_env, sid)
    kept = rows(soong_env, f'SELECT role FROM "nodes_{sid}" WHERE node_id = ?', meta["first_kept_node_id"])[0]
    assert kept["role"] == "assistant"  # an intra-turn cut, never a tool node
    request = compact_input(next(r for r in fake.requests if is_compact(r)))
    assert "<split_turn_prefix>" in request and "collect the blobs" in request
    last = [r for r in fake.requests if not is_compact(r)][-1]
    first = last.messages[0]
    assert first.metadata.get("source_node_type") == "compaction" and SUMMARY_MARK in text_of(first.content)
    assert last.messages[1].metadata["source_node_id"] == meta["first_kept_node_id"]
    roles = [m.role for m in last.messages]
    assert roles[1:] == ["assistant", "tool"] * (len(roles[1:]) // 2)
    reports = [e.data for e in events if e.event_type == "context_built"]
    assert reports[-1]["recovery_compact"] is True and reports[-1]["compact_triggered"] == "recovery"
    assert reports[-1]["compaction_node_id"] == comp["node_id"]
    started = next(e for e in events if e.event_type == "compact_started")
    assert started.data["mode"] == "recovery" and started.data["split_turn"] is True
    completed = next(e for e in events if e.event_type == "compact_completed")
    assert completed.node_id == comp["node_id"] and completed.run_id == run.run_id


def run_first_node(env: SoongEnv, sid: str) -> str:
    return str(
        rows(env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE role = 'user' ORDER BY node_seq")[0]["node_id"]
    )


async def _overflow(env: SoongEnv, fake: FakeProvider, config: dict[str, Any]) -> tuple[Any, list[Any]]:
    async with open_runtime(env, fake, config=config) as rt:
        register_blob(rt)
        fake.script(*blob_calls())
        run = await rt.start("collect the blobs")
        events = await collect(run, debug=True)
    return run, events


def _assert_prompt_too_long(run: Any, *, attempted: bool) -> None:
    assert run.status == RunStatus.failed and run.end_reason == EndReason.prompt_too_long
    assert run.error.type == "prompt_too_long" and run.error.code == "validation_error"
    assert run.error.details["compact_attempted"] is attempted
    assert run.error.details["estimated_tokens"] > run.error.details["budget"]


async def test_failed_recovery_fork_ends_prompt_too_long(soong_env: SoongEnv) -> None:
    """Case M2."""
    fake = FakeProvider()
    route_compact(fake, lambda _r: fail("provider_error"))
    run, events = await _overflow(soong_env, fake, await recovery_config(soong_env))
    _assert_prompt_too_long(run, attempted=True)
    failed = next(e for e in events if e.event_type == "compact_failed")
    assert failed.data["reason"] == "error" and failed.data["mode"] == "recovery"
    assert not _nodes(soong_env, run.session_id, "compaction")
    assert len(_compact_agents(soong_env)) == 1
    row = rows(soong_env, "SELECT status, end_reason, error_json FROM runs WHERE run_id = ?", run.run_id)[0]
    assert (row["status"], row["end_reason"]) == ("failed", "prompt_too_long")
    assert json.loads(row["error_json"])["details"]["compact_attempted"] is True


async def test_recovery_that_still_does_not_fit_ends_prompt_too_long(soong_env: SoongEnv) -> None:
    # Long assistant texts are never artifactised, so the kept tail (two ~1500-token assistant turns)
    # plus a valid 400-token summary still exceeds the ~3270-token budget after the recovery compaction.
    """Case M2."""
    fake = FakeProvider()
    route_compact(fake, lambda _r: compact_turn(summary=f"## Goal\n{words(600)}"))
    config = await recovery_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        register_blob(rt)
        fake.script(
            *[tool_calls(("demo.blob", {"n": 3}, f"call_{i}"), lead_text=words(1450)) for i in range(3)]
        )
        run = await rt.start("think aloud")
        events = await collect(run, debug=True)
    _assert_prompt_too_long(run, attempted=True)
    assert len(_nodes(soong_env, run.session_id, "compaction")) == 1  # written, but not enough
    assert sum(1 for e in events if e.event_type == "compact_completed") == 1
    reports = [e.data for e in events if e.event_type == "context_built"]
    assert reports[-1]["recovery_compact"] is True
    assert reports[-1]["compaction_node_id"] is not None


async def test_compaction_disabled_overflow_is_prompt_too_long_without_fork(
    soong_env: SoongEnv,
) -> None:
    for overrides in ({"enabled": False}, {"recovery_sync": False}):
        fake = FakeProvider()
        config = await recovery_config(soong_env, **overrides)
        run, events = await _overflow(soong_env, fake, config)
        _assert_prompt_too_long(run, attempted=False)
        assert not any(e.event_type.startswith("compact_") for e in events)
        assert not any(is_compact(r) for r in fake.requests)
    assert not _compact_agents(soong_env)


async def test_static_overflow_is_prompt_too_long_without_fork(soong_env: SoongEnv) -> None:
    # even the deepest static degradation (system.core + one-line tool schemas) plus the 512-token output
    # floor exceeds the window (issue 13: a larger static part degrades and the reservation shrinks first)
    window = 800
    fake = FakeProvider()
    async with open_runtime(soong_env, fake, config={"model": {"context_window": window}}) as rt:
        run = await rt.start("hello")
        await collect(run)
    _assert_prompt_too_long(run, attempted=False)
    assert not fake.requests and not _compact_agents(soong_env)


async def test_recovery_is_cancelled_with_its_run(soong_env: SoongEnv) -> None:
    """Case M2."""
    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await recovery_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        register_blob(rt)
        fake.script(*blob_calls())
        run = await rt.start("collect the blobs")
        collector = asyncio.create_task(collect(run, debug=True))
        # the fork's model call is inside its held wait (a cancel before that ends its stream, not the wait)
        await wait_for(lambda: any(is_compact(r) for r in fake.requests) and fake.hanging == 1)
        result = await run.cancel()
        events = await collector
    assert result.cancelled and run.status == RunStatus.cancelled
    assert fake.cancelled == 1
    failed = next(e for e in events if e.event_type == "compact_failed")
    assert failed.data["reason"] == "cancelled"
    fork = _compact_agents(soong_env)[0]
    fork_run = rows(soong_env, "SELECT status FROM runs WHERE agent_id = ?", fork["agent_id"])[0]
    assert fork_run["status"] == "cancelled"
    assert not _nodes(soong_env, run.session_id, "compaction")
