"""Maps context-tree nodes to provider-neutral messages (docs/context.md#synthetic-messages,
docs/compaction.md#the-conversation).

``message`` nodes keep their role; internal nodes become ``user`` messages wrapped in a tag naming their
origin, with ``metadata.synthetic=true``; ``instruction_context`` nodes and never-rendered notes produce
nothing. Rendering is cached per node id (nodes are append-only).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import Any

from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._notes import escape_note_text
from agent_core._storage.decode import trusted
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    JsonBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    media_ids,
    text_of,
)
from agent_core.types.enums import NodeType
from agent_core.types.model import ModelMessage
from agent_core.types.runtime import Node

SYNTHETIC_TYPES = frozenset(
    {
        NodeType.skill_context.value,
        NodeType.memory_context.value,
        NodeType.compaction.value,
        NodeType.child_result.value,
        NodeType.plan_instruction.value,
        NodeType.task_instruction.value,
        NodeType.task_board.value,
        NodeType.system_note.value,
        NodeType.hook_context.value,
    }
)
SELF_WRAPPED_NOTES = frozenset({"inbox", "autonomous_claim"})
"""``metadata.source`` of runtime notes that carry their own tag (``<inbox>``, ``<auto_claimed>``) and
escaped every model- or sender-derived part themselves (``agent_core._inbox.note``,
``agent_core._agents.team_autonomy``)."""
NEVER_RENDER = "never_render"
"""Node metadata flag for nodes that are never rendered (e.g. a worker tree's root note)."""


def attr(value: Any) -> str:
    return escape(str(value if value is not None else ""), quote=True)


def wrap_synthetic(node: Node) -> str:
    """The tagged text of an internal node (docs/context.md#synthetic-messages wrappers); the body is escaped
    (:func:`~agent_core._notes.escape_note_text`), so it cannot close its wrapper."""
    body = escape_note_text(text_of(node.content) or "".join(_block_text(b) for b in node.content))
    meta = node.metadata
    kind = node.node_type
    if kind == NodeType.skill_context:
        return f'<skill name="{attr(meta.get("skill_name"))}">{body}</skill>'
    if kind == NodeType.memory_context:
        ids = ",".join(meta.get("recalled_memory_ids") or [])
        cats = ",".join(meta.get("categories") or [])
        return f'<memory ids="{attr(ids)}" categories="{attr(cats)}">{body}</memory>'
    if kind == NodeType.compaction:
        return f'<compaction_summary first_kept_node_id="{attr(meta.get("first_kept_node_id"))}">{body}</compaction_summary>'
    if kind == NodeType.child_result:
        return (
            f'<child_result agent_id="{attr(meta.get("child_agent_id"))}" run_id="{attr(meta.get("child_run_id"))}" '
            f'status="{attr(meta.get("status"))}">{body}</child_result>'
        )
    if kind == NodeType.task_board:
        return f"<task_board>{body}</task_board>"
    if kind == NodeType.system_note and meta.get("source") in SELF_WRAPPED_NOTES:
        return text_of(node.content)  # its own tag; escaped where it was written
    return f"<{kind}>{body}</{kind}>"


def _block_text(block: ContentBlock) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, JsonBlock):
        if block.data is not None:
            from agent_core._jsontext import compact_json

            return compact_json(block.data)
        return f"{block.summary or ''}\n[artifact {block.artifact_id}]"
    if isinstance(block, ArtifactRefBlock):
        return f"[artifact {block.artifact_id}: {block.summary or ''}]"
    return ""


def referenced_artifacts(nodes: Iterable[Node]) -> set[str]:
    """Ids of the artifacts that content blocks of ``nodes`` reference (tool results included)."""
    found: set[str] = set()

    def visit(blocks: Iterable[ContentBlock]) -> None:
        for block in blocks:
            if (
                isinstance(block, ArtifactRefBlock | JsonBlock | ImageBlock | DocumentBlock)
                and block.artifact_id
            ):
                found.add(block.artifact_id)
            elif isinstance(block, ToolResultBlock):
                visit(block.content)

    for node in nodes:
        visit(node.content)
    return found


