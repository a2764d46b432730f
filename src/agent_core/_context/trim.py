"""Prompt-view degradation used by the composer when the conversation does not fit
(docs/compaction.md#the-conversation).

Only the request view changes: stored nodes never do. Step 1/3.2 shorten artifact previews, step 3.1 lists
the large protected blocks the caller may artifactise.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core._context.conversation import ConversationItem, block_key
from agent_core._context.tokens import TokenCounter
from agent_core._jsontext import compact_json
from agent_core.types.content import ArtifactRefBlock, ContentBlock, JsonBlock, TextBlock, ToolResultBlock
from agent_core.types.runtime import ArtifactDegradation

SUMMARY_LIMIT = 200


@dataclass(frozen=True, slots=True)
class DegradableBlock:
    key: str
    node_id: str
    block: ContentBlock
    tokens: int
    tool_name: str | None = None
    """Canonical tool name when the block belongs to a tool result node."""


def shrink_previews(
    groups: list[list[ConversationItem]],
    counter: TokenCounter,
    out: list[ArtifactDegradation],
    *,
    protected: bool,
) -> None:
    for g in groups:
        for it in g:
            if it.protected != protected:
                continue
            new_content, changed = shrink_blocks(it.message.content, it.node.node_id, out, bare=not protected)
            if changed:
                it.message = it.message.model_copy(update={"content": new_content})
                it.tokens = counter.message(new_content)


def shrink_blocks(
    blocks: list[ContentBlock], node_id: str, out: list[ArtifactDegradation], *, bare: bool
) -> tuple[list[ContentBlock], bool]:
    changed = False
    result: list[ContentBlock] = []
    for block in blocks:
        is_preview = isinstance(block, ArtifactRefBlock) or (
            isinstance(block, JsonBlock) and block.artifact_id
        )
        if is_preview and isinstance(block, ArtifactRefBlock | JsonBlock) and block.summary:
            summary = None if bare else block.summary[:SUMMARY_LIMIT]
            if summary != block.summary:
                block = block.model_copy(update={"summary": summary})
                out.append(
                    ArtifactDegradation(node_id=node_id, artifact_id=str(block.artifact_id), action="summary")
                )
                changed = True
        elif isinstance(block, ToolResultBlock):
            inner, inner_changed = shrink_blocks(block.content, node_id, out, bare=bare)
            if inner_changed:
                block = block.model_copy(update={"content": inner})
                changed = True
        result.append(block)
    return result, changed


def degradable_blocks(
    items: list[ConversationItem],
    budget: int,
    counter: TokenCounter,
    *,
    substitutions: dict[str, ContentBlock],
    limit_tokens: int,
    limit_bytes: int,
) -> list[DegradableBlock]:
    """Blocks large enough for secondary degradation (docs/compaction.md#the-conversation step 3.1), largest
    first."""
    quarter = max(1, budget // 4)
    found: list[DegradableBlock] = []

    def consider(key: str, node_id: str, block: ContentBlock, tool_name: str | None = None) -> None:
        if key in substitutions:
            return
        if isinstance(block, TextBlock):
            raw = block.text
        elif isinstance(block, JsonBlock) and block.data is not None:
            raw = compact_json(block.data)
        else:
            return
        tokens = counter.text(raw)
        if tokens > quarter or tokens > limit_tokens or len(raw.encode()) > limit_bytes:
            found.append(DegradableBlock(key, node_id, block, tokens, tool_name))

    for it in items:
        node_id = it.node.node_id
        for i, block in enumerate(it.message.content):
            if isinstance(block, ToolResultBlock):
                tool_name = it.node.metadata.get("tool_name")
                for j, inner in enumerate(block.content):
                    consider(block_key(node_id, i, j), node_id, inner, tool_name)
            elif it.message.role != "assistant" or isinstance(block, JsonBlock):
                consider(block_key(node_id, i), node_id, block)
    found.sort(key=lambda d: d.tokens, reverse=True)
    return found
