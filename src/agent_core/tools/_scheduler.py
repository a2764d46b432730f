"""Concurrency classes, turn grouping (docs/tools.md#scheduling) and cancellation-aware waiting
(docs/tools.md#cancellation).

A call's class is ``agent`` (``metadata.concurrency == "agent"``), ``serial`` (permission ``write``, tag
``dangerous`` or ``metadata.concurrency == "serial"``) or ``parallel``. Calls outside the effective set
never execute and are classed ``parallel`` (they form no write boundary). Consecutive ``parallel``
calls form one batch, consecutive ``agent`` calls one group, every ``serial`` call its own group; groups
run strictly one after another (:func:`plan_groups` is pure).

:func:`race_cancel` and :func:`run_handler` await one stage of a call unless the run's cancel event fires
first; the abandoned stage is cancelled and awaited until it finished (``agent_core._concurrency.race``),
then :class:`Aborted` is raised.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from agent_core._concurrency import race
from agent_core.types.tools import ToolDefinition

CallClass = Literal["parallel", "serial", "agent"]
T = TypeVar("T")


def call_class(definition: ToolDefinition | None) -> CallClass:
    if definition is None:
        return "parallel"
    concurrency = definition.metadata.get("concurrency")
    if concurrency == "agent":
        return "agent"
    if definition.permission == "write" or "dangerous" in definition.tags or concurrency == "serial":
        return "serial"
    return "parallel"


@dataclass(frozen=True, slots=True)
class CallGroup:
    kind: CallClass
    indices: tuple[int, ...]


def plan_groups(classes: Sequence[CallClass]) -> list[CallGroup]:
    """Groups call indices in model order: maximal parallel/agent runs; serial calls alone."""
    groups: list[CallGroup] = []
    for index, kind in enumerate(classes):
        if kind != "serial" and groups and groups[-1].kind == kind:
            last = groups[-1]
            groups[-1] = CallGroup(kind, (*last.indices, index))
        else:
            groups.append(CallGroup(kind, (index,)))
    return groups


# ---------------------------------------------------------------------------------------------------
# Cancellation-aware waiting


class Aborted(Exception):
    """Cancellation reached a call; ``started`` = its handler was running, ``partial`` its late value."""

    def __init__(self, *, started: bool = False, partial: Any = None) -> None:
        super().__init__("aborted")
        self.started = started
        self.partial = partial


class HandlerTimedOut(Exception):
    """A handler exceeded its ``metadata.timeout_ms`` and was cancelled."""


async def race_cancel(awaitable: Awaitable[T], cancel_event: asyncio.Event) -> T:
    """Awaits ``awaitable`` unless ``cancel_event`` fires first (then it is cancelled: :class:`Aborted`)."""
    if cancel_event.is_set():
        if inspect.iscoroutine(awaitable):
            awaitable.close()
        raise Aborted(started=False)
    task = await race(awaitable, cancel_event)
    if task.cancelled() and cancel_event.is_set():
        raise Aborted(started=False)
    return task.result()


async def run_handler(
    awaitable: Awaitable[Any], cancel_event: asyncio.Event, timeout_ms: int | None, *, grace_s: float = 0.0
) -> Any:
    """Runs a handler. Timeout → the task is cancelled, :class:`HandlerTimedOut`. Cancellation → the
    handler gets ``grace_s`` to return by itself (cooperative handlers watch ``ctx.cancel_event`` and return
    partial output), then its task is cancelled; raises ``Aborted(started=True, partial=<late value>)``.
    A handler returning after the cancel event fired counts as aborted."""
    task = await race(
        awaitable, cancel_event, timeout_ms / 1000 if timeout_ms is not None else None, grace=grace_s
    )
    if cancel_event.is_set():
        late = None if task.cancelled() or task.exception() is not None else task.result()
        raise Aborted(started=True, partial=late)
    if task.cancelled():
        raise HandlerTimedOut()
    return task.result()
