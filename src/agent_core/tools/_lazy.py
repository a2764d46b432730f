"""A tool adapter whose definitions are static and whose implementation is imported on first use.

Every canonical tool is in the registry from the start (docs/tools.md#built-in-tools), but a run that never
calls the Task, worker or agent tools should not pay for importing them (issue 16: cold start).
:class:`LazyToolAdapter` serves the static definitions and builds the real adapter with ``load`` on the first
pre-flight or call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agent_core.tools.adapter import ToolAdapter, adapter_preflight
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition


class LazyToolAdapter:
    """Static ``definitions``; ``load()`` builds the adapter that pre-flights and executes the calls."""

    def __init__(self, definitions: Sequence[ToolDefinition], load: Callable[[], ToolAdapter]) -> None:
        self._definitions = list(definitions)
        self._load = load
        self._adapter: ToolAdapter | None = None

    @property
    def loaded(self) -> ToolAdapter | None:
        return self._adapter

    def adapter(self) -> ToolAdapter:
        if self._adapter is None:
            self._adapter = self._load()
        return self._adapter

    def definitions(self) -> list[ToolDefinition]:
        return list(self._definitions)

    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        return await adapter_preflight(self.adapter(), call, ctx)

    @property
    def preflight_now(self) -> Callable[[ToolCall, ToolContext], Preflight] | None:
        """The loaded adapter's ``preflight_now`` (a pre-flight that never waits; loads the adapter, as
        :meth:`preflight` does), ``None`` when it has none."""
        now: Callable[[ToolCall, ToolContext], Preflight] | None = getattr(
            self.adapter(), "preflight_now", None
        )
        return now

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        return await self.adapter().execute(call, ctx)

    async def close(self) -> None:
        if self._adapter is not None:
            await self._adapter.close()
