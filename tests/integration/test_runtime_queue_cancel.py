"""Session queue, cancellation, failures and the active node (cases D3–D7, D11, D13, D14; docs/runs.md)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agent_core import EndReason, ProviderError, RunStatus, ToolDefinition
from agent_core._storage.writer import Txn
from agent_core.types.enums import EventType
from agent_core.types.model import ModelEvent, ModelRequest, ModelStarted, ModelTextDelta
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, fail, hang, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, rows, types
from tests.fixtures.tool_pipeline import PermissionRecorder


def nodes(env: SoongEnv, session_id: str) -> list[dict[str, Any]]:
    out = []
    for r in rows(env, f'SELECT * FROM "nodes_{session_id}" ORDER BY node_seq'):
        item = dict(r)
        item["metadata"] = json.loads(item["metadata_json"] or "{}")
        out.append(item)
    return out


def events_of(env: SoongEnv, session_id: str, run_id: str | None = None) -> list[dict[str, Any]]:
    sql = f'SELECT * FROM "events_{session_id}"'
    params: tuple[Any, ...] = ()
    if run_id:
        sql += " WHERE run_id = ?"
        params = (run_id,)
    return [dict(r) for r in rows(env, sql + " ORDER BY seq", *params)]


def active_node(env: SoongEnv, session_id: str) -> str | None:
    return rows(env, "SELECT active_node_id FROM sessions WHERE session_id = ?", session_id)[0][
        "active_node_id"
    ]


def run_row(env: SoongEnv, run_id: str) -> dict[str, Any]:
    return dict(rows(env, "SELECT * FROM runs WHERE run_id = ?", run_id)[0])


def tool_def(name: str, permission: str = "readonly") -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} test tool.",
        input_schema={"type": "object", "properties": {}},
        permission=permission,  # type: ignore[arg-type]
    )


async def until(predicate: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.005)


# ---- D3: FIFO queue --------------------------------------------------------------------


async def test_queue_fifo(soong_env: SoongEnv) -> None:
    """Case D3."""
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate), text("two"), text("three"), text("four"))
    async with open_runtime(soong_env, fake, permission_callback=PermissionRecorder.never()) as rt:
        run1 = await rt.start("one")
        await until(lambda: len(fake.requests) == 1)
        queued = [await rt.start(m, session_id=run1.session_id) for m in ("two", "three", "four")]
        assert [r.status for r in queued] == [RunStatus.queued] * 3
        streams = [asyncio.create_task(collect(r)) for r in queued]
        await asyncio.sleep(0.05)
        assert len(fake.requests) == 1  # queued runs send nothing
        assert {run_row(soong_env, r.run_id)["status"] for r in queued} == {"queued"}
        assert run_row(soong_env, run1.run_id)["status"] == "running"
        gate.set()
        all_events = [await collect(run1), *[await s for s in streams]]
    for events in all_events[1:]:
        assert types(events)[:3] == ["run_queued", "run_dequeued", "loop_started"]
        assert events[0].data["mode"] == "normal" and events[1].data["reason"] == "started"
    positions = [e[0].data["queue_position"] for e in all_events[1:]]
    assert positions == [1, 2, 3]
    # each queued run starts only after the previous one is terminal (by seq)
    for previous, current in itertools.pairwise(all_events):
        dequeued = next(e for e in current if e.event_type == EventType.run_dequeued)
        assert (dequeued.seq or 0) > (previous[-1].seq or 0)
    loop_seqs = [next(e.seq for e in ev if e.event_type == EventType.loop_started) for ev in all_events]
    assert loop_seqs == sorted(loop_seqs)
    assert [r.metadata["run_id"] for r in fake.requests] == [run1.run_id, *[r.run_id for r in queued]]
    # the queued run's user node is a child of the previous run's final assistant node
    ns = nodes(soong_env, run1.session_id)
    users = [n for n in ns if n["role"] == "user"]
    assistants = [n for n in ns if n["role"] == "assistant"]
    assert [u["parent_id"] for u in users[1:]] == [a["node_id"] for a in assistants[:-1]]


async def test_cancel_queued_run(soong_env: SoongEnv) -> None:
    """Case D4."""
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate, then=text("first done")))
    async with open_runtime(soong_env, fake, permission_callback=PermissionRecorder.never()) as rt:
        run1 = await rt.start("one")
        run2 = await rt.start("two", session_id=run1.session_id)
        result = await run2.cancel()
        assert (result.was_queued, result.cancelled, result.already_terminal, result.timed_out) == (
            True,
            True,
            False,
            False,
        )
        assert result.status == RunStatus.cancelled and run2.status == RunStatus.cancelled
        assert run2.end_reason is None
        events2 = await collect(run2)
        assert types(events2) == ["run_queued", "run_dequeued", "run_cancelled"]
        assert events2[1].data["reason"] == "cancelled"
        assert events2[2].data["was_queued"] is True and events2[2].data["end_reason"] is None
        again = await run2.cancel()
        assert again.already_terminal and again.cancelled
        assert run1.status == RunStatus.running
        gate.set()
        await collect(run1)
        assert run1.status == RunStatus.completed
        await asyncio.sleep(0.05)
    assert len(fake.requests) == 1
    row = run_row(soong_env, run2.run_id)
    assert (row["status"], row["end_reason"], row["start_node_id"]) == ("cancelled", None, None)
    assert not [n for n in nodes(soong_env, run1.session_id) if n["run_id"] == run2.run_id]
    assert [e["event_type"] for e in events_of(soong_env, run1.session_id, run2.run_id)] == types(events2)


async def test_close_cancels_queued_and_active_runs(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate, lead_text="partial"))
    async with open_runtime(soong_env, fake) as rt:
        run1 = await rt.start("one")
        run2 = await rt.start("two", session_id=run1.session_id)
        await until(lambda: len(fake.requests) == 1 and fake.hanging == 1)  # inside the held wait
    assert run1.status == RunStatus.cancelled and run1.end_reason == EndReason.aborted_streaming
    assert run2.status == RunStatus.cancelled and run2.end_reason is None
    assert fake.cancelled == 1 and fake.closed == 1
    assert run_row(soong_env, run1.run_id)["status"] == "cancelled"
    assert run_row(soong_env, run2.run_id)["status"] == "cancelled"


# ---- D5: cancelling a streaming run ------------------------------------------------------


async def test_cancel_streaming_run(soong_env: SoongEnv) -> None:
    """Case D5."""
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate, lead_text="partial answer"), text("next run works"))
    async with open_runtime(soong_env, fake, config={"runtime": {"cancel_timeout_ms": 2000}}) as rt:
        run = await rt.start("hello")
        seen = []
        async for event in run.events(debug=True):
            seen.append(event)
            if event.event_type == EventType.message_delta:
                started = time.monotonic()
                result = await run.cancel()
                assert time.monotonic() - started < 2.0
                assert result.cancelled and not result.timed_out and result.status == RunStatus.cancelled
        names = types(seen)
        assert names[-3:] == ["aborted_streaming", "loop_aborted", "run_cancelled"]
        after_cancel = names[names.index("message_delta") + 1 :]
        assert not [n for n in after_cancel if n.startswith("model_") or n.startswith("tool_")]
        assert run.status == RunStatus.cancelled and run.end_reason == EndReason.aborted_streaming
        assert fake.cancelled == 1 and len(fake.requests) == 1
        aborted = seen[-3]
        partial_id = aborted.data["partial_node_id"]
        assert seen[-1].data == {
            "reason": seen[-1].data["reason"],
            "was_queued": False,
            "end_reason": "aborted_streaming",
        }
        later = await rt.start("again", session_id=run.session_id)
        await collect(later)
        assert later.status == RunStatus.completed
    ns = nodes(soong_env, run.session_id)
    partial = next(n for n in ns if n["node_id"] == partial_id)
    assert partial["metadata"]["partial"] is True and partial["metadata"]["aborted"] is True
    assert partial["metadata"]["abort_reason"]
    assert json.loads(partial["content_json"])[0]["text"] == "partial answer"
    user = next(n for n in ns if n["role"] == "user" and n["run_id"] == run.run_id)
    row = run_row(soong_env, run.run_id)
    assert (row["status"], row["end_reason"], row["end_node_id"]) == (
        "cancelled",
        "aborted_streaming",
        user["node_id"],
    )
    # the next run continued from the user node, skipping the partial node in its request
    second_user = next(n for n in ns if n["role"] == "user" and n["run_id"] == later.run_id)
    assert second_user["parent_id"] == user["node_id"]
    texts = [json.dumps(m.model_dump(mode="json")) for m in fake.requests[1].messages]
    assert not any("partial answer" in t for t in texts)


async def test_cancel_before_any_text_writes_no_partial_node(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await until(lambda: len(fake.requests) == 1)
        await asyncio.sleep(0.02)
        result = await run.cancel()
        events = await collect(run)
    assert result.cancelled and run.end_reason == EndReason.aborted_streaming
    aborted = next(e for e in events if e.event_type == EventType.aborted_streaming)
    assert aborted.data["partial_node_id"] is None
    assert [n["role"] for n in nodes(soong_env, run.session_id)] == ["user"]
    assert active_node(soong_env, run.session_id) == nodes(soong_env, run.session_id)[0]["node_id"]


# ---- D13: cancel timeouts ---------------------------------------------------------------


def stubborn(release: threading.Event) -> Turn:
    """A provider stream that ignores cancellation until ``release`` is set."""

    async def turn(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelStarted(provider=fake.provider_key, model=request.model)
        yield ModelTextDelta(text="working")
        while not release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                fake.cancelled += 1
                while not release.is_set():
                    try:
                        await asyncio.sleep(0.01)
                    except asyncio.CancelledError:
                        continue
                raise

    return turn


async def test_provider_ignoring_cancel_times_out(soong_env: SoongEnv) -> None:
    release = threading.Event()
    fake = FakeProvider(stubborn(release))
    async with open_runtime(soong_env, fake, config={"runtime": {"cancel_timeout_ms": 300}}) as rt:
        run = await rt.start("hello")
        await until(lambda: len(fake.requests) == 1)
        await asyncio.sleep(0.02)
        started = time.monotonic()
        result = await run.cancel()
        elapsed = time.monotonic() - started
        assert result.timed_out and 0.25 <= elapsed < 1.5
        assert not run.status.terminal
        stored = [e["event_type"] for e in events_of(soong_env, run.session_id, run.run_id)]
        assert "cancel_timeout" in stored
        timeout_event = next(
            e for e in events_of(soong_env, run.session_id, run.run_id) if e["event_type"] == "cancel_timeout"
        )
        assert json.loads(timeout_event["payload_json"]) == {"cancel_timeout_ms": 300}
        release.set()
        assert await asyncio.wait_for(run.wait(), 5) == RunStatus.cancelled
    assert run_row(soong_env, run.run_id)["status"] == "cancelled"


async def test_tool_ignoring_cancel_times_out_and_close_completes(soong_env: SoongEnv) -> None:
    """Case D13."""
    entered = threading.Event()

    def slow(args: dict[str, Any], ctx: Any) -> str:  # a sync handler: runs in a thread, uncancellable
        entered.set()
        time.sleep(2.0)
        return "late"

    fake = FakeProvider(tool_calls(("demo.slow", {}, "call_slow")))
    async with open_runtime(soong_env, fake, config={"runtime": {"cancel_timeout_ms": 300}}) as rt:
        rt.register_tool(tool_def("demo.slow"), slow)
        run = await rt.start("go")
        await until(entered.is_set)
        started = time.monotonic()
        result = await run.cancel()
        assert result.timed_out and time.monotonic() - started < 1.5
        assert "cancel_timeout" in [e["event_type"] for e in events_of(soong_env, run.session_id, run.run_id)]
        close_started = time.monotonic()
    assert time.monotonic() - close_started < 5
    assert run.status.terminal


# ---- D14: cancelling during a tool ------------------------------------------------------


async def test_cancel_during_tool(soong_env: SoongEnv) -> None:
    """Case D14."""
    entered = asyncio.Event()
    cancelled_seen: list[bool] = []

    async def sleepy(args: dict[str, Any], ctx: Any) -> str:
        """A cooperative tool: stops when the run's cancel event fires and returns its partial output."""
        entered.set()
        await asyncio.wait_for(ctx.cancel_event.wait(), 30)
        cancelled_seen.append(True)
        return "partial output so far"

    fake = FakeProvider(tool_calls(("demo.sleepy", {}, "call_sleep")))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.sleepy"), sleepy)
        run = await rt.start("go")
        await asyncio.wait_for(entered.wait(), 5)
        result = await run.cancel()
        events = await collect(run)
    assert result.cancelled and not result.timed_out
    assert run.status == RunStatus.cancelled and run.end_reason == EndReason.aborted_tools
    names = types(events)
    assert names[-3:] == ["aborted_tools", "loop_aborted", "run_cancelled"]
    failed = next(e for e in events if e.event_type == EventType.tool_failed)
    assert failed.tool_call_id == "call_sleep" and failed.data["aborted"] is True
    assert events[-3].data["tool_call_ids"] == ["call_sleep"]
    assert len(fake.requests) == 1 and cancelled_seen
    ns = nodes(soong_env, run.session_id)
    tool_node = next(n for n in ns if n["role"] == "tool")
    block = json.loads(tool_node["content_json"])[0]
    assert block["is_error"] is True and block["error"]["code"] == "cancelled"
    assert tool_node["metadata"]["aborted"] is True and tool_node["metadata"]["partial"] is True
    assert "partial output so far" in tool_node["content_json"]
    assert tool_node["metadata"]["abort_reason"]
    assert failed.node_id == tool_node["node_id"]
    # the aborted tool node completes the pairing and is the last user-visible node
    assert active_node(soong_env, run.session_id) == tool_node["node_id"]
    assert run_row(soong_env, run.run_id)["end_reason"] == "aborted_tools"


