"""Background compaction through the public runtime (docs/compaction.md#background-compaction,
docs/compaction.md#stale-compactions, docs/compaction.md#the-compact-fork; cases M1, M3, M5, M13)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent_core import RunStatus
from agent_core.types.content import text_of
from agent_core.types.enums import EndReason
from tests.fixtures.env import REMOVE, SoongEnv
from tests.fixtures.fake_provider import FakeProvider, fail, hang, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, types, wait_for
from tests.fixtures.tool_pipeline import PermissionRecorder
from tests.integration.compaction_support import (
    SUMMARY_MARK,
    background_config,
    compact_turn,
    held_compact,
    is_compact,
    register_blob,
    route_compact,
    words,
)
from tests.integration.test_runtime_hooks_mcp import hook


async def _two_turns(rt: object, fake: FakeProvider) -> str:
    fake.script(text(words(300)), text(words(300)))
    first = await rt.start("first question")  # type: ignore[attr-defined]
    await collect(first)
    second = await rt.start("second question", session_id=first.session_id)  # type: ignore[attr-defined]
    await collect(second)
    assert first.status == second.status == RunStatus.completed
    return str(first.session_id)


def _events(env: SoongEnv, sid: str, event_type: str) -> list[dict[str, object]]:
    found = rows(
        env,
        f'SELECT event_type, agent_id, run_id, node_id, payload_json FROM "events_{sid}" WHERE event_type = ?',
        event_type,
    )
    return [{**dict(r), "payload": json.loads(r["payload_json"])} for r in found]


def _nodes(env: SoongEnv, sid: str, node_type: str) -> list[dict[str, object]]:
    found = rows(env, f'SELECT * FROM "nodes_{sid}" WHERE node_type = ? ORDER BY node_seq', node_type)
    return [{**dict(r), "metadata": json.loads(r["metadata_json"] or "{}")} for r in found]


async def test_background_compaction_is_non_blocking_and_applied(
    soong_env: SoongEnv,
) -> None:
    """Case M1."""
    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third answer"))
        third = await rt.start("third question", session_id=sid)
        events = await collect(third, debug=True)
        # the main run sent its request and completed while the compact request is still held
        assert third.status == RunStatus.completed and not gate.is_set()
        names = types(events)
        assert "compact_pending" in names and "compact_started" in names
        assert names.index("compact_pending") < names.index("model_started")
        started = next(e for e in events if e.event_type == "compact_started")
        assert started.data["mode"] == "auto" and started.agent_id == third.agent_id
        assert started.run_id == third.run_id
        pending = next(e for e in events if e.event_type == "compact_pending")
        threshold = config["model"]["context_window"] - config["compact"]["reserve_tokens"]
        assert pending.data["tokens_estimate"] > pending.data["threshold"] == threshold
        report = next(e for e in events if e.event_type == "context_built")
        assert report.data["compact_triggered"] == "auto"
        fork = rows(
            soong_env,
            "SELECT * FROM agents WHERE session_id = ? AND agent_type = 'fork'",
            sid,
        )
        assert len(fork) == 1
        meta = json.loads(fork[0]["metadata_json"])
        assert meta["purpose"] == "compact" and meta["agent_definition_id"] == "default_compact_agent"
        assert fork[0]["parent_agent_id"] == third.agent_id and fork[0]["created_by_run_id"] == third.run_id
        session_meta = json.loads(rows(soong_env, "SELECT metadata_json FROM sessions")[0]["metadata_json"])
        entry = session_meta["compact_pending"][third.agent_id]
        assert entry["compact_run_id"] == started.data["child_run_id"] and entry["mode"] == "auto"
        tip_before = rows(soong_env, "SELECT active_node_id FROM sessions")[0]["active_node_id"]
        assert not _nodes(soong_env, sid, "compaction")

        gate.set()
        await wait_for(lambda: bool(_nodes(soong_env, sid, "compaction")))
        (comp,) = _nodes(soong_env, sid, "compaction")
        assert comp["parent_id"] == tip_before and comp["role"] == "user"
        assert comp["agent_id"] == third.agent_id and comp["run_id"] == third.run_id
        assert SUMMARY_MARK in comp["content_json"]
        metadata = comp["metadata"]
        assert isinstance(metadata, dict)
        for key in ("first_kept_node_id", "tokens_before", "details", "covered_tip_node_id", "mode"):
            assert key in metadata
        assert (
            metadata["mode"] == "auto"
            and metadata["covered_tip_node_id"] == started.data["covered_tip_node_id"]
        )
        assert metadata["details"]["compact_run_id"] == started.data["child_run_id"]
        await wait_for(
            lambda: (
                rows(soong_env, "SELECT active_node_id FROM sessions")[0]["active_node_id"] == comp["node_id"]
            )
        )
        (completed,) = _events(soong_env, sid, "compact_completed")
        assert completed["node_id"] == comp["node_id"]
        assert completed["payload"]["compaction_node_id"] == comp["node_id"]
        assert completed["payload"]["stale"] is False
        await wait_for(
            lambda: (
                "compact_pending"
                not in json.loads(
                    rows(soong_env, "SELECT metadata_json FROM sessions")[0]["metadata_json"] or "{}"
                )
            )
        )
        fork_run = rows(soong_env, "SELECT * FROM runs WHERE run_id = ?", started.data["child_run_id"])[0]
        assert fork_run["status"] == "completed"
        assert json.loads(fork_run["metadata_json"])["model"]["profile"] == "compact"

        # the next request starts with the summary, then the kept tail; covered nodes are absent
        fake.script(text("fourth answer"))
        fourth = await rt.start("fourth question", session_id=sid)
        await collect(fourth)
        request = [r for r in fake.requests if not is_compact(r)][-1]
        first = request.messages[0]
        assert first.role == "user" and first.metadata["synthetic"] is True
        assert first.metadata["source_node_type"] == "compaction"
        assert text_of(first.content).startswith(
            f'<compaction_summary first_kept_node_id="{metadata["first_kept_node_id"]}">'
        )
        texts = [text_of(m.content) for m in request.messages]
        assert not any("first question" in t for t in texts)
        assert any("second question" in t for t in texts) and texts[-1] == "fourth question"


async def test_failed_background_compaction_leaves_the_run_unaffected(
    soong_env: SoongEnv,
) -> None:
    """Cases M13, M3."""
    fake = FakeProvider()
    route_compact(fake, lambda _r: fail("provider_error"))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third answer"))
        third = await rt.start("third question", session_id=sid)
        await collect(third)
        assert third.status == RunStatus.completed and third.end_reason == EndReason.completed
        await wait_for(lambda: bool(_events(soong_env, sid, "compact_failed")))
        (failed,) = _events(soong_env, sid, "compact_failed")
        payload = failed["payload"]
        assert isinstance(payload, dict)
        assert payload["stale"] is False and payload["reason"] == "error"
        assert payload["error"]["code"] == "provider_error"
        assert failed["agent_id"] == third.agent_id and failed["run_id"] == third.run_id
        assert not _nodes(soong_env, sid, "compaction")
        child_run_id = payload["compact_run_id"]
        # the fork is persisted like any agent and visible through inspect (purpose / definition id)
        inspected = await third.inspect_child(child_run_id)
        assert inspected.agent.purpose == "compact" and inspected.agent.agent_type == "fork"
        assert inspected.agent.agent_definition_id == "default_compact_agent"
        assert inspected.run.status == RunStatus.failed
        assert any(e.event_type == "model_failed" for e in inspected.events)
        assert inspected.nodes and inspected.nodes[0].parent_id is None
        assert "<conversation>" in text_of(inspected.nodes[0].content)
        replay = await rt.replay_session(sid)
        assert [c.purpose for c in replay.children] == ["compact"]
        await wait_for(
            lambda: (
                "compact_pending"
                not in json.loads(
                    rows(soong_env, "SELECT metadata_json FROM sessions")[0]["metadata_json"] or "{}"
                )
            )
        )
        runs = rows(soong_env, "SELECT status, end_reason FROM runs WHERE run_id = ?", third.run_id)[0]
        assert (runs["status"], runs["end_reason"]) == ("completed", "completed")


async def test_empty_summary_or_missing_cut_is_a_schema_error(soong_env: SoongEnv) -> None:
    """Case M13."""
    answers = iter(
        [compact_turn(summary="   "), compact_turn(first_kept_node_id=None), text("not json at all")]
    )
    fake = FakeProvider()
    route_compact(fake, lambda _r: next(answers))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        for n in range(3):
            fake.script(text(f"answer {n}"))
            run = await rt.start(f"question {n}", session_id=sid)
            await collect(run)
            assert run.status == RunStatus.completed
            await wait_for(lambda n=n: len(_events(soong_env, sid, "compact_failed")) == n + 1)  # type: ignore[misc]
        failures = [e["payload"] for e in _events(soong_env, sid, "compact_failed")]
        assert [f["reason"] for f in failures] == ["invalid_payload"] * 3  # type: ignore[index]
        assert all(f["error"]["code"] == "schema_error" for f in failures)  # type: ignore[index]
        assert not _nodes(soong_env, sid, "compaction")


async def test_stale_after_switch_node(soong_env: SoongEnv) -> None:
    """Case M5."""
    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third answer"))
        third = await rt.start("third question", session_id=sid)
        await collect(third)
        await wait_for(lambda: bool(_events(soong_env, sid, "compact_started")))
        first_answer = rows(
            soong_env, f"SELECT node_id FROM \"nodes_{sid}\" WHERE role = 'assistant' ORDER BY node_seq"
        )[0]["node_id"]
        await rt.switch_node(sid, first_answer)  # an in-flight compact fork does not block the switch
        gate.set()
        await wait_for(lambda: bool(_events(soong_env, sid, "compact_failed")))
        (stale,) = _events(soong_env, sid, "compact_failed")
        payload = stale["payload"]
        assert isinstance(payload, dict)
        assert payload["stale"] is True and payload["reason"] == "stale" and payload["error"] is None
        assert not _nodes(soong_env, sid, "compaction") and not _events(soong_env, sid, "compact_completed")
        fork_run = rows(soong_env, "SELECT status FROM runs WHERE run_id = ?", payload["compact_run_id"])
        assert fork_run[0]["status"] == "completed"
        assert rows(soong_env, "SELECT 1 FROM agents WHERE agent_type = 'fork'")
        assert rows(soong_env, "SELECT active_node_id FROM sessions")[0]["active_node_id"] == first_answer
        fake.script(text("branch answer"))
        branch = await rt.start("on the branch", session_id=sid)
        await collect(branch)
        request = [r for r in fake.requests if not is_compact(r)][-1]
        assert not any(SUMMARY_MARK in text_of(m.content) for m in request.messages)
        assert [text_of(m.content) for m in request.messages][-1] == "on the branch"


async def test_compaction_is_applied_at_the_next_safe_point_of_a_running_run(soong_env: SoongEnv) -> None:
    """Case M1."""
    from agent_core import ToolDefinition

    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:

        async def release(args: dict[str, object], ctx: object) -> str:
            gate.set()
            await wait_for(lambda: bool(_events(soong_env, sid, "compact_started")))
            await asyncio.sleep(0.2)  # the fork answers while this tool call is still running
            return "released"

        rt.register_tool(
            ToolDefinition(
                name="demo.release",
                description="Releases the held compaction.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            release,
        )
        sid = await _two_turns(rt, fake)
        fake.script(tool_calls(("demo.release", {}, "call_rel")), text("after the tool"))
        third = await rt.start("third question", session_id=sid)
        await collect(third)
        assert third.status == RunStatus.completed
        (comp,) = _nodes(soong_env, sid, "compaction")
        parent = rows(soong_env, f'SELECT role FROM "nodes_{sid}" WHERE node_id = ?', comp["parent_id"])[0]
        assert parent["role"] == "tool"  # after the tool results, never between a call and its result
        second_request = [r for r in fake.requests if not is_compact(r)][-1]
        assert second_request.messages[0].metadata.get("source_node_type") == "compaction"
        roles = [m.role for m in second_request.messages]
        assert roles[-2:] == ["assistant", "tool"]


async def test_stale_by_supersession_of_a_recovery_compaction(soong_env: SoongEnv) -> None:
    """Case M5."""
    gate = asyncio.Event()
    compact_requests: list[object] = []

    def choose(request: object) -> object:
        compact_requests.append(request)
        return held_compact(gate) if len(compact_requests) == 1 else compact_turn()

    fake = FakeProvider()
    route_compact(fake, choose)  # type: ignore[arg-type]
    config = await background_config(soong_env, setup=register_blob)
    async with open_runtime(soong_env, fake, config=config) as rt:
        register_blob(rt)
        sid = await _two_turns(rt, fake)
        blobs = [tool_calls(("demo.blob", {"n": 300}, f"call_{i}")) for i in range(6)]
        fake.script(*blobs, text("done"))
        third = await rt.start("third question", session_id=sid)
        events = await collect(third, debug=True)
        assert third.status == RunStatus.completed, third.error
        modes = [e.data["mode"] for e in events if e.event_type == "compact_started"]
        assert modes == ["auto", "recovery"]
        (recovery_node,) = _nodes(soong_env, sid, "compaction")
        assert recovery_node["metadata"]["mode"] == "recovery"  # type: ignore[index]
        gate.set()
        await wait_for(lambda: bool(_events(soong_env, sid, "compact_failed")))
        (stale,) = _events(soong_env, sid, "compact_failed")
        assert stale["payload"]["stale"] is True and stale["payload"]["reason"] == "stale"  # type: ignore[index]
        assert len(_nodes(soong_env, sid, "compaction")) == 1


async def test_compact_fork_has_no_tools_hooks_or_permissions(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case M4."""
    log = tmp_path / "hooks.log"
    rules = {
        "Stop": [{"hooks": [hook("--log", str(log))]}],
        "PreToolUse": [{"hooks": [hook("--log", str(log))]}],
    }
    config = await background_config(soong_env, {"memory": {"enabled": True}})
    soong_env.write_home("hooks.json", json.dumps({"version": 1, "hooks": rules}))
    forbidden = (
        "internal.recall_memory",
        "agent.plan_template",
        "agent.task_create",
        "agent.create_sub_agent",
    )
    first_turn = tool_calls(*((name, {}, f"call_x{i}") for i, name in enumerate(forbidden)))
    answers = iter([first_turn])
    fake = FakeProvider()
    route_compact(fake, lambda _r: next(answers, compact_turn()))
    async with open_runtime(
        soong_env, fake, config=config, permission_callback=PermissionRecorder.never()
    ) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third answer"))
        third = await rt.start("third question", session_id=sid)
        await collect(third)
        await wait_for(lambda: bool(_nodes(soong_env, sid, "compaction")))
    compact_requests = [r for r in fake.requests if is_compact(r)]
    assert len(compact_requests) >= 2 and all(r.tools == [] for r in compact_requests)
    assert all(r.metadata["agent_type"] == "fork" for r in compact_requests)
    fork_agent = compact_requests[0].metadata["agent_id"]
    assert compact_requests[1].metadata["agent_id"] == fork_agent  # the second turn of the same fork
    results = rows(
        soong_env,
        f"SELECT content_json FROM \"nodes_{sid}\" WHERE agent_id = ? AND role = 'tool'",
        fork_agent,
    )
    blocks = [json.loads(r["content_json"])[0] for r in results]
    assert len(blocks) == len(forbidden)
    assert all(b["is_error"] and b["error"]["code"] == "tool_not_available" for b in blocks)
    assert not (soong_env.project / ".soong-agent" / "tasks").exists()
    assert (
        not any((soong_env.home / "memory").rglob("*.md")) if (soong_env.home / "memory").exists() else True
    )
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["input"]["hook_event"] for e in entries].count("Stop") == 3  # the three main runs only
    assert fork_agent not in log.read_text()


