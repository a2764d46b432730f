"""The ``memory_catalog`` dynamic system block (docs/context.md#dynamic-blocks, docs/context.md#files,
docs/context.md#recall).

Only for runs whose effective set contains ``internal.recall_memory`` (main/Orchestrator with memory
enabled). Content = the current ``MEMORY.md`` (catalog only, never bodies), cut at the end to
``memory.catalog_max_tokens`` with a marker; the file itself is never changed. Priority 130. An absent,
unreadable or empty ``MEMORY.md`` gives no block. The file is re-read only when its mtime/size changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._memory.files import MemoryStore
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import Node

BLOCK_ID = "memory_catalog"
PRIORITY = 130
TRUNCATED_MARKER = "\n… [memory catalog truncated; older entries omitted]"


def cut_to_tokens(text: str, max_tokens: int, counter: TokenCounter) -> tuple[str, bool]:
    """``text`` cut at the end (on a line boundary when possible) to ``max_tokens`` incl. the marker."""
    if counter.text(text) <= max_tokens:
        return text, False
    budget = max(0, max_tokens - counter.text(TRUNCATED_MARKER))
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.text(text[:mid]) <= budget:
            lo = mid
        else:
            hi = mid - 1
    head = text[:lo]
    newline = head.rfind("\n")
    if newline > 0:
        head = head[:newline]
    return head + TRUNCATED_MARKER, True


@dataclass(kw_only=True, slots=True)
class MemoryCatalogBlock:
    """Builds the block; cached per ``(inode, mtime_ns, size)`` of ``MEMORY.md``."""

    store: MemoryStore
    max_tokens: int
    counter: TokenCounter = DEFAULT_COUNTER
    _cache: tuple[tuple[int, int, int], SystemBlock | None] | None = field(default=None)

    def block(self) -> SystemBlock | None:
        path = self.store.catalog_path
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        text = self.store.read_catalog()
        block = self._build(text, str(path)) if text and text.strip() else None
        self._cache = (key, block)
        return block

    def _build(self, text: str, path: str) -> SystemBlock:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        header, footer = "<memory_catalog>\n", "\n</memory_catalog>"
        room = self.max_tokens - self.counter.text(header + footer)
        body, truncated = cut_to_tokens(text.strip(), max(room, 1), self.counter)
        content = f"{header}{body}{footer}"
        return SystemBlock(
            block_id=BLOCK_ID,
            source="memory_catalog",
            content=content,
            priority=PRIORITY,
            dynamic=True,
            token_count=self.counter.text(content),
            metadata={"path": path, "hash": digest, "truncated": truncated},
        )

    def source(self, _path: Sequence[Node]) -> list[SystemBlock]:
        """A :data:`~agent_core._context.prompt.DynamicSource`."""
        block = self.block()
        return [block] if block is not None else []
