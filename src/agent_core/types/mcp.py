"""What ``AgentRuntime`` tells about the configured MCP servers' resources and prompts (for surfaces such
as ``soong-agent chat``: ``@server:uri`` attachments and ``/mcp:<server>:<prompt>`` commands)."""

from __future__ import annotations

from pydantic import Field

from agent_core.types.base import FrozenModel


class McpResource(FrozenModel):
    """One resource (or resource template, ``template=True``) of an MCP server."""

    server_id: str
    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None
    template: bool = False


class McpPromptArgument(FrozenModel):
    name: str
    description: str = ""
    required: bool = False


class McpPrompt(FrozenModel):
    """One prompt of an MCP server; ``/mcp:<server_id>:<name>`` in chat."""

    server_id: str
    name: str
    description: str = ""
    arguments: list[McpPromptArgument] = Field(default_factory=list)


class McpPromptMessage(FrozenModel):
    """One message of a prompt as the server filled it in: ``user`` or ``assistant`` and its text."""

    role: str
    text: str