async def test_compact_model_profile(soong_env: SoongEnv) -> None:
    """Case M11."""
    fake = FakeProvider()
    route_compact(fake, lambda _r: compact_turn())
    config = await background_config(
        soong_env,
        {
            "model_overrides": {
                "compact": {"name": "compact-model", "max_output_tokens": 300, "temperature": 0.3}
            },
            "compact": {"max_summary_tokens": 200},
        },
    )
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third"))
        await collect(await rt.start("third question", session_id=sid))
        await wait_for(lambda: bool(_nodes(soong_env, sid, "compaction")))
    (request,) = [r for r in fake.requests if is_compact(r)]
    assert (request.model, request.max_output_tokens, request.temperature) == ("compact-model", 200, 0.3)
    main = next(r for r in fake.requests if not is_compact(r))
    assert (main.model, main.max_output_tokens, main.temperature) == ("test-model", 1024, 0.0)


async def test_compact_without_profile_uses_the_main_model(soong_env: SoongEnv) -> None:
    """Case M11."""
    fake = FakeProvider()
    route_compact(fake, lambda _r: compact_turn())
    config = await background_config(soong_env, {"model": {"temperature": 0.7}})
    config["compact"]["model_profile"] = REMOVE
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third"))
        await collect(await rt.start("third question", session_id=sid))
        await wait_for(lambda: bool(_nodes(soong_env, sid, "compaction")))
    (request,) = [r for r in fake.requests if is_compact(r)]
    # main [model] unchanged, output capped by compact.max_summary_tokens (512 < 1024)
    assert (request.model, request.max_output_tokens, request.temperature) == ("test-model", 512, 0.7)
    assert fake.configs[-1].profile is None


