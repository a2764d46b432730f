"""Shared pieces of the channel tests: the scripted model, the permission callback a channel host installs,
and a running hub."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from agent_core.adapters.channels import Channel, ChannelHub
from agent_core.permissions import DEFER, PermissionDeferral
from agent_core.testing import CallTool, FunctionModel, ModelReply, last_user_text, tool_results
from agent_core.types.model import ModelRequest
from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

WRITE = {"path": "hello.txt", "content": "hi\n"}


def agent_reply(request: ModelRequest) -> str | ModelReply:
    """ "write" → a write_file call (asks), then "Wrote hello.txt <!channel> & co"; anything else → pong."""
    if request.messages and request.messages[-1].role == "tool" and tool_results(request):
        return "Wrote hello.txt <!channel> & co"
    if "please write" in last_user_text(request):
        return ModelReply(tool_calls=[CallTool("code.write_file", WRITE)])
    return "pong"


def scripted_model() -> FunctionModel:
    return FunctionModel(agent_reply)


class ChannelAsker:
    """The permission callback of a channel host: the hub posts the request, the answer comes later."""

    def __init__(self) -> None:
        self.hub: ChannelHub | None = None
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        self.requests.append(request)
        if self.hub is not None and await self.hub.ask(request):
            return DEFER
        return PermissionDecision(decision="deny", reason="not a channel session")

    async def ask_user(self, question: UserQuestion) -> str | PermissionDeferral:
        """The question callback of a channel host: the hub posts the question, the answer comes later."""
        if self.hub is not None and await self.hub.ask_user(question):
            return DEFER
        return "(no answer)"


@contextlib.asynccontextmanager
async def running_hub(hub: ChannelHub) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(hub.run())
    await hub.started()
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def user_texts(model: FunctionModel) -> list[str]:
    return [last_user_text(r) for r in model.requests]


def channels_of(hub: ChannelHub) -> Sequence[Channel]:
    return hub.channels
