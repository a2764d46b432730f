"""``internal.recall_memory`` and the Memory Recall Selector (docs/context.md#recall,
docs/tools.md#built-in-tools, docs/tools.md#effective-tool-sets).

Contracts:

- readonly, tags ``internal`` + ``readonly``, parallel; never asks; main/Orchestrator only (role matrix).
  Input ``{query: str, limit: int | None}`` with ``1 <= limit <= memory.recall_top_k``.
- The selector is an internal model call (``resolve_purpose_model(config, "memory_recall")``, instructions
  ``memory.recall_selector``, ``metadata.purpose="memory_recall"``, no agent/run records, no hooks). It
  gets the query, the current user request, a recent-context summary, ``MEMORY.md`` and all frontmatter,
  and answers ``{"memory_ids": [...]}``; unknown ids are dropped, the list is cut to the limit.
- Bodies are added in selector order while ``memory.memory_context_token_budget`` allows; one that does not
  fit is skipped. A memory already visible on the active path (not covered by a compaction) with the same
  file hash is reported in ``already_recalled_ids`` and not injected again; a changed file is re-injected.
- New bodies go into ONE ``memory_context`` node (role ``user``) with metadata ``recalled_memory_ids``,
  ``categories``, ``query``, ``selected_by_model``, ``source_paths`` (+ ``memory_hashes``). Result JSON
  ``{recalled_memory_ids, already_recalled_ids, memories: [{id, category, summary}]}``; no bodies.
- Selector failure (provider error, unparsable answer) → ``ToolError(memory_recall_failed)``, no node.
- Pure reading: no memory file is modified.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core._context.conversation import latest_valid_compaction
from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._memory.files import MemoryRecord, MemoryStore, render_catalog
from agent_core._memory.scan import is_assistant_message, is_user_message
from agent_core._notes import escape_note_text
from agent_core.errors import (
    AgentCoreError,
    ErrorCode,
    InvalidArgumentError,
    MemoryOperationError,
    ToolNotAvailableError,
)
from agent_core.tools.context import ContextNodeDraft, ToolContext
from agent_core.types.content import TextBlock, text_of
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.model import ToolCall
from agent_core.types.runtime import Node
from agent_core.types.tools import ToolDefinition

RECALL_TOOL = "internal.recall_memory"
RECENT_MESSAGES = 6
RECENT_CHARS = 300

SelectFn = Callable[[str, str, int], Awaitable[str]]
"""``(session_id, selector user prompt, limit) -> raw selector answer text`` (raises on model failure)."""


def recall_definition(top_k: int) -> ToolDefinition:
    return ToolDefinition(
        name=RECALL_TOOL,
        description=(
            "Load relevant long-term memories (listed in the memory catalog) into the conversation. "
            "Describe what you need in 'query'; the selected memories arrive in a <memory> message."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "What you are looking for."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": top_k,
                    "description": f"Maximum number of memories to load (at most {top_k}).",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
        permission="readonly",
        tags=["internal", "readonly"],
        metadata={"concurrency": "parallel", "source": "internal"},
    )


def parse_selection(text: str) -> list[str]:
    """The ``memory_ids`` of a selector answer (one JSON object, optionally in a ``json`` fence)."""
    raw = text.strip()
    fence = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", raw, flags=re.S)
    if fence:
        raw = fence.group(1)
    try:
        data = json.loads(raw)
    except ValueError:
        raise ValueError("the selector answer is not a JSON object") from None
    if not isinstance(data, dict) or not isinstance(data.get("memory_ids"), list):
        raise ValueError('the selector answer lacks a "memory_ids" list')
    ids = data["memory_ids"]
    if not all(isinstance(i, str) for i in ids):
        raise ValueError('"memory_ids" must hold strings')
    return list(dict.fromkeys(ids))


def visible_nodes(path: Sequence[Node]) -> Sequence[Node]:
    """``path`` without the nodes covered by its last valid compaction."""
    index, _ = latest_valid_compaction(path)
    if index is None:
        return path
    first_kept = path[index].metadata.get("first_kept_node_id")
    for i, node in enumerate(path):
        if node.node_id == first_kept:
            return path[i:]
    return path[index:]


def recalled_hashes(path: Sequence[Node]) -> dict[str, str]:
    """Memory id -> file hash of every memory injected by a visible ``memory_context`` node."""
    seen: dict[str, str] = {}
    for node in visible_nodes(path):
        if node.node_type != NodeType.memory_context.value:
            continue
        hashes = node.metadata.get("memory_hashes")
        if isinstance(hashes, dict):
            seen.update({str(k): str(v) for k, v in hashes.items()})
    return seen


def _recent_context(path: Sequence[Node]) -> tuple[str, str]:
    """(current user request, short summary of the recent messages)."""
    messages = [n for n in path if is_user_message(n) or is_assistant_message(n)]
    request = next((text_of(n.content) for n in reversed(messages) if is_user_message(n)), "")
    lines = []
    for node in messages[-RECENT_MESSAGES:]:
        text = " ".join(text_of(node.content).split())
        lines.append(f"{node.role}: {text[:RECENT_CHARS]}{' …' if len(text) > RECENT_CHARS else ''}")
    return request, "\n".join(lines) or "(none)"


def selector_prompt(
    *, query: str, path: Sequence[Node], catalog: str, records: list[MemoryRecord], limit: int
) -> str:
    request, recent = _recent_context(path)
    front = [
        {k: r.front.dump().get(k) for k in ("id", "category", "summary", "tags", "created_at", "updated_at")}
        for r in records
    ]
    lines = "\n".join(json.dumps(f, ensure_ascii=False) for f in front)
    return "\n\n".join(
        [
            f"<recall_query>{escape_note_text(query)}</recall_query>",
            f"<user_request>\n{escape_note_text(request.strip() or '(none)')}\n</user_request>",
            f"<recent_context>\n{escape_note_text(recent)}\n</recent_context>",
            f"<memory_catalog>\n{escape_note_text(catalog.strip())}\n</memory_catalog>",
            f"<memory_frontmatter>\n{escape_note_text(lines)}\n</memory_frontmatter>",
            f"<limit>{limit}</limit>",
        ]
    )


def memory_section(record: MemoryRecord) -> str:
    return f"## {record.id} ({record.category}) — {record.summary}\n\n{record.body.strip()}\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecallLimits:
    top_k: int
    token_budget: int


class RecallToolAdapter:
    """:class:`~agent_core.tools.adapter.ToolAdapter` serving ``internal.recall_memory``."""

    def __init__(
        self,
        *,
        store: MemoryStore,
        limits: RecallLimits,
        select: SelectFn,
        counter: TokenCounter = DEFAULT_COUNTER,
    ) -> None:
        self._store = store
        self._limits = limits
        self._select = select
        self._counter = counter

    def definitions(self) -> list[ToolDefinition]:
        return [recall_definition(self._limits.top_k)]

    async def close(self) -> None:
        return None

    async def execute(self, call: ToolCall, ctx: ToolContext) -> dict[str, Any]:
        if call.name != RECALL_TOOL:
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available, f"tool '{call.name}' is not available in this run"
            )
        query, limit = self._arguments(call.arguments)
        records = self._store.records()
        by_id = {r.id: r for r in records}
        if not records:
            return {"recalled_memory_ids": [], "already_recalled_ids": [], "memories": []}
        path = list(ctx.sink.active_path())
        catalog = self._store.read_catalog() or render_catalog(records)
        prompt = selector_prompt(query=query, path=path, catalog=catalog, records=records, limit=limit)
        try:
            answer = await self._select(ctx.session_id, prompt, limit)
            selected = [i for i in parse_selection(answer) if i in by_id][:limit]
        except (AgentCoreError, ValueError) as exc:
            reason = exc.message if isinstance(exc, AgentCoreError) else str(exc)
            raise MemoryOperationError(
                ErrorCode.memory_recall_failed,
                f"memory recall selector failed: {reason}",
                details={"query": query},
                cause=exc,
            ) from exc
        seen = recalled_hashes(path)
        recalled: list[MemoryRecord] = []
        already: list[MemoryRecord] = []
        used = 0
        for memory_id in selected:
            record = by_id[memory_id]
            if seen.get(memory_id) == record.hash:
                already.append(record)
                continue
            cost = self._counter.text(memory_section(record))
            if used + cost > self._limits.token_budget:
                continue
            used += cost
            recalled.append(record)
        if recalled:
            ctx.add_context_node(
                ContextNodeDraft(
                    node_type=NodeType.memory_context,
                    role=MessageRole.user,
                    content=[TextBlock(text="\n".join(memory_section(r) for r in recalled))],
                    metadata={
                        "recalled_memory_ids": [r.id for r in recalled],
                        "categories": list(dict.fromkeys(r.category for r in recalled)),
                        "query": query,
                        "selected_by_model": selected,
                        "source_paths": [str(r.path) for r in recalled],
                        "memory_hashes": {r.id: r.hash for r in recalled},
                        "loaded_by_tool_call_id": ctx.tool_call_id,
                    },
                )
            )
        return {
            "recalled_memory_ids": [r.id for r in recalled],
            "already_recalled_ids": [r.id for r in already],
            "memories": [
                {"id": r.id, "category": r.category, "summary": r.summary} for r in recalled + already
            ],
        }

    def _arguments(self, arguments: dict[str, Any]) -> tuple[str, int]:
        query = arguments.get("query")
        limit = arguments.get("limit")
        bad = set(arguments) - {"query", "limit"}
        if not isinstance(query, str) or not query.strip() or bad:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "internal.recall_memory takes {query: non-empty string, limit?: integer}",
                details={"errors": [{"path": "query", "message": "required non-empty string"}]},
            )
        top_k = self._limits.top_k
        if limit is None:
            return query.strip(), top_k
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= top_k:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"limit must be an integer between 1 and {top_k} (memory.recall_top_k)",
                details={"errors": [{"path": "limit", "message": f"1 <= limit <= {top_k}"}]},
            )
        return query.strip(), limit
