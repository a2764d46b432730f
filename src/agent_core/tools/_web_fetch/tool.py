"""The ``code.web_fetch`` adapter: pre-flight facts for the permission gate, the fetch, the result.

Pre-flight: the URL is checked (``validation_error``); ``network_host`` and the ``allow_for_session``
scope are its host, so the gate asks for hosts that are not allow-listed (``permissions.network_policy``)
and denies hosts in ``tools.network.denied_domains`` without asking. The fetch itself re-checks every
hop (:mod:`~agent_core.tools._web_fetch.client`).

Result (one JSON block): ``url`` (asked for), ``final_url``, ``status``, ``content_type``, ``format``
(``markdown`` / ``text`` / ``binary``), ``title``, ``content``, ``bytes`` (body bytes read),
``truncated`` (the body was longer than ``max_bytes`` and cut), ``partial_content`` (``content`` is only
the beginning), ``artifact_id`` / ``artifact_path`` (the whole converted text, or a binary body, stored
as an artifact file), ``total_lines``, ``redirects`` (followed) and ``redirect_not_followed`` (a
location on another host that was not fetched). Text that does not fit the tool result limits inline
is stored whole as an artifact and ``content`` keeps its first lines. An HTTP status of 400 or more is
an error result (``details.status``) whose partial data holds the same keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_core._redaction import Redactor, default_redactor
from agent_core.config.schema import Settings
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.permissions._network import NetworkRules
from agent_core.tools._web_fetch.client import (
    FetchPolicy,
    FetchResult,
    Resolver,
    WebClient,
    parse_url,
    url_host,
)
from agent_core.tools._web_fetch.convert import convert, media_type
from agent_core.tools._web_fetch.definition import (
    DEFAULT_MAX_BYTES,
    MAX_BYTES_LIMIT,
    NAME,
    web_fetch_definition,
)
from agent_core.tools.context import ToolContext
from agent_core.tools.preflight import Preflight
from agent_core.types.content import ContentBlock, JsonBlock, TextBlock
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

INLINE_SHARE = 0.6
"""Share of the tool result limit the inline ``content`` may use (the rest: the other keys, escaping)."""


def _arguments(arguments: dict[str, Any]) -> tuple[str, int]:
    unknown = sorted(set(arguments) - {"url", "max_bytes"})
    if unknown:
        raise AgentCoreError(ErrorCode.validation_error, f"{NAME}: unknown argument(s) {', '.join(unknown)}")
    url = arguments.get("url")
    if not isinstance(url, str) or not url.strip():
        raise AgentCoreError(ErrorCode.validation_error, f"{NAME}: 'url' must be a non-empty string")
    limit = arguments.get("max_bytes")
    if limit is None:
        return url, DEFAULT_MAX_BYTES
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_BYTES_LIMIT:
        raise AgentCoreError(
            ErrorCode.validation_error, f"{NAME}: 'max_bytes' must be an integer from 1 to {MAX_BYTES_LIMIT}"
        )
    return url, limit


class WebFetchAdapter:
    """Serves ``code.web_fetch`` (see the module docstring); ``resolve`` replaces the system resolver."""

    def __init__(
        self, settings: Settings, *, redactor: Redactor | None = None, resolve: Resolver | None = None
    ) -> None:
        self._settings = settings
        self._redactor = redactor or default_redactor
        policy = FetchPolicy(
            NetworkRules.from_settings(settings), settings.permissions.network_policy.default
        )
        self._client = WebClient(policy, resolve=resolve)

    def definitions(self) -> list[ToolDefinition]:
        return [web_fetch_definition()]

    async def preflight(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        return self.preflight_now(call, ctx)

    def preflight_now(self, call: ToolCall, ctx: ToolContext) -> Preflight:
        raw, _ = _arguments(call.arguments)
        host = url_host(parse_url(raw))
        return Preflight(target_scope=host, network_host=host)

    async def execute(self, call: ToolCall, ctx: ToolContext) -> ToolResult:
        try:
            raw, max_bytes = _arguments(call.arguments)
            fetched = await self._client.fetch(raw, max_bytes=max_bytes)
            data = await self._data(raw, fetched, ctx)
        except AgentCoreError as exc:
            return self._failure(call, exc)
        if fetched.status >= 400:
            error = AgentCoreError(
                ErrorCode.internal_error,
                f"{fetched.url} answered HTTP {fetched.status}",
                details={"status": fetched.status, "reason": "http_status"},
            )
            return self._failure(call, error, partial=data)
        return ToolResult(
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            content=[JsonBlock(data=data)],
            metadata={"address": fetched.address, "bytes": len(fetched.body)},
        )

    async def _data(self, raw: str, fetched: FetchResult, ctx: ToolContext) -> dict[str, Any]:
        converted = convert(fetched.body, fetched.content_type, fetched.url)
        data: dict[str, Any] = {
            "url": raw,
            "final_url": fetched.url,
            "status": fetched.status,
            "content_type": fetched.content_type,
            "format": converted.format,
            "title": converted.title,
            "content": "",
            "bytes": len(fetched.body),
            "truncated": fetched.truncated,
            "partial_content": False,
            "artifact_id": None,
            "artifact_path": None,
            "total_lines": None,
            "redirects": list(fetched.redirects),
            "redirect_not_followed": fetched.unfollowed_redirect,
        }
        if fetched.unfollowed_redirect is not None:
            data["content"] = (
                f"Redirected to {fetched.unfollowed_redirect}, another host that is not allow-listed: not "
                "followed. Fetch that URL with code.web_fetch to follow it."
            )
            return data
        if converted.format == "binary":
            if fetched.body:
                kind, _ = media_type(fetched.content_type)
                await self._store(fetched.body, "body.bin", kind or None, ctx, data)
                data["content"] = (
                    f"Binary content ({kind or 'unknown type'}, {len(fetched.body)} bytes), not converted; "
                    f"stored at {data['artifact_path']}."
                )
            return data
        text = converted.text
        data["total_lines"] = text.count("\n") + (0 if text.endswith("\n") else 1) if text else 0
        budget = self._inline_chars()
        if len(text) <= budget:
            data["content"] = text
            return data
        filename = "page.md" if converted.format == "markdown" else "page.txt"
        mime = "text/markdown" if converted.format == "markdown" else "text/plain"
        await self._store(text, filename, mime, ctx, data)
        head = text[:budget]
        cut = head.rfind("\n")
        head = head[: cut + 1] if cut > budget // 2 else head
        shown = head.count("\n")
        data["content"] = head + (
            f"\n[... {len(text) - len(head)} more characters: the whole page ({data['total_lines']} lines) "
            f"is in {data['artifact_path']}; read on with code.read_file from line {shown + 1}]"
        )
        data["partial_content"] = True
        return data

    def _inline_chars(self) -> int:
        tools = self._settings.tools
        return max(1000, int(min(tools.result_limit_bytes, tools.result_limit_tokens * 4) * INLINE_SHARE))

    async def _store(
        self, body: bytes | str, filename: str, mime: str | None, ctx: ToolContext, data: dict[str, Any]
    ) -> None:
        ref = await ctx.create_artifact(body, filename, mime, f"{NAME} {data['final_url']}")
        data["artifact_id"] = ref.artifact_id
        path = Path(ctx.home_dir) / "sessions" / ctx.session_id / "artifacts" / ref.artifact_id / filename
        data["artifact_path"] = str(path) if path.is_file() else None

    def _failure(
        self, call: ToolCall, error: AgentCoreError, partial: dict[str, Any] | None = None
    ) -> ToolResult:
        payload = error.to_payload(self._redactor)
        content: list[ContentBlock] = [TextBlock(text=payload.message)]
        if partial is not None:
            content.append(JsonBlock(data=partial))
        return ToolResult(
            tool_call_id=call.tool_call_id, tool_name=call.name, content=content, is_error=True, error=payload
        )

    async def close(self) -> None:
        return None