async def test_runtime_close_cancels_in_flight_compaction_and_startup_clears_leftovers(
    soong_env: SoongEnv,
) -> None:
    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third"))
        third = await rt.start("third question", session_id=sid)
        await collect(third)
        # the fork's model call is inside its held wait (a close before that ends its stream, not the wait)
        await wait_for(lambda: any(is_compact(r) for r in fake.requests) and fake.hanging == 1)
    assert fake.cancelled == 1
    (failed,) = _events(soong_env, sid, "compact_failed")
    assert failed["payload"]["reason"] == "cancelled" and failed["payload"]["stale"] is False  # type: ignore[index]
    fork_run_id = failed["payload"]["compact_run_id"]  # type: ignore[index]
    run = rows(soong_env, "SELECT status FROM runs WHERE run_id = ?", fork_run_id)[0]
    assert run["status"] == "cancelled"
    assert "compact_pending" not in json.loads(
        rows(soong_env, "SELECT metadata_json FROM sessions")[0]["metadata_json"] or "{}"
    )
    # a crashed process leaves a pending entry and a running fork run behind
    conn = sqlite3.connect(soong_env.home / "sessions.sqlite")
    with conn:
        conn.execute("UPDATE runs SET status = 'running' WHERE run_id = ?", (fork_run_id,))
        pending = {"compact_pending": {third.agent_id: {"compact_run_id": fork_run_id, "mode": "auto"}}}
        conn.execute("UPDATE sessions SET metadata_json = ?", (json.dumps(pending),))
    conn.close()
    async with open_runtime(soong_env, FakeProvider(), write_config=False) as rt:
        await rt.replay_session(sid)
    run = rows(soong_env, "SELECT status FROM runs WHERE run_id = ?", fork_run_id)[0]
    assert run["status"] == "aborted"
    assert "compact_pending" not in json.loads(
        rows(soong_env, "SELECT metadata_json FROM sessions")[0]["metadata_json"] or "{}"
    )


