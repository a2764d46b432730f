"""Helpers of the team tests: a FunctionModel that plays the lead and each teammate from its own script."""

from __future__ import annotations

import asyncio
import inspect
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agent_core import AgentRuntime, PermissionDecision, PermissionRequest
from agent_core.testing import FunctionModel, ModelReply, ModelRequest, open_runtime
from agent_core.types.content import TextBlock

Step = Callable[[ModelRequest], ModelReply | str | Awaitable[ModelReply | str]]
TEAM_NAME = re.compile(r'You are "([a-z][a-z0-9_-]*)", a teammate')
REQUEST_ID = re.compile(r'request_id="(req_[A-Za-z0-9_]+)"')


def actor(request: ModelRequest) -> str:
    """``"lead"`` or the teammate's name (from its team block)."""
    for block in request.system:
        found = TEAM_NAME.search(block.content)
        if found:
            return found.group(1)
    return "lead"


def texts(request: ModelRequest) -> list[str]:
    return ["".join(b.text for b in m.content if isinstance(b, TextBlock)) for m in request.messages]


def last_note(request: ModelRequest) -> str:
    notes = [t for t in texts(request) if t.startswith("<inbox>")]
    return notes[-1] if notes else ""


class Cast:
    """Answers each actor's requests with its next scripted step (``"..."`` text when it has none left)."""

    def __init__(self, **scripts: list[Step] | Step) -> None:
        """Each actor gets a list of steps (one per request, then a default answer) or one step for every
        request."""
        self.scripts: dict[str, list[Step] | Step] = {
            name: list(steps) if isinstance(steps, list) else steps for name, steps in scripts.items()
        }
        self.seen: dict[str, list[ModelRequest]] = {}
        self.model = FunctionModel(self._reply)

    async def _reply(self, request: ModelRequest) -> ModelReply | str:
        who = actor(request)
        self.seen.setdefault(who, []).append(request)
        steps = self.scripts.get(who, [])
        if callable(steps):
            value = steps(request)
        elif not steps:
            return f"{who}: nothing more to do"
        else:
            value = steps.pop(0)(request)
        return await value if inspect.isawaitable(value) else value

    def requests(self, who: str) -> list[ModelRequest]:
        return self.seen.get(who, [])


async def allow(_request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


@asynccontextmanager
async def team_runtime(
    tmp_path: Path, cast: Cast, *, max_teammates: int = 4, **config: Any
) -> AsyncIterator[AgentRuntime]:
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    settings: dict[str, Any] = {"agents": {"max_teammates_per_session": max_teammates}}
    for table, body in config.items():
        settings[table] = {**settings.get(table, {}), **body}
    async with open_runtime(
        cast.model,
        project_dir=project,
        home_dir=tmp_path / "home",
        config=settings,
        permission_callback=allow,
    ) as rt:
        yield rt


async def until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.02)


async def settled(rt: AgentRuntime, session_id: str, timeout: float = 20.0) -> None:
    """Waits until the team of ``session_id`` and the lead have no run in progress."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        team = await rt.team(session_id)
        lead_busy = any(
            s.status in ("pending", "running", "queued")
            for s in await rt.list_sessions()
            if s.session_id == session_id
        )
        if not lead_busy and all(m.state != "working" for m in team):
            await asyncio.sleep(0.05)
            team = await rt.team(session_id)
            if all(m.state != "working" for m in team):
                return
        if loop.time() > deadline:
            raise AssertionError(f"the team did not settle: {team}")
        await asyncio.sleep(0.02)
