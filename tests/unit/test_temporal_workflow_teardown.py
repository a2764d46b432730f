"""A run workflow's coroutine torn down outside its event loop (eviction, GC) only re-raises.

Temporal's Python SDK closes (``GeneratorExit``) the coroutines of an evicted workflow, possibly from the
garbage collector and outside the workflow's event loop. The run's cleanup path (answer unfinished
calls, write the run's end) must not run then: ``workflow.cancellation_reason()`` outside the loop raises
``_NotInWorkflowEventLoopError``, which Python reported as an unraisable exception at teardown.
"""

from __future__ import annotations

import asyncio
import warnings

import pytest

from agent_core.engine.temporal import _workflow
from agent_core.engine.temporal._payloads import RunInput


def test_closing_a_suspended_run_outside_the_workflow_loop_only_reraises(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loop = asyncio.new_event_loop()
    suspended: asyncio.Future[object] = loop.create_future()
    calls: list[str] = []

    async def activity(
        self: object, name: str, arg: object, result_type: type, own_queue: str | None = None
    ) -> object:
        calls.append(name)
        return await suspended

    monkeypatch.setattr(_workflow.RunWorkflow, "_activity", activity)
    wf = _workflow.RunWorkflow()
    coro = wf.run(RunInput(run_id="r1", session_id="s1", message_json="{}"))
    assert coro.send(None) is suspended  # suspended in the first model step
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        coro.close()  # before the fix: _NotInWorkflowEventLoopError from cancellation_reason()
    assert calls == [_workflow.MODEL]  # no FINISH / tools_end attempted while torn down
    loop.close()
