"""Nested event streaming: a child run's live events on its ancestors' streams
(docs/events.md#the-live-stream).

A child run's recorder gets :func:`child_forwarder` as ``forward``: after its own channel, each delivered
event goes, as a :class:`NestedRuntimeEvent` tagged with the emitting run's parent and the parent's
agent-tool call, to every ancestor whose consumer subscribed with ``include_children=True``. The tagged
copy has its own payload dict (channels merge text deltas in place).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from agent_core._runtime.state import RunState
from agent_core.types.runtime import NestedRuntimeEvent, RuntimeEvent

_FIELDS = tuple(RuntimeEvent.model_fields)


def child_forwarder(state: RunState) -> Callable[[RuntimeEvent], Awaitable[None]]:
    parent = state.parent
    assert parent is not None

    async def forward(event: RuntimeEvent) -> None:
        ancestor: RunState | None = parent
        tagged: NestedRuntimeEvent | None = None
        while ancestor is not None:
            channel = ancestor.channel
            if channel.wants_children and not channel.closed:
                if tagged is None:
                    values = {name: getattr(event, name) for name in _FIELDS}
                    values["data"] = dict(event.data)
                    tagged = NestedRuntimeEvent.model_construct(
                        **values,
                        parent_run_id=parent.run_id,
                        parent_tool_call_id=state.parent_tool_call_id,
                    )
                await channel.push(tagged)
            ancestor = ancestor.parent

    return forward
