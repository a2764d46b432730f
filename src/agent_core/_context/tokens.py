"""The core token estimate (docs/providers.md#options-raw-data-and-token-counts): ``ceil(len(text) / 4)`` per
text, +4 per message.

Provider usage is authoritative for billing; this estimate only drives budgeting and compaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from agent_core._jsontext import compact_json
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
)

MESSAGE_OVERHEAD = 4
IMAGE_TOKENS = 1600
"""Estimate of one image: about what Anthropic charges for an image of the default 1568 px long edge
((w x h) / 750) and above OpenAI's high-detail cost of a 1024 px image."""
DOCUMENT_TOKENS = 3000
"""Estimate of one PDF (about two pages of text and page images); the provider's reported input tokens
correct it (the per-model correction factor)."""


class TokenCounter(Protocol):
    def text(self, value: str) -> int: ...

    def blocks(self, blocks: Iterable[ContentBlock]) -> int: ...

    def message(self, blocks: Iterable[ContentBlock]) -> int: ...


class CharTokenCounter:
    """Default estimator: a quarter of the character count, rounded up."""

    def text(self, value: str) -> int:
        return -(-len(value) // 4)

    def block(self, block: ContentBlock) -> int:
        if isinstance(block, TextBlock):
            return self.text(block.text)
        if isinstance(block, JsonBlock):
            if block.data is not None:
                return self.text(compact_json(block.data))
            return self.text(block.summary or "") + 8
        if isinstance(block, ToolCallBlock):
            return self.text(block.name) + self.text(compact_json(block.arguments)) + 4
        if isinstance(block, ToolResultBlock):
            inner = self.blocks(block.content)
            if block.error is not None:
                inner += self.text(block.error.message) + 4
            return inner + 4
        if isinstance(block, ArtifactRefBlock):
            return self.text(block.summary or "") + 8
        if isinstance(block, ReasoningBlock):
            return self.text(block.text)
        if isinstance(block, ImageBlock):
            return IMAGE_TOKENS
        if isinstance(block, DocumentBlock):
            return DOCUMENT_TOKENS
        return 0

    def blocks(self, blocks: Iterable[ContentBlock]) -> int:
        return sum(self.block(b) for b in blocks)

    def message(self, blocks: Iterable[ContentBlock]) -> int:
        return self.blocks(blocks) + MESSAGE_OVERHEAD


DEFAULT_COUNTER = CharTokenCounter()
