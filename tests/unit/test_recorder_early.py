"""Early writes (``RunRecorder.emit_early``): ``model_started``/``context_built`` and a read-only call's
``tool_started`` commit while the request goes out / the handler runs (issue 16). They are delivered
only once committed, in seq order, before every later event; a failed early write still fails the run."""

from __future__ import annotations

import asyncio
from typing import Any

from agent_core import RunStatus
from agent_core.errors import ErrorCode, StorageError
from agent_core.types.enums import EventType
from agent_core.types.tools import ToolDefinition
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime


def _readonly(name: str) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="Reads nothing.",
        input_schema={"type": "object", "properties": {}},
        permission="readonly",
    )


async def test_early_events_are_committed_delivered_in_seq_order_before_later_events(
    soong_env: SoongEnv,
) -> None:
    fake = FakeProvider(
        tool_calls(*[("demo.look", {}, f"call_{i}") for i in range(3)]),
        text("done", chunks=4),
    )
    async with open_runtime(soong_env, fake) as runtime:
        manager = await runtime._open()
        storage = manager.services.storage
        early: list[list[str]] = []
        original = storage.append_nowait

        def spy(session_id: str, **kwargs: Any) -> Any:
            early.append([str(d.event_type) for d in kwargs["events"]])
            return original(session_id, **kwargs)

        storage.append_nowait = spy  # type: ignore[method-assign]

        async def look(args: dict[str, object], ctx: object) -> str:
            await asyncio.sleep(0)
            return "seen"

        runtime.register_tool(_readonly("demo.look"), look)
        run = await runtime.start("go")
        events = await collect(run, debug=True)
        stored = await storage.list_events(run.session_id, run_id=run.run_id)
    assert run.status == RunStatus.completed
    assert early.count(["context_built", "model_started"]) == 2
    assert 1 <= early.count(["tool_started"]) <= 3  # a call waits when another write holds the recorder
    persisted = [e for e in events if e.seq is not None]
    # every committed event delivered exactly once, in seq order, contiguous
    assert [e.event_id for e in persisted] == [e.event_id for e in stored]
    seqs = [e.seq for e in persisted]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    kinds = [e.event_type for e in events]
    # model_started precedes the text deltas of its call; each tool_started precedes its call's result
    second_started = [i for i, k in enumerate(kinds) if k == EventType.model_started][1]
    first_delta = kinds.index(EventType.message_delta)
    assert second_started < first_delta
    for call_id in ("call_0", "call_1", "call_2"):
        started = next(
            i
            for i, e in enumerate(events)
            if e.event_type == EventType.tool_started and e.tool_call_id == call_id
        )
        done = next(
            i
            for i, e in enumerate(events)
            if e.event_type == EventType.tool_completed and e.tool_call_id == call_id
        )
        assert started < done


async def test_a_failed_early_write_fails_the_run_and_nothing_later_is_delivered_first(
    soong_env: SoongEnv,
) -> None:
    fake = FakeProvider(text("never stored"))
    async with open_runtime(soong_env, fake) as runtime:
        manager = await runtime._open()
        storage = manager.services.storage

        def broken(session_id: str, **kwargs: Any) -> Any:
            future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            future.set_exception(StorageError(ErrorCode.storage_error, "disk full"))
            return future

        storage.append_nowait = broken  # type: ignore[method-assign]
        run = await runtime.start("hello")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.failed
    assert run.error is not None and run.error.code == ErrorCode.storage_error
    kinds = [e.event_type for e in events]
    assert EventType.model_started not in kinds
    assert EventType.message_delta not in kinds and EventType.message_completed not in kinds
    assert kinds[-1] == EventType.loop_failed