async def test_background_fork_timeout_is_a_compact_failure(soong_env: SoongEnv) -> None:
    """Case M13."""
    gate = asyncio.Event()  # never set: the fork hangs until its timeout
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env, {"agents": {"default_child_timeout_ms": 300}})
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third"))
        third = await rt.start("third question", session_id=sid)
        await collect(third)
        assert third.status == RunStatus.completed
        await wait_for(lambda: bool(_events(soong_env, sid, "compact_failed")))
    (failed,) = _events(soong_env, sid, "compact_failed")
    payload = failed["payload"]
    assert isinstance(payload, dict)
    assert payload["reason"] == "timeout" and payload["error"]["code"] == "timeout"
    fork_run = rows(
        soong_env, "SELECT status, end_reason FROM runs WHERE run_id = ?", payload["compact_run_id"]
    )
    assert fork_run[0]["status"] == "aborted"
    assert not _nodes(soong_env, sid, "compaction")


# ---- several processes (runtimes) on one home (issue 40) -------------------------------------------------


async def test_a_second_runtime_opening_the_home_leaves_a_live_background_compaction_alone(
    soong_env: SoongEnv,
) -> None:
    gate = asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third"))
        await collect(await rt.start("third question", session_id=sid))
        await wait_for(lambda: any(is_compact(r) for r in fake.requests) and fake.hanging == 1)
        async with open_runtime(soong_env, FakeProvider(), write_config=False) as other:  # clears leftovers
            started = [
                e for e in (await other.replay_session(sid)).events if str(e.event_type) == "compact_started"
            ]
            during = await other.replay_run(started[0].data["child_run_id"])
        gate.set()
        await wait_for_async(lambda: _has_compaction(rt, sid))
        replay = await rt.replay_session(sid)
    kinds = [str(e.event_type) for e in replay.events if str(e.event_type).startswith("compact_")]
    assert kinds == ["compact_pending", "compact_started", "compact_completed"]  # neither aborted nor failed
    assert [str(n.node_type) for n in replay.nodes].count("compaction") == 1
    assert [str(r.status) for r in during.runs] == ["running"]  # the live fork was left alone


