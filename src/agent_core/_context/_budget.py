"""System-block budgeting for the prompt composer (docs/context.md#static-blocks,
docs/context.md#dynamic-blocks; docs/compaction.md#budget-and-trimming; issue 13).

- Dynamic blocks are selected by priority within their budget; a block that partly fits is truncated
  with a marker (:func:`select_dynamic`).
- Static blocks are kept whole while the window can hold them next to the output floor and the current
  user message. On a smaller window they degrade by priority, highest priority number first, and
  ``system.core`` (priority 0) never: each block is dropped, or truncated with a marker when part of it
  is enough. At the tool catalog's priority (64) the tool descriptions degrade too: every tool keeps its
  name and parameter schema with the first line of its description (the line the catalog shows), so the
  catalog block adds nothing and goes. :func:`degrade_static` is pure; the caller shortens the tool
  definitions it sends (:func:`short_tools`) when the plan says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_core._context.tokens import TokenCounter
from agent_core._memo import WireMemo
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import SystemBlockReport
from agent_core.types.tools import ToolDefinition

TRUNCATION_MARKER = "\n[... truncated to fit the context budget ...]"
TOOL_DESCRIPTION_PRIORITY = 64
"""The tool descriptions degrade together with ``runtime.tool_catalog`` (docs/context.md#static-blocks)."""
KEPT_PRIORITY = 0
"""Static blocks at this priority (``system.core``) are never degraded."""
MIN_TRUNCATED_TOKENS = 32


def counted(block: SystemBlock, counter: TokenCounter) -> SystemBlock:
    if block.token_count is not None:
        return block
    return block.model_copy(update={"token_count": counter.text(block.content)})


def sys_report(block: SystemBlock, selected: bool, reason: str | None) -> SystemBlockReport:
    return SystemBlockReport(
        block_id=block.block_id,
        source=block.source,
        dynamic=block.dynamic,
        priority=block.priority,
        token_count=block.token_count or 0,
        selected=selected,
        reason=reason,
    )


def truncate_to(text: str, max_tokens: int, counter: TokenCounter, marker: str = TRUNCATION_MARKER) -> str:
    if counter.text(text) <= max_tokens:
        return text
    keep = max(0, max_tokens * 4 - len(marker))
    return text[:keep] + marker


def _cut(block: SystemBlock, room: int, counter: TokenCounter) -> SystemBlock:
    marker = str(block.metadata.get("truncation_marker") or TRUNCATION_MARKER)
    text = truncate_to(block.content, room, counter, marker)
    return block.model_copy(
        update={
            "content": text,
            "token_count": counter.text(text),
            "metadata": {**block.metadata, "truncated": True},
        }
    )


def select_dynamic(
    blocks: list[SystemBlock], budget: int, counter: TokenCounter, reports: list[SystemBlockReport]
) -> tuple[list[SystemBlock], int]:
    """Dynamic blocks by priority within ``budget`` (docs/context.md#dynamic-blocks); returns them and their
    tokens."""
    ordered = sorted((counted(b, counter) for b in blocks), key=lambda b: b.priority)
    chosen: list[SystemBlock] = []
    used = 0
    for block in ordered:
        tokens = block.token_count or 0
        if used + tokens <= budget:
            chosen.append(block)
            used += tokens
            reports.append(sys_report(block, True, "selected"))
            continue
        room = budget - used
        if room > MIN_TRUNCATED_TOKENS:
            cut = _cut(block, room, counter)
            chosen.append(cut)
            used += cut.token_count or 0
            reports.append(sys_report(cut, True, "truncated"))
        else:
            reports.append(sys_report(block, False, "budget"))
    return chosen, used


@dataclass(kw_only=True, slots=True)
class StaticPlan:
    """The static part of a request: the blocks kept (prompt order) and the tool schema cost."""

    blocks: list[SystemBlock]
    tool_tokens: int
    short_tool_descriptions: bool = False
    reports: list[SystemBlockReport] = field(default_factory=list)
    min_tokens: int = 0
    """Static tokens at the deepest degradation (``system.core`` + the shortened tool schemas)."""

    @property
    def tokens(self) -> int:
        return sum(b.token_count or 0 for b in self.blocks) + self.tool_tokens


def degrade_static(
    blocks: Sequence[SystemBlock],
    *,
    tool_tokens: int,
    tool_tokens_short: int,
    room: int,
    counter: TokenCounter,
) -> StaticPlan:
    """Keeps the static blocks and tool schemas within ``room`` tokens, degrading by priority."""
    static = [counted(b, counter) for b in blocks]
    kept_min = sum(b.token_count or 0 for b in static if b.priority <= KEPT_PRIORITY)
    plan = StaticPlan(blocks=static, tool_tokens=tool_tokens, min_tokens=kept_min + tool_tokens_short)
    over = plan.tokens - room
    if over <= 0:
        plan.reports = [sys_report(b, True, None) for b in static]
        return plan
    outcome: dict[str, tuple[SystemBlock | None, str]] = {}
    tools_pending = tool_tokens_short < tool_tokens
    for block in sorted(static, key=lambda b: b.priority, reverse=True):
        if over <= 0 or block.priority <= KEPT_PRIORITY:
            break
        if tools_pending and block.priority < TOOL_DESCRIPTION_PRIORITY:
            over -= _shorten_tools(plan, tool_tokens_short)
            tools_pending = False
            if over <= 0:
                break
        tokens = block.token_count or 0
        if block.priority == TOOL_DESCRIPTION_PRIORITY or tokens <= over:
            outcome[block.block_id] = (None, "degraded")
            over -= tokens
        else:
            cut = _cut(block, tokens - over, counter)
            outcome[block.block_id] = (cut, "truncated")
            over -= tokens - (cut.token_count or 0)
        if tools_pending and block.priority == TOOL_DESCRIPTION_PRIORITY:
            over -= _shorten_tools(plan, tool_tokens_short)
            tools_pending = False
    if tools_pending and over > 0:
        over -= _shorten_tools(plan, tool_tokens_short)
    kept: list[SystemBlock] = []
    reports: list[SystemBlockReport] = []
    for block in static:
        replacement, reason = outcome.get(block.block_id, (block, ""))
        if replacement is None:
            reports.append(sys_report(block, False, reason))
            continue
        kept.append(replacement)
        reports.append(sys_report(replacement, True, reason or None))
    if plan.short_tool_descriptions:
        reports.append(
            SystemBlockReport(
                block_id="tool_descriptions",
                source="tools",
                dynamic=False,
                priority=TOOL_DESCRIPTION_PRIORITY,
                token_count=plan.tool_tokens,
                selected=True,
                reason="shortened",
            )
        )
    plan.blocks = kept
    plan.reports = reports
    return plan


def _shorten_tools(plan: StaticPlan, short_tokens: int) -> int:
    saved = plan.tool_tokens - short_tokens
    plan.tool_tokens = short_tokens
    plan.short_tool_descriptions = True
    return saved


def first_line(description: str) -> str:
    stripped = description.strip()
    return stripped.splitlines()[0] if stripped else ""


_SHORT = WireMemo()
"""Tool definition → its one-line form (definitions are immutable and shared by every run)."""


def short_tools(tools: Sequence[ToolDefinition]) -> list[ToolDefinition]:
    """The tool definitions with one-line descriptions (names and parameter schemas unchanged)."""
    out: list[ToolDefinition] = []
    for tool in tools:
        short: ToolDefinition | None = _SHORT.get(tool)
        if short is None:
            line = first_line(tool.description)
            short = (
                tool if tool.description.strip() == line else tool.model_copy(update={"description": line})
            )
            _SHORT.put(tool, short)
        out.append(short)
    return out
