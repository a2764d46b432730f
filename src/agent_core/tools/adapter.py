"""The :class:`ToolAdapter` protocol: one per tool source (tools.md §1).

An adapter produces :class:`ToolDefinition`s and executes calls for its tools. It knows nothing about
permissions, hooks or scheduling; the registry's pipeline does that around it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition

if TYPE_CHECKING:
    pass


@runtime_checkable
class ToolAdapter(Protocol):
    def definitions(self) -> list[ToolDefinition]:
        """Definitions of every tool this adapter serves."""
        ...

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        """Executes one already-validated call; returns a ``ToolReturn`` value or raises."""
        ...

    async def close(self) -> None:
        """Releases resources; idempotent."""
        ...


class PreflightAdapter(ToolAdapter, Protocol):
    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight: ...
