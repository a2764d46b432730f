"""Deferred permission answers (docs/serve.md#approvals, SDK side): a callback returns ``DEFER``
and ``runtime.answer_permission`` resolves the request from another task; first answer wins."""

from __future__ import annotations

import asyncio

import pytest

from agent_core import AgentCoreError, PermissionDecision, PermissionRequest
from agent_core.permissions import DEFER, PermissionDeferral
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime, types


def write_turn(path: str, content: str) -> object:
    return tool_calls(("code.write_file", {"path": path, "content": content}, "w1"))


@pytest.mark.parametrize(("decision", "written"), [("allow_once", True), ("deny", False)])
async def test_deferred_request_is_answered_from_another_task(
    soong_env: SoongEnv, decision: str, written: bool
) -> None:
    seen: list[PermissionRequest] = []
    asked = asyncio.Event()

    async def defer(request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        seen.append(request)
        asked.set()
        return DEFER

    fake = FakeProvider(write_turn("out.txt", "hello"), text("done"))
    async with open_runtime(soong_env, fake, permission_callback=defer) as runtime:
        run = await runtime.start("write it")
        events_task = asyncio.ensure_future(collect(run))
        await asyncio.wait_for(asked.wait(), 10)
        await asyncio.sleep(0.2)  # the run keeps waiting: no timeout, no implicit answer
        assert not (soong_env.project / "out.txt").exists()
        assert run.status.value == "running"
        await runtime.answer_permission(seen[0].request_id, decision)  # type: ignore[arg-type]
        with pytest.raises(AgentCoreError) as second:
            await runtime.answer_permission(seen[0].request_id, "allow_once")
        assert second.value.code == "validation_error"
        events = await events_task
        assert run.status.value == "completed"
    assert (soong_env.project / "out.txt").exists() is written
    assert ("tool_denied" in types(events)) is not written


async def test_unknown_request_and_invalid_decision_are_validation_errors(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as runtime:
        with pytest.raises(AgentCoreError) as unknown:
            await runtime.answer_permission("perm_nope", "deny")
        assert unknown.value.code == "validation_error"
        with pytest.raises(AgentCoreError) as invalid:
            await runtime.answer_permission("perm_nope", "yes")  # type: ignore[arg-type]
        assert invalid.value.code == "validation_error"


async def test_cancel_abandons_a_deferred_request(soong_env: SoongEnv) -> None:
    seen: list[PermissionRequest] = []
    asked = asyncio.Event()

    async def defer(request: PermissionRequest) -> PermissionDeferral:
        seen.append(request)
        asked.set()
        return DEFER

    fake = FakeProvider(write_turn("out.txt", "x"))
    async with open_runtime(soong_env, fake, permission_callback=defer) as runtime:
        run = await runtime.start("write it")
        await asyncio.wait_for(asked.wait(), 10)
        await run.cancel()
        assert run.status.value == "cancelled"
        with pytest.raises(AgentCoreError):
            await runtime.answer_permission(seen[0].request_id, "allow_once")
    assert not (soong_env.project / "out.txt").exists()
