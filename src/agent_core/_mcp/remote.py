"""SDK-neutral records exchanged with the MCP client module (no ``mcp`` import here).

The client converts SDK objects into these plain records so that the rest of the core never sees an SDK
type; a future SDK major version only touches :mod:`agent_core._mcp.client`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """One entry of ``tools/list``: name verbatim, description, raw ``inputSchema`` and annotations."""

    name: str
    description: str
    input_schema: Any
    annotations: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """A ``tools/call`` result: content items as JSON dicts (``type`` = text/image/audio/resource/...)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    structured: Any | None = None
    is_error: bool = False


class McpTransportError(Exception):
    """The connection is unusable (process exited, stream closed, HTTP transport failure)."""


class McpCallError(Exception):
    """The server answered the request with a JSON-RPC error (the connection is still fine)."""


class McpTimeoutError(Exception):
    """No answer within the allowed time."""
