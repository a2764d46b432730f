"""A session's conversation as data and as Markdown (the MCP server's ``get_session`` and resources). Pure.

:func:`transcript_messages` lists the user and assistant messages of an active path (what the user saw:
failed and partial answers left out, a cancelled reply kept and marked) with the tool calls each assistant
message made (name and arguments) and each call's outcome; :func:`transcript_markdown` renders them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agent_core.types.content import TextBlock, ToolCallBlock, ToolResultBlock

if TYPE_CHECKING:
    from agent_core.types.runtime import Node

TOOL_ARGUMENTS_LIMIT = 500


def _shown(node: Node) -> bool:
    meta = node.metadata
    cancelled = bool(meta.get("partial") and meta.get("aborted"))
    return not (meta.get("failed") or ((meta.get("partial") or meta.get("aborted")) and not cancelled))


def transcript_messages(path: Sequence[Node]) -> list[dict[str, Any]]:
    """``[{node_id, role, text, created_at, tool_calls?, cancelled?}]`` of an active path."""
    out: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    for node in path:
        if node.role == "tool":
            for block in node.content:
                if isinstance(block, ToolResultBlock) and block.tool_call_id in calls:
                    calls[block.tool_call_id]["status"] = "failed" if block.is_error else "completed"
            continue
        if node.node_type != "message" or node.role not in ("user", "assistant") or not _shown(node):
            continue
        if node.role == "user" and node.metadata.get("synthetic"):
            continue
        message: dict[str, Any] = {
            "node_id": node.node_id,
            "role": node.role,
            "text": "".join(b.text for b in node.content if isinstance(b, TextBlock)),
            "created_at": node.created_at.isoformat(),
        }
        tool_calls = []
        for block in node.content:
            if isinstance(block, ToolCallBlock):
                call = {"tool_call_id": block.tool_call_id, "name": block.name, "arguments": block.arguments}
                calls[block.tool_call_id] = call
                tool_calls.append(call)
        if tool_calls:
            message["tool_calls"] = tool_calls
        if node.metadata.get("partial") and node.metadata.get("aborted"):
            message["cancelled"] = True
        if message["text"] or tool_calls:
            out.append(message)
    return out


def _arguments(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= TOOL_ARGUMENTS_LIMIT else text[: TOOL_ARGUMENTS_LIMIT - 1] + "…"


def transcript_markdown(title: str, session_id: str, messages: Sequence[dict[str, Any]]) -> str:
    """The messages as Markdown: one section per message, tool calls as a list under their message."""
    lines = [f"# {title or session_id}", "", f"Session `{session_id}`", ""]
    for message in messages:
        who = "User" if message["role"] == "user" else "Assistant"
        mark = " (cancelled)" if message.get("cancelled") else ""
        lines += [f"## {who}{mark}", ""]
        if message["text"]:
            lines += [message["text"].rstrip(), ""]
        for call in message.get("tool_calls", []):
            status = call.get("status", "not run")
            lines.append(f"- tool `{call['name']}` {_arguments(call['arguments'])} → {status}")
        if message.get("tool_calls"):
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
