"""``/rewind [node] [files|conversation]`` in ``soong-agent chat`` (issue 37 item 1).

Without a node it lists the rewind points of the active path: each message of yours and each final reply,
with the end of its node id (what to type) and how many tool calls with checkpoints came after it. With a
node — its full id, or a unique start or end of it — it calls ``AgentRuntime.rewind``: the files changed
after that node come back and the conversation continues from it (``files`` or ``conversation`` does only
that half). A refused rewind lists each file changed since and changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_core.cli._chat_render import cut, safe

if TYPE_CHECKING:
    from agent_core.cli._chat_session import ChatSession
    from agent_core.types.runtime import Node

SHOWN_ID_CHARS = 12
"""The end of a node id shown in the list (its random part: unique in practice, and accepted)."""
HALVES = ("files", "conversation")


def resolve_node(ids: list[str], wanted: str) -> tuple[str | None, str]:
    """The one id ``wanted`` names (itself, the start or the end of exactly one id), else ``(None, why)``."""
    if wanted in ids:
        return wanted, ""
    for matches in ([i for i in ids if i.startswith(wanted)], [i for i in ids if i.endswith(wanted)]):
        if len(matches) == 1:
            return matches[0], ""
        if matches:
            return None, f"{safe(wanted)!r} matches {len(matches)} nodes: type more of it"
    return None, f"no node {safe(wanted)!r} in this session (see /rewind)"


def _points(path: list[Node]) -> list[tuple[Node, int]]:
    """The user messages and final replies of ``path`` with the checkpointed tool calls after each."""
    points: list[tuple[Node, int]] = []
    for index, node in enumerate(path):
        if node.node_type != "message" or node.role not in ("user", "assistant"):
            continue
        if node.role == "assistant" and any(getattr(b, "type", "") == "tool_call" for b in node.content):
            continue
        meta = node.metadata
        if meta.get("partial") or meta.get("failed") or meta.get("aborted") or meta.get("synthetic"):
            continue
        later = sum(1 for n in path[index + 1 :] if isinstance(n.metadata.get("checkpoint_id"), str))
        points.append((node, later))
    return points


async def _list(chat: ChatSession) -> None:
    from agent_core.types.content import text_of

    runtime = await chat.ready()
    assert chat.session_id is not None
    summary = next((s for s in await runtime.list_sessions() if s.session_id == chat.session_id), None)
    if summary is None or summary.active_node_id is None:
        chat.note("nothing to rewind yet")
        return
    path = await runtime.get_node_path(summary.active_node_id)
    lines = ["Rewind points (oldest first): /rewind <id> puts the files and the conversation back to there"]
    for node, later in _points(path):
        who = "you" if node.role == "user" else "agent"
        text = safe(cut(text_of(node.content), 70)) or "-"
        after = (
            f"  [{later} tool call{'s' if later != 1 else ''} with file checkpoints after]" if later else ""
        )
        lines.append(f"  {node.node_id[-SHOWN_ID_CHARS:]}  {who:>5}: {text}{after}")
    chat.printer.block(lines)


async def rewind_command(chat: ChatSession, args: list[str]) -> None:
    from agent_core.errors import AgentCoreError

    if chat.session_id is None:
        chat.printer.line("error: no session yet: send a message first")
        return
    if not args:
        await _list(chat)
        return
    if len(args) > 2 or (len(args) == 2 and args[1] not in HALVES):
        chat.printer.line("error: usage: /rewind [<node id>] [files|conversation]")
        return
    runtime = await chat.ready()
    ids = [node.node_id for node in (await runtime.replay_session(chat.session_id)).nodes]
    node_id, why = resolve_node(ids, args[0])
    if node_id is None:
        chat.printer.line(f"error: {why}")
        return
    half = args[1] if len(args) == 2 else None
    try:
        result = await runtime.rewind(
            chat.session_id, node_id, files=half != "conversation", conversation=half != "files"
        )
    except AgentCoreError as exc:
        conflicts: Any = exc.details.get("conflicts") if exc.code == "path_conflict" else None
        if not isinstance(conflicts, list):
            raise
        lines = ["rewind refused, nothing was changed: these files changed since"]
        lines += [f"  {safe(str(c.get('path')))}: {safe(str(c.get('reason')))}" for c in conflicts]
        chat.printer.block(lines)
        return
    parts = []
    if result.files:
        parts.append(f"{len(result.restored)} file(s) restored, {len(result.removed)} removed")
    if result.conversation:
        parts.append(f"the conversation continues from {node_id[-SHOWN_ID_CHARS:]}")
    lines = [f"rewound: {'; '.join(parts)}"]
    lines += [f"  restored {safe(p)}" for p in result.restored]
    lines += [f"  removed  {safe(p)}" for p in result.removed]
    lines += [f"  left     {safe(s.path)}: {safe(s.reason)}" for s in result.skipped]
    chat.printer.block(lines)