async def test_a_finished_background_compaction_waits_while_another_runtime_runs_the_session(
    soong_env: SoongEnv,
) -> None:
    gate, held = asyncio.Event(), asyncio.Event()
    fake = FakeProvider()
    route_compact(fake, lambda _r: held_compact(gate))
    config = await background_config(soong_env)
    async with open_runtime(soong_env, fake, config=config) as rt:
        sid = await _two_turns(rt, fake)
        fake.script(text("third"))
        await collect(await rt.start("third question", session_id=sid))
        await wait_for(lambda: any(is_compact(r) for r in fake.requests) and fake.hanging == 1)
        other_model = FakeProvider(hang(held, then=text("the other runtime's answer")))
        async with open_runtime(soong_env, other_model, write_config=False) as other:
            running = await other.start("meanwhile, elsewhere", session_id=sid)
            await wait_for(lambda: other_model.hanging == 1)  # its run holds the session
            gate.set()  # the compaction finishes while that run goes on
            await asyncio.sleep(0.6)
            assert not await _has_compaction(rt, sid), "applied beside another process's run"
            held.set()
            assert (await running.wait()).value == "completed"
        await wait_for_async(lambda: _has_compaction(rt, sid))
        replay = await rt.replay_session(sid)
    nodes = replay.nodes
    assert [n.parent_id for n in nodes] == [None, *(n.node_id for n in nodes[:-1])]  # one chain, no fork
    assert str(nodes[-1].node_type) == "compaction"
    assert [str(n.node_type) for n in nodes].count("compaction") == 1


async def _has_compaction(rt: Any, session_id: str) -> bool:
    replay = await rt.replay_session(session_id)
    return any(str(n.node_type) == "compaction" for n in replay.nodes)


async def wait_for_async(check: Callable[[], Awaitable[bool]], timeout: float = 15) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)
