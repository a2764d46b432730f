"""The MCP client features beyond tools: resources as model tools, and a server's requests to the client.

Resources: a server announcing the ``resources`` capability gets two more tools, both ``readonly`` with
the server's tags: ``mcp.<server_id>.list_resources`` (its resources and resource templates: URI, name,
MIME type, description) and ``mcp.<server_id>.read_resource(uri)`` (text contents as text blocks,
binary contents as artifacts). A server tool with the same name wins (the extra one is not added).

Server requests (:class:`ServerHandlers`, one per server): ``roots/list`` answers the runtime's roots
(the project directory); ``sampling/createMessage`` and ``elicitation/create`` go to the runtime's
:class:`McpHost` together with the server's tool call in progress (the newest one when several run), so
the host can run the sampling on that call's run and ask that run's user. A request with no call in
progress is refused: nothing would own its cost or its question.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from agent_core._mcp.catalog import McpServerConfig
from agent_core._mcp.remote import (
    ElicitationReply,
    ElicitationRequest,
    McpRequestRefused,
    RemoteResource,
    ResourceContent,
    SamplingReply,
    SamplingRequest,
)
from agent_core.tools.context import ToolContext
from agent_core.types.content import ArtifactRefBlock, ContentBlock, TextBlock
from agent_core.types.tools import ToolDefinition

LIST_RESOURCES = "list_resources"
READ_RESOURCE = "read_resource"
RESOURCE_TOOLS = (LIST_RESOURCES, READ_RESOURCE)
CreateArtifact = Callable[[bytes, str, str | None, str | None], Awaitable[ArtifactRefBlock]]


class McpHost(Protocol):
    """What the runtime does for a server's sampling and elicitation requests (``_mcp.host``)."""

    async def sample(
        self, server: McpServerConfig, ctx: ToolContext, request: SamplingRequest
    ) -> SamplingReply: ...

    async def elicit(
        self, server: McpServerConfig, ctx: ToolContext, request: ElicitationRequest
    ) -> ElicitationReply: ...


class ServerHandlers:
    """The :class:`~agent_core._mcp.remote.ClientHandlers` of one server (see the module docstring)."""

    def __init__(
        self,
        server: McpServerConfig,
        host: Callable[[], McpHost | None],
        active: Callable[[], ToolContext | None],
        roots: Sequence[Path],
    ) -> None:
        self._server = server
        self._host = host
        self._active = active
        self._roots = list(roots)

    def _context(self, what: str) -> tuple[McpHost, ToolContext]:
        host, ctx = self._host(), self._active()
        if host is None or ctx is None:
            raise McpRequestRefused(f"{what} requests are answered only while a tool of this server runs")
        return host, ctx

    async def sample(self, request: SamplingRequest) -> SamplingReply:
        host, ctx = self._context("sampling")
        return await host.sample(self._server, ctx, request)

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        host, ctx = self._context("elicitation")
        return await host.elicit(self._server, ctx, request)

    def roots(self) -> list[tuple[str, str]]:
        return [(root.resolve().as_uri(), root.name or str(root)) for root in self._roots]


def resource_definitions(server: McpServerConfig, taken: set[str]) -> list[ToolDefinition]:
    """The two resource tools of a server with the ``resources`` capability (names not ``taken``)."""
    tags = list(dict.fromkeys(["mcp", *server.tags]))
    specs = {
        LIST_RESOURCES: (
            f"List the resources (and resource templates) of MCP server {server.server_id}: URI, name, "
            "MIME type and description. Read one with read_resource.",
            {"type": "object", "properties": {}},
        ),
        READ_RESOURCE: (
            f"Read one resource of MCP server {server.server_id} by its URI (as listed by list_resources).",
            {
                "type": "object",
                "properties": {"uri": {"type": "string", "description": "the resource URI"}},
                "required": ["uri"],
            },
        ),
    }
    definitions: list[ToolDefinition] = []
    for tool, (description, schema) in specs.items():
        name = f"mcp.{server.server_id}.{tool}"
        if name in taken:
            continue
        definitions.append(
            ToolDefinition(
                name=name,
                description=description,
                input_schema=schema,
                permission="readonly",
                tags=tags,
                metadata={
                    "source": "mcp",
                    "mcp_server_id": server.server_id,
                    "mcp_builtin": tool,
                    "config_hash": server.config_hash,
                    "concurrency": "parallel",
                },
            )
        )
    return definitions


def resource_listing(resources: Sequence[RemoteResource]) -> str:
    """The model's view of ``list_resources``: one line per resource."""
    if not resources:
        return "(no resources)"
    lines = []
    for r in resources:
        kind = "template" if r.template else "resource"
        extra = f" ({r.mime_type})" if r.mime_type else ""
        about = f" — {r.description}" if r.description else ""
        lines.append(f"{kind} {r.uri} [{r.name}]{extra}{about}")
    return "\n".join(lines)


async def content_blocks(
    contents: Sequence[ResourceContent], create: CreateArtifact | None
) -> list[ContentBlock]:
    """Resource contents as blocks: text as text (headed by its URI when there are several), binary as an
    artifact (or a one-line description when no artifact can be made, e.g. for a user attachment)."""
    blocks: list[ContentBlock] = []
    for index, item in enumerate(contents):
        if item.text is not None:
            head = f"[{item.uri}]\n" if len(contents) > 1 else ""
            blocks.append(TextBlock(text=head + item.text))
            continue
        try:
            raw = base64.b64decode(item.blob or "", validate=True)
        except (binascii.Error, ValueError):
            blocks.append(TextBlock(text=f"[{item.uri}: binary content that could not be decoded]"))
            continue
        summary = f"resource {item.uri} ({item.mime_type or 'unknown type'}, {len(raw)} bytes)"
        if create is None:
            blocks.append(TextBlock(text=f"[{summary}: binary content not shown]"))
        else:
            extension = mimetypes.guess_extension(item.mime_type or "") if item.mime_type else None
            blocks.append(
                await create(raw, f"resource_{index}{extension or '.bin'}", item.mime_type, summary)
            )
    return blocks or [TextBlock(text="(empty resource)")]


def describe(resource: RemoteResource) -> dict[str, Any]:
    return {
        "uri": resource.uri,
        "name": resource.name,
        "description": resource.description,
        "mime_type": resource.mime_type,
        "template": resource.template,
    }
