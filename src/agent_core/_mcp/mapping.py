"""Pure MCP ↔ core mapping: tool definitions (docs/hooks-and-mcp.md#tools) and call results
(docs/hooks-and-mcp.md#calls-and-results).

Tools: canonical name ``mcp.<server_id>.<tool_name>`` (name verbatim). A tool is skipped — recorded as
``{tool_name, reason}``, the server is not failed — when its name is empty, uses characters outside
``[A-Za-z0-9_.-]`` or would not form a valid canonical name, duplicates an earlier tool of the server, or
its ``inputSchema`` is outside the core subset. Permission is ``readonly`` only for ``readOnlyHint: true``,
else ``write``; tags are ``mcp`` + the server's tags + ``network`` for ``openWorldHint: true`` +
``dangerous`` for ``destructiveHint: true``. ``tools.mcp.tool_overrides`` apply afterwards: the tool key
wins over ``mcp.<server_id>.*`` (never merged); ``permission`` replaces, ``tags`` replace (``mcp`` kept).

Results: text → ``TextBlock``; ``structuredContent`` → ``JsonBlock``; images and PDFs the run's model reads
→ ``ImageBlock`` / ``DocumentBlock`` on an artifact; other image/audio/binary resources →
artifacts (``ArtifactRefBlock`` with the MIME type); embedded text resources → ``TextBlock``; resource
links and unknown items → ``JsonBlock``; ``isError`` → ``internal_error`` with ``type = "mcp_tool_error"``.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Literal

from agent_core._mcp.catalog import McpServerConfig
from agent_core._mcp.remote import RemoteResult, RemoteTool
from agent_core._media import MediaError, MediaPolicy, prepare_media, sniff
from agent_core.config.schema import ToolOverride
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._schema import check_schema
from agent_core.tools.registry import CANONICAL_NAME
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    DocumentBlock,
    ErrorPayload,
    ImageBlock,
    JsonBlock,
    TextBlock,
)
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
CreateArtifact = Callable[[bytes, str, str | None, str | None], Awaitable[ArtifactRefBlock]]
"""``(data, filename, mime_type, summary) -> ArtifactRefBlock`` (``ToolContext.create_artifact``)."""


def canonical_name(server_id: str, tool_name: str) -> str:
    return f"mcp.{server_id}.{tool_name}"


def skip_reason(server_id: str, tool: RemoteTool, seen: set[str]) -> str | None:
    """Why ``tool`` cannot be exposed, or ``None``."""
    name = tool.name
    if not name:
        return "empty tool name"
    if not TOOL_NAME.match(name) or not CANONICAL_NAME.fullmatch(canonical_name(server_id, name)):
        return "tool name has characters outside [A-Za-z0-9_.-] or empty segments"
    if name in seen:
        return "duplicate tool name"
    try:
        check_schema(tool.input_schema, where=f"{canonical_name(server_id, name)} inputSchema")
    except AgentCoreError as exc:
        return f"inputSchema outside the core subset: {exc.message}"
    return None


def derived_permission(annotations: Mapping[str, Any] | None) -> Literal["readonly", "write"]:
    return "readonly" if annotations is not None and annotations.get("readOnlyHint") is True else "write"


def derived_tags(server: McpServerConfig, annotations: Mapping[str, Any] | None) -> list[str]:
    tags = ["mcp", *server.tags]
    if annotations is not None and annotations.get("openWorldHint") is True:
        tags.append("network")
    if annotations is not None and annotations.get("destructiveHint") is True:
        tags.append("dangerous")
    return list(dict.fromkeys(tags))


def override_for(name: str, server_id: str, overrides: Mapping[str, ToolOverride]) -> ToolOverride | None:
    """The tool's own override, else its server's ``mcp.<server_id>.*`` override (not merged)."""
    return overrides.get(name) or overrides.get(f"mcp.{server_id}.*")


def build_definitions(
    server: McpServerConfig, tools: Iterable[RemoteTool], overrides: Mapping[str, ToolOverride]
) -> tuple[list[ToolDefinition], list[dict[str, str]]]:
    """Definitions for the exposable tools plus the skipped ones as ``[{tool_name, reason}]``."""
    definitions: list[ToolDefinition] = []
    skipped: list[dict[str, str]] = []
    seen: set[str] = set()
    for tool in tools:
        reason = skip_reason(server.server_id, tool, seen)
        if reason is not None:
            skipped.append({"tool_name": tool.name, "reason": reason})
            continue
        seen.add(tool.name)
        name = canonical_name(server.server_id, tool.name)
        permission = derived_permission(tool.annotations)
        tags = derived_tags(server, tool.annotations)
        override = override_for(name, server.server_id, overrides)
        if override is not None:
            if override.permission is not None:
                permission = override.permission
            if override.tags is not None:
                tags = list(dict.fromkeys(["mcp", *override.tags]))
        serial = permission == "write" or "dangerous" in tags
        definitions.append(
            ToolDefinition(
                name=name,
                description=tool.description or f"MCP tool {tool.name} of server {server.server_id}",
                input_schema=tool.input_schema,
                permission=permission,
                tags=tags,
                metadata={
                    "source": "mcp",
                    "mcp_server_id": server.server_id,
                    "mcp_tool_name": tool.name,
                    "annotations": tool.annotations,
                    "config_hash": server.config_hash,
                    "concurrency": "serial" if serial else "parallel",
                },
            )
        )
    return definitions, skipped


def unmatched_overrides(
    server_id: str, discovered: Iterable[str], overrides: Mapping[str, ToolOverride]
) -> list[str]:
    """Tool-level override keys of ``server_id`` that name no discovered tool (warned about, ignored)."""
    names = set(discovered)
    prefix = f"mcp.{server_id}."
    return [k for k in overrides if k.startswith(prefix) and not k.endswith(".*") and k not in names]


def _extension(mime_type: str | None) -> str:
    guessed = mimetypes.guess_extension(mime_type or "") if mime_type else None
    return guessed or ".bin"


async def _binary(
    data: str,
    mime_type: str | None,
    kind: str,
    index: int,
    tool: str,
    create: CreateArtifact,
    media: MediaPolicy | None = None,
) -> ContentBlock:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return TextBlock(text=f"[{kind} content of {tool} could not be decoded]")
    sniffed = sniff(raw)
    if media is not None and sniffed is not None and media.takes(sniffed):
        try:  # the model reads it: an image or PDF block on the artifact (within the model's limits)
            prepared = prepare_media(raw, media.limits, name=f"{kind} from {tool}")
        except MediaError as exc:
            return TextBlock(text=f"[{kind} from {tool} not shown to the model: {exc}]")
        summary = f"{kind} from {tool}: {prepared.describe()}"
        ref = await create(
            prepared.data, f"{kind}_{index}{_extension(prepared.mime_type)}", prepared.mime_type, summary
        )
        if prepared.kind == "pdf":
            return DocumentBlock(artifact_id=ref.artifact_id, mime_type=prepared.mime_type)
        return ImageBlock(artifact_id=ref.artifact_id, mime_type=prepared.mime_type)
    summary = f"{kind} from {tool} ({mime_type or 'unknown type'}, {len(raw)} bytes)"
    return await create(raw, f"{kind}_{index}{_extension(mime_type)}", mime_type, summary)


async def _block(
    item: dict[str, Any], index: int, tool: str, create: CreateArtifact, media: MediaPolicy | None = None
) -> ContentBlock:
    kind = item.get("type")
    if kind == "text" and isinstance(item.get("text"), str):
        return TextBlock(text=item["text"])
    if kind in ("image", "audio") and isinstance(item.get("data"), str):
        return await _binary(item["data"], item.get("mimeType"), str(kind), index, tool, create, media)
    if kind == "resource" and isinstance(item.get("resource"), dict):
        resource = item["resource"]
        if isinstance(resource.get("text"), str):
            return TextBlock(text=resource["text"])
        if isinstance(resource.get("blob"), str):
            blob, blob_mime = resource["blob"], resource.get("mimeType")
            return await _binary(blob, blob_mime, "resource", index, tool, create, media)
    return JsonBlock(data=item)


async def map_result(
    remote: RemoteResult, call: ToolCall, create: CreateArtifact, media: MediaPolicy | None = None
) -> ToolResult:
    """Maps a ``tools/call`` result to a :class:`ToolResult` (see the module docstring). With ``media``
    (the run's model reads images / PDFs), image and PDF content becomes :class:`ImageBlock` /
    :class:`DocumentBlock` on its artifact, so the model sees it."""
    blocks = [await _block(item, i, call.name, create, media) for i, item in enumerate(remote.items)]
    if remote.structured is not None:
        blocks.append(JsonBlock(data=remote.structured))
    if not remote.is_error:
        return ToolResult(tool_call_id=call.tool_call_id, tool_name=call.name, content=blocks)
    text = "\n".join(b.text for b in blocks if isinstance(b, TextBlock)).strip()
    message = text[:2000] or f"MCP tool {call.name} reported an error"
    error = ErrorPayload(type="mcp_tool_error", code=ErrorCode.internal_error, message=message)
    return ToolResult(
        tool_call_id=call.tool_call_id,
        tool_name=call.name,
        content=blocks or [TextBlock(text=message)],
        is_error=True,
        error=error,
    )
