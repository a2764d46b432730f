"""The runtime side of the temporal engine (engine/temporal/_client.py) with a stand-in Temporal client: the
result of a cancelled workflow, which ended with an error before the follower read the run's end from the
store, is retrieved (asyncio would log "Future exception was never retrieved" when it is collected)."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from agent_core import RunStatus
from agent_core._storage.protocol import SessionStore
from agent_core.engine.temporal._client import TemporalEngine
from agent_core.engine.temporal._payloads import RunInput
from agent_core.types.enums import EndReason
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider
from tests.fixtures.runtime import open_runtime


class CancelledWorkflowError(Exception):
    """What ``WorkflowHandle.result()`` raises for a cancelled workflow (here without a server)."""


class Handle:
    """A workflow that runs until it is cancelled; its cancellation ends the run in the store first (as
    the worker's cancelled step does), then the workflow, with an error."""

    id = "soong-run-test"

    def __init__(self, storage: SessionStore, run_id: str) -> None:
        self.storage = storage
        self.run_id = run_id
        self.ended = asyncio.Event()

    async def result(self) -> Any:
        await self.ended.wait()
        raise CancelledWorkflowError(f"workflow of {self.run_id} cancelled")

    async def cancel(self) -> None:
        await self.storage.update_run(
            self.run_id, status=RunStatus.cancelled, end_reason=EndReason.aborted_streaming
        )
        self.ended.set()


class Client:
    def __init__(self, storage: SessionStore) -> None:
        self.storage = storage
        self.started = asyncio.Event()

    async def start_workflow(self, _workflow: str, inp: RunInput, **_options: Any) -> Handle:
        self.started.set()
        return Handle(self.storage, inp.run_id)


async def test_the_result_of_a_cancelled_workflow_is_retrieved(soong_env: SoongEnv) -> None:
    temporal = {"address": "127.0.0.1:1", "task_queue": "unused"}  # never connected: the client is a stand-in
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        async with open_runtime(
            soong_env, FakeProvider(), config={"engine": {"kind": "temporal", "temporal": temporal}}
        ) as rt:
            manager = await rt._open()
            engine = manager.features.engine
            assert isinstance(engine, TemporalEngine)
            client = Client(manager.services.storage)
            engine._client = client  # type: ignore[assignment]
            run = await rt.start("wait")
            await asyncio.wait_for(client.started.wait(), 30)
            await run.cancel()
            assert await asyncio.wait_for(run.wait(), 30) == RunStatus.cancelled
        gc.collect()  # a future whose exception was never retrieved reports it when it is collected
    finally:
        loop.set_exception_handler(None)
    unretrieved = [c for c in reported if "never retrieved" in str(c.get("message"))]
    assert not unretrieved, unretrieved
