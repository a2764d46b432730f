"""Structured concurrency (issue 35 item 7): every task has an owner that awaits or cancels it.

The helpers of ``agent_core/_concurrency.py``, a stage of a tool call whose caller is cancelled, and the
architecture figure: no ``create_task``/``ensure_future`` outside the owners, no ``asyncio.shield`` and one
documented ``uncancel``.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from types import ModuleType

import pytest

from agent_core._concurrency import (
    CancelEvent,
    TaskOwner,
    cancel_and_wait,
    race,
    run_to_end,
    wait_uninterrupted,
)
from agent_core.tools._scheduler import Aborted, HandlerTimedOut, race_cancel, run_handler
from tests.fixtures.architecture import architecture_report

ROOT = Path(__file__).resolve().parents[2]


class Probe:
    """A coroutine that records that it started, and whether it was cancelled or finished."""

    def __init__(self, seconds: float = 3600.0, result: str = "done") -> None:
        self.seconds, self.result = seconds, result
        self.started = asyncio.Event()
        self.cancelled = False
        self.finished = False

    async def __call__(self) -> str:
        self.started.set()
        try:
            await asyncio.sleep(self.seconds)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return self.result


async def test_an_owner_cancels_and_awaits_what_is_left_and_then_refuses_work() -> None:
    owner = TaskOwner("test")
    slow, quick = Probe(), Probe(0, "quick")
    slow_task, quick_task = owner.spawn(slow()), owner.spawn(quick())
    await quick_task
    assert len(owner) == 1 and owner.tasks == {slow_task}  # a finished task is forgotten
    await owner.aclose()
    assert slow.cancelled and slow_task.done() and len(owner) == 0
    work = Probe()()
    with pytest.raises(RuntimeError, match="closed"):
        owner.spawn(work)
    assert work.cr_frame is None  # the refused coroutine was closed, not left unawaited


async def test_an_owner_grants_a_grace_before_cancelling() -> None:
    owner = TaskOwner()
    short = Probe(0.01)
    owner.spawn(short())
    await owner.aclose(grace=5)
    assert short.finished and not short.cancelled


async def test_a_scope_closes_its_tasks_when_the_block_fails() -> None:
    probe = Probe()
    with pytest.raises(ValueError):
        async with TaskOwner() as tasks:
            tasks.spawn(probe())
            await probe.started.wait()
            raise ValueError("the block fails")
    assert probe.cancelled


async def test_cancel_and_wait_returns_once_the_task_has_finished() -> None:
    cleaned: list[str] = []

    async def slow_cleanup() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.01)  # the task still runs after its cancellation was requested
            cleaned.append("done")

    async with TaskOwner() as tasks:
        task = tasks.spawn(slow_cleanup())
        await asyncio.sleep(0)
        await cancel_and_wait(task)
        assert task.cancelled() and cleaned == ["done"]


async def test_wait_uninterrupted_finishes_the_work_then_reraises_the_cancellation() -> None:
    probe = Probe(0.05)
    caller = asyncio.ensure_future(wait_uninterrupted(probe()))
    await probe.started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert probe.finished and not probe.cancelled


async def test_run_to_end_reports_the_interruption_with_the_result() -> None:
    probe = Probe(0.05, "stored")
    outcome: list[tuple[str, bool]] = []

    async def caller() -> None:
        outcome.append(await run_to_end(probe()))

    task = asyncio.ensure_future(caller())
    await probe.started.wait()
    task.cancel()
    await task  # the caller decides what to do with the interruption (here: nothing)
    assert outcome == [("stored", True)]


async def test_race_cancels_its_work_when_the_event_fires_or_the_caller_is_cancelled() -> None:
    event = CancelEvent()
    probe = Probe()
    racing = asyncio.ensure_future(race(probe(), event))
    await probe.started.wait()
    event.set()
    assert (await racing).cancelled() and probe.cancelled

    second = Probe()
    racing = asyncio.ensure_future(race(second(), CancelEvent()))
    await second.started.wait()
    racing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await racing
    assert second.cancelled  # not left running without an owner


async def test_a_tool_stage_is_cancelled_with_its_caller() -> None:
    """Before, the stage ran in a loose task that kept running when the call was cancelled."""
    for stage in (
        lambda work: race_cancel(work, asyncio.Event()),
        lambda work: run_handler(work, asyncio.Event(), None),
    ):
        probe = Probe()
        call = asyncio.ensure_future(stage(probe()))
        await probe.started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert probe.cancelled


async def test_run_handler_outcomes() -> None:
    event = asyncio.Event()
    assert await run_handler(Probe(0, "value")(), event, None) == "value"
    with pytest.raises(HandlerTimedOut):
        await run_handler(Probe()(), event, 10)

    async def cooperative() -> str:
        await event.wait()
        return "partial"

    call = asyncio.ensure_future(run_handler(cooperative(), event, None, grace_s=5))
    await asyncio.sleep(0)
    event.set()
    with pytest.raises(Aborted) as aborted:
        await call
    assert aborted.value.started and aborted.value.partial == "partial"


@pytest.fixture(scope="module")
def arch() -> ModuleType:
    return architecture_report()


def test_no_task_is_created_without_an_owner(arch: ModuleType) -> None:
    assert arch.unowned_tasks() == []


def test_no_shield_and_one_documented_uncancel() -> None:
    shields: list[str] = []
    uncancels: list[str] = []
    for source in architecture_report().source_files():
        rel = source.rel
        if rel == "agent_core/_concurrency.py":
            continue
        for number, line in enumerate(source.text.splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"\bshield\(", code):
                shields.append(f"{rel}:{number}")
            if ".uncancel()" in code:
                uncancels.append(f"{rel}:{number}")
    assert shields == []
    # a cancellation of the run's task becomes the run's own cancellation (its calls answered aborted)
    assert [u.split(":")[0] for u in uncancels] == ["agent_core/tools/_pipeline.py"]


def test_the_counter_finds_loose_tasks(arch: ModuleType, tmp_path: Path) -> None:
    package = tmp_path / "agent_core"
    package.mkdir()
    (package / "a.py").write_text(
        "import asyncio\n"
        "async def f(owner, tg):\n"
        "    asyncio.create_task(g())\n"
        "    asyncio.ensure_future(g())\n"
        "    asyncio.get_running_loop().create_task(g())\n"
        "    loop = asyncio.get_running_loop()\n"
        "    loop.create_task(g())\n"
        "    owner.spawn(g())\n"
        "    tg.create_task(g())\n",
        encoding="utf-8",
    )
    found = [line.split(": ", 1)[1] for line in arch.unowned_tasks(tmp_path)]
    assert found == ["asyncio.create_task", "asyncio.ensure_future", "create_task", "loop.create_task"]