def _mark_deleted(blocks: list[ContentBlock], deleted: frozenset[str]) -> list[ContentBlock]:
    """Blocks referencing a deleted artifact render as ``[artifact <id> (deleted)]``
    (docs/storage.md#deleting-and-cleaning-up)."""
    out: list[ContentBlock] = []
    for block in blocks:
        if (
            isinstance(block, ArtifactRefBlock | ImageBlock | DocumentBlock) and block.artifact_id in deleted
        ) or (isinstance(block, JsonBlock) and block.data is None and block.artifact_id in deleted):
            out.append(TextBlock(text=f"[artifact {block.artifact_id} (deleted)]"))
        elif isinstance(block, ToolResultBlock) and referenced_in(block.content, deleted):
            out.append(block.model_copy(update={"content": _mark_deleted(list(block.content), deleted)}))
        else:
            out.append(block)
    return out


def referenced_in(blocks: Iterable[ContentBlock], ids: frozenset[str]) -> bool:
    for block in blocks:
        if (
            isinstance(block, ArtifactRefBlock | JsonBlock | ImageBlock | DocumentBlock)
            and block.artifact_id in ids
        ):
            return True
        if isinstance(block, ToolResultBlock) and referenced_in(block.content, ids):
            return True
    return False


ModelKey = tuple[str, str]
"""``(provider, model)`` a prompt is composed for."""


def foreign_reasoning(node: Node, model: ModelKey | None) -> str | None:
    """Why the reasoning blocks of an assistant ``node`` must not go to ``model`` (they go back only to
    the provider and model that produced them), else ``None``."""
    if model is None or node.role != "assistant":
        return None
    if not any(isinstance(b, ReasoningBlock) for b in node.content):
        return None
    made = (str(node.metadata.get("provider") or ""), str(node.metadata.get("model") or ""))
    if made == model:
        return None
    return f"reasoning of {made[0]}/{made[1]} is not sent to {model[0]}/{model[1]}"


def render_node(
    node: Node, deleted: frozenset[str] = frozenset(), model: ModelKey | None = None
) -> ModelMessage | None:
    """The message for one node, or ``None`` when the node is never rendered.

    ``deleted``: ids of deleted artifacts; blocks that reference one render as a deleted marker.
    ``model``: the ``(provider, model)`` the prompt is for; an assistant node's reasoning blocks are
    left out unless that model produced them (:func:`foreign_reasoning`).
    """
    if node.node_type == NodeType.instruction_context or node.metadata.get(NEVER_RENDER):
        return None
    if node.node_type in SYNTHETIC_TYPES:
        return _message(
            "user",
            [TextBlock(text=wrap_synthetic(node))],
            {"synthetic": True, "source_node_type": node.node_type, "source_node_id": node.node_id},
        )
    role = _ROLES.get(node.role, "user")
    content: list[ContentBlock]
    if role == "user":
        content = [b for b in node.content if isinstance(b, _USER_BLOCKS)]
    elif role == "assistant":
        allowed = _ASSISTANT_BLOCKS if foreign_reasoning(node, model) is None else _ASSISTANT_TEXT_BLOCKS
        content = [b for b in node.content if isinstance(b, allowed)]
        content = [b for b in content if not (isinstance(b, TextBlock) and not b.text)]
        if content and all(isinstance(b, ReasoningBlock) for b in content):
            return None  # an answer that was only reasoning says nothing to the conversation
    else:
        content = [b for b in node.content if isinstance(b, ToolResultBlock)]
    if not content:
        return None
    if deleted and referenced_in(content, deleted):
        content = _mark_deleted(content, deleted)
    return _message(role, content, {"source_node_id": node.node_id})


_USER_BLOCKS = (TextBlock, JsonBlock, ArtifactRefBlock, ImageBlock, DocumentBlock)
_ASSISTANT_TEXT_BLOCKS = (TextBlock, JsonBlock, ToolCallBlock)
_ASSISTANT_BLOCKS = (*_ASSISTANT_TEXT_BLOCKS, ReasoningBlock)
_ROLES = {"user": "user", "assistant": "assistant", "tool": "tool"}
"""A node's role → its message role as the plain string (nodes may hold :class:`MessageRole` members)."""
_MESSAGE_FIELDS = set(ModelMessage.model_fields)
"""Every field of a rendered message is set; shared by all of them (pydantic only ever adds names)."""


def _message(role: str, content: list[ContentBlock], metadata: dict[str, Any]) -> ModelMessage:
    """``ModelMessage(role=role, content=content, metadata=metadata)`` without validation (the values
    already have the field types) and without a fields set per message: the render cache keeps each
    message for the rest of the session (issue 16 target 4)."""
    return trusted(ModelMessage, {"role": role, "content": content, "metadata": metadata}, _MESSAGE_FIELDS)


