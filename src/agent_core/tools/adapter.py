"""The :class:`ToolAdapter` protocol: one per tool source (docs/tools.md#layers).

An adapter produces :class:`ToolDefinition`s and executes calls for its tools. It knows nothing about
permissions, hooks or scheduling; the registry's pipeline does that around it.
"""

from __future__ import annotations

import inspect
from typing import Any, Protocol, runtime_checkable

from agent_core.errors import ErrorCode, InternalError
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition


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


async def adapter_preflight(adapter: Any, call: ToolCall, ctx: ToolContext) -> Preflight:
    """The adapter's :class:`Preflight` for ``call``: its ``preflight`` hook, else the facts of its optional
    ``target_scope`` / ``target_paths`` / ``network_host`` methods (each may be sync or async)."""
    hook = getattr(adapter, "preflight", None)
    if callable(hook):
        value = await _maybe_await(hook(call, ctx))
        if not isinstance(value, Preflight):
            raise InternalError(ErrorCode.internal_error, "adapter pre-flight returned no Preflight record")
        return value
    preflight = Preflight()
    for attr in ("target_scope", "target_paths", "network_host"):
        method = getattr(adapter, attr, None)
        if callable(method):
            setattr(preflight, attr, await _maybe_await(method(call, ctx)))
    preflight.target_paths = list(preflight.target_paths or [])
    return preflight


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value
