"""MCP servers as tool sources (docs/hooks-and-mcp.md#mcp-servers).

``load_mcp_catalog(config)`` reads ``${SOONG_AGENT_HOME}/mcp.json`` at runtime startup (no connection);
``McpManager(catalog, settings, registry=...)`` connects lazily at run start
(``await manager.ensure_connected(needed, emit)``), registers discovered tools as
``mcp.<server_id>.<tool>`` and isolates failing servers; ``await manager.close()`` stops everything.
The official ``mcp`` SDK is imported only by :mod:`agent_core._mcp.client`, on first connect.
"""

from agent_core._mcp.catalog import McpCatalog, McpServerConfig, config_hash, load_mcp_catalog
from agent_core._mcp.manager import McpManager, McpServerAdapter, failed_for_run

__all__ = [
    "McpCatalog",
    "McpManager",
    "McpServerAdapter",
    "McpServerConfig",
    "config_hash",
    "failed_for_run",
    "load_mcp_catalog",
]