# ---- ----------------------------------------------------------------------------------------


async def test_cancel_completed_run_is_noop(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("done"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await collect(run)
        before = events_of(soong_env, run.session_id)
        result = await run.cancel()
        assert result.already_terminal and not result.cancelled and result.status == RunStatus.completed
        assert run.status == RunStatus.completed and run.end_reason == EndReason.completed
        assert events_of(soong_env, run.session_id) == before
    assert run_row(soong_env, run.run_id)["status"] == "completed"


# ---- D6 / D7: failures and the active node --------------------------------------


async def test_active_node_after_success(soong_env: SoongEnv) -> None:
    """Case D6."""
    fake = FakeProvider(tool_calls(("code.list_dir", {"path": "."}, "call_1")), text("final"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await collect(run)
    ns = nodes(soong_env, run.session_id)
    assert [n["role"] for n in ns] == ["user", "assistant", "tool", "assistant"]
    assert (
        active_node(soong_env, run.session_id)
        == ns[-1]["node_id"]
        == run_row(soong_env, run.run_id)["end_node_id"]
    )
    assert [n["parent_id"] for n in ns] == [None, *[n["node_id"] for n in ns[:-1]]]


async def test_provider_failure_after_partial_text(soong_env: SoongEnv) -> None:
    """Case D7a."""
    fake = FakeProvider(fail("provider_error", after_text="half an ans"), text("recovered"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)  # iterating never raises
        assert run.status == RunStatus.failed and run.end_reason == EndReason.failed
        assert run.error is not None and run.error.code == "provider_error"
        names = types(events)
        assert names[-2:] == ["error", "loop_failed"] and "model_failed" in names
        model_failed = next(e for e in events if e.event_type == EventType.model_failed)
        partial_id = model_failed.data["partial_node_id"]
        assert partial_id and model_failed.data["error"]["code"] == "provider_error"
        nxt = await rt.start("try again", session_id=run.session_id)
        await collect(nxt)
        replay = await rt.replay_session(run.session_id)
    ns = nodes(soong_env, run.session_id)
    user = ns[0]
    partial = next(n for n in ns if n["node_id"] == partial_id)
    assert partial["metadata"]["partial"] is True and partial["metadata"]["failed"] is True
    assert partial["metadata"]["error"]["type"] == "server"
    row = run_row(soong_env, run.run_id)
    assert (row["status"], row["end_reason"], row["end_node_id"]) == ("failed", "failed", user["node_id"])
    assert json.loads(row["error_json"])["code"] == "provider_error"
    stored = [e["event_type"] for e in events_of(soong_env, run.session_id, run.run_id)]
    assert "error" in stored and stored[-1] == "loop_failed"
    # the next request excludes the partial node; replay still shows it with its failure reason
    dumped = json.dumps([m.model_dump(mode="json") for m in fake.requests[1].messages])
    assert "half an ans" not in dumped and "hello" in dumped
    shown = next(n for n in replay.nodes if n.node_id == partial_id)
    assert shown.metadata["failed"] is True and shown.metadata["error"]["message"]
    second_user = next(n for n in ns if n["run_id"] == nxt.run_id and n["role"] == "user")
    assert second_user["parent_id"] == user["node_id"]


def raising_turn(exc: BaseException, after_text: str = "") -> Turn:
    async def turn(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelStarted(provider=fake.provider_key, model=request.model)
        if after_text:
            yield ModelTextDelta(text=after_text)
        raise exc

    return turn


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ProviderError("provider_rate_limited", "slow down", retryable=True), "provider_rate_limited"),
        (RuntimeError("adapter bug"), "internal_error"),
    ],
)
async def test_provider_raising_mid_stream(soong_env: SoongEnv, exc: BaseException, code: str) -> None:
    fake = FakeProvider(raising_turn(exc, after_text="some text"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)
    assert run.status == RunStatus.failed and run.error is not None and run.error.code == code
    if code == "internal_error":  # the unexpected exception is named, the partial text kept (below)
        assert run.error.message == "RuntimeError: adapter bug"
    assert types(events)[-2:] == ["error", "loop_failed"]
    ns = nodes(soong_env, run.session_id)
    partial = [n for n in ns if n["role"] == "assistant"]
    assert len(partial) == 1 and partial[0]["metadata"]["failed"] is True
    assert active_node(soong_env, run.session_id) == ns[0]["node_id"]


async def test_storage_failure_on_assistant_node(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case D7b."""
    real = Txn.executemany

    def failing(self: Txn, sql: str, params: Any) -> None:
        params = list(params)
        if (
            "INSERT INTO" in sql
            and '"events_' in sql
            and any("model_completed" in map(str, p) for p in params)
        ):
            raise OSError("injected: disk full")
        real(self, sql, params)

    monkeypatch.setattr(Txn, "executemany", failing)
    fake = FakeProvider(text("never stored"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await collect(run)
    assert run.status == RunStatus.failed and run.end_reason == EndReason.failed
    assert run.error is not None and run.error.code == "storage_error"
    assert types(events)[-2:] == ["error", "loop_failed"]
    ns = nodes(soong_env, run.session_id)
    assert [n["role"] for n in ns] == ["user"]  # neither the node nor its events were stored
    stored = [e["event_type"] for e in events_of(soong_env, run.session_id)]
    assert "model_completed" not in stored and "message_completed" not in stored
    assert active_node(soong_env, run.session_id) == ns[0]["node_id"]
    assert json.loads(run_row(soong_env, run.run_id)["error_json"])["code"] == "storage_error"


# ---- D11: independent sessions ----------------------------------------------------------------------


async def test_sessions_run_concurrently(soong_env: SoongEnv) -> None:
    """Case D11."""
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    def route(request: ModelRequest) -> Turn:
        text_in = json.dumps([m.model_dump(mode="json") for m in request.messages])
        key = "a" if "session A" in text_in else "b"
        return hang(gates[key], then=text(f"reply {key}"))

    fake = FakeProvider().route(route)
    async with open_runtime(soong_env, fake) as rt:
        run_a = await rt.start("session A")
        run_b = await rt.start("session B")
        assert run_a.session_id != run_b.session_id
        await until(lambda: len(fake.requests) == 2)  # both requests in flight at the same time
        assert run_a.status == run_b.status == RunStatus.running
        gates["b"].set()
        await collect(run_b)
        assert run_b.status == RunStatus.completed and run_a.status == RunStatus.running
        gates["a"].set()
        await collect(run_a)
    for run, key in ((run_a, "a"), (run_b, "b")):
        ns = nodes(soong_env, run.session_id)
        assert [n["role"] for n in ns] == ["user", "assistant"]
        assert json.loads(ns[1]["content_json"])[0]["text"] == f"reply {key}"
        assert active_node(soong_env, run.session_id) == ns[1]["node_id"]


async def test_concurrent_starts_on_one_session_queue_in_order(soong_env: SoongEnv) -> None:
    """Case D3."""
    gate = asyncio.Event()
    fake = FakeProvider(text("a"), hang(gate), text("c"), text("d"))
    async with open_runtime(soong_env, fake) as rt:
        first = await rt.start("one")
        await collect(first)
        sid = first.session_id
        # a fresh runtime: the session is loaded (and recovered) by the first of the concurrent calls only
    async with open_runtime(soong_env, fake, write_config=False) as rt2:
        runs = await asyncio.gather(*[rt2.start(f"message {i}", session_id=sid) for i in range(3)])
        assert [r.status for r in runs].count(RunStatus.queued) == 2
        await until(lambda: len(fake.requests) == 2)
        await asyncio.sleep(0.05)
        assert len(fake.requests) == 2  # only one run of the session is active at a time
        gate.set()
        for run in runs:
            await collect(run)
    assert [r.status for r in runs] == [RunStatus.completed] * 3
    users = [n for n in nodes(soong_env, sid) if n["role"] == "user"]
    assert [json.loads(u["content_json"])[0]["text"] for u in users[1:]] == [f"message {i}" for i in range(3)]
    assert [r["status"] for r in rows(soong_env, "SELECT status FROM runs WHERE session_id = ?", sid)] == [
        "completed"
    ] * 4


async def test_storage_failure_while_committing_a_tool_result_fails_the_run(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Txn.executemany

    def failing(self: Txn, sql: str, params: Any) -> None:
        params = list(params)
        if (
            "INSERT INTO" in sql
            and '"events_' in sql
            and any("tool_completed" in map(str, p) for p in params)
        ):
            raise OSError("injected: disk full")
        real(self, sql, params)

    monkeypatch.setattr(Txn, "executemany", failing)
    fake = FakeProvider(
        tool_calls(("code.list_dir", {"path": "."}, "call_1"), ("code.list_dir", {"path": "."}, "call_2"))
    )
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        events = await asyncio.wait_for(collect(run), 10)
    assert run.status == RunStatus.failed and run.error is not None and run.error.code == "storage_error"
    assert types(events)[-2:] == ["error", "loop_failed"] and len(fake.requests) == 1
    assert [n["role"] for n in nodes(soong_env, run.session_id)] == ["user", "assistant"]
    assert run_row(soong_env, run.run_id)["status"] == "failed"


async def test_concurrent_and_repeated_cancel_are_idempotent(soong_env: SoongEnv) -> None:
    gate = asyncio.Event()
    fake = FakeProvider(hang(gate, lead_text="x"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await until(lambda: fake.hanging == 1)  # the stream is inside its hang (cold first use is slow)
        first, second = await asyncio.gather(run.cancel(), run.cancel())
        third = await run.cancel()
        events = await collect(run)
    assert first.cancelled and second.cancelled and not first.timed_out and not second.timed_out
    assert third.already_terminal and third.cancelled and third.status == RunStatus.cancelled
    assert types(events).count("run_cancelled") == 1 and types(events).count("aborted_streaming") == 1
    stored = [e["event_type"] for e in events_of(soong_env, run.session_id, run.run_id)]
    assert stored.count("run_cancelled") == 1 and fake.cancelled == 1
