"""The multi-agent feature of one runtime (docs/multi-agent.md): :func:`install` builds :class:`Agents`.

The definition registry loads at open (definition errors fail the open). The agent tools are registered
with their static definitions; the child-run launcher and the tool implementation are imported on the
first agent-tool call (cold start, issue 16).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.tool_definitions import agent_tool_definitions
from agent_core._runtime.runs import RunManager
from agent_core._runtime.services import Services
from agent_core._runtime.state import RunState
from agent_core.tools._lazy import LazyToolAdapter
from agent_core.tools.adapter import ToolAdapter
from agent_core.types.runtime import AgentDefinition

if TYPE_CHECKING:
    from agent_core._agents.children import ChildLauncher


class Agents:
    """The definition registry and the child-run launcher (``RunFeatures.children``)."""

    def __init__(self, manager: RunManager, registry: AgentDefinitionRegistry) -> None:
        self.manager = manager
        self.registry = registry
        self._launcher: ChildLauncher | None = None

    @property
    def launcher(self) -> ChildLauncher:
        """The launcher of sub, fork and worker runs (created on first use)."""
        if self._launcher is None:
            from agent_core._agents.children import ChildLauncher

            self._launcher = ChildLauncher(self.manager, self.registry)
        return self._launcher

    def tool_adapter(self) -> ToolAdapter:
        from agent_core._agents.tools import AgentToolsAdapter

        return AgentToolsAdapter(self.registry, self.launcher)

    async def on_parent_cancel(self, parent: RunState) -> None:
        """Cancel requests to ``parent``'s active children (none exist before the launcher does)."""
        if self._launcher is not None:
            await self._launcher.on_parent_cancel(parent)

    async def close(self) -> None:
        """Runtime close: the launcher's remaining tasks are cancelled and awaited."""
        if self._launcher is not None:
            await self._launcher.close()


def _mcp_server_ids(services: Services) -> Collection[str]:
    mcp = services.mcp
    if mcp is not None:
        return set(mcp.catalog.servers)
    from agent_core._mcp.catalog import load_mcp_catalog

    return set(load_mcp_catalog(services.config).servers)


def install(manager: RunManager, code_definitions: Sequence[AgentDefinition]) -> Agents:
    """Builds the registry (startup errors propagate) and registers the agent tools."""
    services = manager.services
    registry = AgentDefinitionRegistry(
        assets=services.assets,
        config=services.config,
        tools=services.tools.definitions,
        has_permission_callback=services.gate.has_callback,
        mcp_server_ids=lambda: _mcp_server_ids(services),
    )
    registry.load(code_definitions)
    agents = Agents(manager, registry)
    services.tools.register_adapter(
        LazyToolAdapter(agent_tool_definitions(), agents.tool_adapter), internal=True
    )
    return agents