class Rendered:
    """One node's cached rendering: its message, token estimate and the facts the composer needs."""

    __slots__ = ("call_ids", "message", "result_ids", "synthetic", "tokens")

    def __init__(self, message: ModelMessage, tokens: int) -> None:
        self.message = message
        self.tokens = tokens
        self.call_ids = tuple(b.tool_call_id for b in message.content if isinstance(b, ToolCallBlock))
        self.result_ids = tuple(b.tool_call_id for b in message.content if isinstance(b, ToolResultBlock))
        self.synthetic = bool(message.metadata.get("synthetic"))


class RenderCache:
    """Per-node rendered message and token estimate; valid forever because nodes never change."""

    __slots__ = (
        "_counter",
        "_entries",
        "_reasoning",
        "_refs",
        "deleted",
        "media",
        "model",
        "reasoning_dropped",
    )

    def __init__(self, counter: TokenCounter = DEFAULT_COUNTER) -> None:
        self._counter = counter
        self._entries: dict[str, Rendered | None] = {}
        self.deleted: frozenset[str] = frozenset()
        self.model: ModelKey | None = None
        """The ``(provider, model)`` the cached renderings are for (:meth:`use_model`)."""
        self._reasoning: set[str] = set()
        """Ids of the cached nodes that carry reasoning blocks (their rendering depends on the model)."""
        self.reasoning_dropped: dict[str, str] = {}
        """Node id → why its reasoning blocks were left out of the renderings (for the context report)."""
        self.media: set[str] = set()
        """Ids of the rendered nodes that carry images or documents (their requests need the bytes)."""
        """Ids of deleted artifacts the cached renderings account for."""
        self._refs: tuple[int, Node | None, frozenset[str]] = (0, None, frozenset())
        """(path length, last node, artifact ids) of the last :meth:`referenced` scan."""

    def referenced(self, path: Sequence[Node]) -> frozenset[str]:
        """:func:`referenced_artifacts` of an agent's path, scanning only the nodes appended since the
        previous call (a path is a parent chain: the same node at the same index means the same prefix)."""
        count, last, found = self._refs
        if count and len(path) >= count and path[count - 1] is last:
            if len(path) == count:
                return found
            found = found | referenced_artifacts(path[count:])
        else:
            found = frozenset(referenced_artifacts(path))
        self._refs = (len(path), path[-1] if path else None, found)
        return found

    def use_model(self, model: ModelKey) -> bool:
        """Renders for ``model`` from now on; True (and the entries of nodes with reasoning dropped) when
        it changed, so those nodes render again with or without their reasoning."""
        if model == self.model:
            return False
        changed = self.model is not None and bool(self._reasoning)
        self.model = model
        for node_id in self._reasoning:
            self._entries.pop(node_id, None)
        self._reasoning.clear()
        self.reasoning_dropped.clear()
        return changed

    def set_deleted(self, deleted: frozenset[str]) -> bool:
        """Records the deleted artifacts; True (and every entry dropped) when the set changed."""
        if deleted == self.deleted:
            return False
        self.deleted = deleted
        self._entries.clear()
        return True

    def entry(self, node: Node) -> Rendered | None:
        """The cached rendering of ``node`` (``None`` when the node is never rendered)."""
        try:
            return self._entries[node.node_id]
        except KeyError:
            if node.role == "assistant" and any(isinstance(b, ReasoningBlock) for b in node.content):
                self._reasoning.add(node.node_id)
                reason = foreign_reasoning(node, self.model)
                if reason is not None:
                    self.reasoning_dropped[node.node_id] = reason
            message = render_node(node, self.deleted, self.model)
            if message is not None and media_ids(message.content):
                self.media.add(node.node_id)
            entry = Rendered(message, self._counter.message(message.content)) if message is not None else None
            self._entries[node.node_id] = entry
            return entry

    def get(self, node: Node) -> tuple[ModelMessage | None, int]:
        entry = self.entry(node)
        return (entry.message, entry.tokens) if entry is not None else (None, 0)

    def forget(self, node_ids: set[str]) -> None:
        for node_id in node_ids:
            self._entries.pop(node_id, None)

    def __len__(self) -> int:
        return len(self._entries)
