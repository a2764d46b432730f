"""The prompt composer's budget and trimming (compact.md §4, §9; context.md §3–§5).

:func:`compose` is pure: given the system blocks, the agent's active path (root → tip) and the limits, it
returns the system blocks and messages of the next request plus the report data. Secondary degradation that
needs I/O (artifactising large blocks, compact.md §9.4 step 3.1) is done by the caller, which passes the
substitute blocks back in ``ComposeInput.substitutions`` and composes again.

Output reservation (issue 13): ``reserve_output_tokens`` is a cap. When the static part (system blocks and
tool schemas) leaves room for the full cap the build reserves it; otherwise it is budgeted with the floor
(``min_output_tokens``) and the output gets what the window leaves, at most the cap
(``TokenBudget.reserve_output_tokens`` is that effective figure).
Static blocks and tool descriptions degrade by priority only when they cannot fit next to the floor and the
current user message (``_budget.degrade_static``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core.context._budget import (
    TRUNCATION_MARKER,
    StaticPlan,
    degrade_static,
    select_dynamic,
    truncate_to,
)
from agent_core.context.render import RenderCache
from agent_core.context.tokens import DEFAULT_COUNTER, MESSAGE_OVERHEAD, TokenCounter
from agent_core.context.trim import DegradableBlock, block_key, degradable_blocks, shrink_previews
from agent_core.types.content import (
    ContentBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.enums import NodeType
from agent_core.types.model import ModelMessage, SystemBlock
from agent_core.types.runtime import (
    ArtifactDegradation,
    Node,
    SyntheticBlockReport,
    SystemBlockReport,
    TokenBudget,
)

_COMPACTION = NodeType.compaction.value
_ALWAYS_PROTECTED = frozenset({NodeType.skill_context.value, NodeType.memory_context.value})
__all__ = ["TRUNCATION_MARKER", "ComposeInput", "ComposeLimits", "Composition", "compose"]


@dataclass(frozen=True, kw_only=True)
class ComposeLimits:
    context_window: int
    reserve_output_tokens: int
    """The cap of the output reservation."""
    dynamic_system_budget: int
    min_output_tokens: int = 512
    """The floor the reservation may shrink to (never above the cap)."""
    non_system_budget: int | None = None
    result_limit_bytes: int = 65536
    result_limit_tokens: int = 8000
    task_board_token_budget: int = 1200


@dataclass(kw_only=True)
class ComposeInput:
    static_blocks: list[SystemBlock]
    dynamic_blocks: list[SystemBlock]
    path: Sequence[Node]
    limits: ComposeLimits
    current_run_id: str | None = None
    current_user_node_id: str | None = None
    task_board: str | None = None
    substitutions: dict[str, ContentBlock] = field(default_factory=dict)
    """Replacement blocks keyed by :func:`block_key` (secondary degradation done by the caller)."""
    tool_tokens: int = 0
    """Estimated tokens of the tool schemas sent with the request; counted as static."""
    tool_tokens_short: int | None = None
    """The same with one-line tool descriptions (``None``: the descriptions cannot be shortened)."""
    memo: ComposeMemo | None = None
    """The agent's composition memo: lets a build over a path that only grew reuse the previous one."""


@dataclass(kw_only=True)
class Composition:
    system: list[SystemBlock]
    messages: list[ModelMessage]
    fits: bool
    static_overflow: bool
    total_tokens: int
    budget: TokenBudget
    included_node_ids: list[str]
    excluded_node_ids: list[str]
    excluded_reasons: dict[str, str]
    compaction_node_id: str | None
    system_reports: list[SystemBlockReport]
    synthetic_reports: list[SyntheticBlockReport]
    degradations: list[ArtifactDegradation]
    unpaired_tool_call_ids: list[str]
    degradable: list[DegradableBlock]
    """Protected blocks large enough for step 3.1 (largest first); empty when the prompt fits."""
    covered_node_ids: list[str] = field(default_factory=list)
    task_board_text: str | None = None
    short_tool_descriptions: bool = False
    """The tool definitions must be sent with one-line descriptions (``_budget.short_tools``)."""
    min_prompt_tokens: int = 0
    """The smallest prompt this build could be degraded to (static at its deepest + the user message)."""

    def report_fields(self) -> dict[str, Any]:
        return {
            "token_budget": self.budget,
            "included_node_ids": self.included_node_ids,
            "excluded_node_ids": self.excluded_node_ids,
            "excluded_reasons": self.excluded_reasons,
            "compaction_node_id": self.compaction_node_id,
            "system_blocks": self.system_reports,
            "synthetic_blocks": self.synthetic_reports,
            "artifact_degradations": self.degradations,
            "unpaired_tool_call_ids": self.unpaired_tool_call_ids,
        }


def is_skipped_assistant(node: Node) -> str | None:
    """``"partial"``/``"failed"`` for assistant nodes that never re-enter a prompt."""
    if node.role != "assistant":
        return None
    meta = node.metadata
    if meta.get("failed"):
        return "failed"
    if meta.get("partial") or meta.get("aborted"):
        return "partial"
    return None


def latest_valid_compaction(path: Sequence[Node]) -> tuple[int | None, list[str]]:
    """Index of the last valid compaction node on ``path`` and the ids of invalid ones (compact.md §3)."""
    positions = [i for i, n in enumerate(path) if n.node_type == _COMPACTION]
    if not positions:
        return None, []
    index_of = {n.node_id: i for i, n in enumerate(path)}
    valid: int | None = None
    prev_first_kept = -1
    invalid: list[str] = []
    for i in positions:
        node = path[i]
        first_kept = index_of.get(str(node.metadata.get("first_kept_node_id")))
        if first_kept is None or first_kept >= i or first_kept < prev_first_kept:
            invalid.append(node.node_id)
            continue
        valid = i
        prev_first_kept = first_kept
    return valid, invalid


@dataclass(slots=True)
class _Item:
    node: Node
    message: ModelMessage
    tokens: int
    call_ids: tuple[str, ...] = ()
    """ids of the message's tool_call blocks"""
    result_ids: tuple[str, ...] = ()
    """ids of the message's tool_result blocks"""
    synthetic: bool = False
    protected: bool = False


def compose(inp: ComposeInput, cache: RenderCache, counter: TokenCounter = DEFAULT_COUNTER) -> Composition:
    lim = inp.limits
    window, cap = lim.context_window, lim.reserve_output_tokens
    floor = min(lim.min_output_tokens, cap)
    conversation = _incremental(inp, cache, counter) if inp.memo is not None else None
    if conversation is None:
        conversation = _full(inp, cache, counter)
    user_tokens = _user_tokens(conversation[0], inp.current_user_node_id)
    plan = degrade_static(
        inp.static_blocks,
        tool_tokens=inp.tool_tokens,
        tool_tokens_short=inp.tool_tokens if inp.tool_tokens_short is None else inp.tool_tokens_short,
        room=window - floor - user_tokens,
        counter=counter,
    )
    # The full cap whenever the static part leaves room for it (a long conversation then goes through
    # trimming, degradation and recovery compaction as before); the floor only when the system prompt and
    # tool schemas themselves crowd the window.
    reserve = cap if plan.tokens + cap <= window else floor
    return _finish(_budgeted(inp, cache, counter, conversation, plan, reserve), plan, user_tokens, cap)


def _user_tokens(groups: list[list[_Item]], user_node_id: str | None) -> int:
    if user_node_id is None:
        return 0
    return next((it.tokens for g in groups for it in g if it.node.node_id == user_node_id), 0)


def _finish(comp: Composition, plan: StaticPlan, user_tokens: int, cap: int) -> Composition:
    comp.short_tool_descriptions = plan.short_tool_descriptions
    comp.min_prompt_tokens = plan.min_tokens + user_tokens
    if comp.fits:
        reserve = min(cap, comp.budget.context_window - comp.total_tokens)
        comp.budget = comp.budget.model_copy(update={"reserve_output_tokens": reserve})
    return comp


def _budgeted(
    inp: ComposeInput,
    cache: RenderCache,
    counter: TokenCounter,
    conversation: _Conversation,
    plan: StaticPlan,
    reserve: int,
) -> Composition:
    lim = inp.limits
    window = lim.context_window
    system_reports: list[SystemBlockReport] = list(plan.reports)
    static = plan.blocks
    static_tokens = plan.tokens
    static_overflow = static_tokens + reserve > window

    dyn_budget = max(0, min(lim.dynamic_system_budget, window - static_tokens - reserve))
    dynamic, dyn_used = select_dynamic(inp.dynamic_blocks, dyn_budget, counter, system_reports)
    non_system = max(0, window - reserve - static_tokens - dyn_used)
    if lim.non_system_budget is not None:
        non_system = min(non_system, lim.non_system_budget)

    groups, starts, excluded, unpaired, compaction_id, covered = conversation

    board_tokens = 0
    board_text = inp.task_board
    if board_text:
        board_text = truncate_to(board_text, lim.task_board_token_budget, counter)
        board_tokens = counter.text(board_text) + MESSAGE_OVERHEAD + 5

    degradations: list[ArtifactDegradation] = []

    def total() -> int:
        return sum([it.tokens for g in groups for it in g]) + board_tokens

    conversation_tokens = sum([it.tokens for g in groups for it in g])
    if inp.memo is not None:
        if conversation_tokens + board_tokens <= non_system and not inp.substitutions and groups:
            inp.memo.remember(inp.path, groups, starts, excluded, unpaired, compaction_id, covered, cache)
        else:
            inp.memo.forget()
    if conversation_tokens + board_tokens > non_system:
        _protect(groups, inp)
        shrink_previews(groups, counter, degradations, protected=False)
        current = total()
        while current > non_system:
            victim = next((g for g in groups if not any(it.protected for it in g)), None)
            if victim is None:
                break
            groups.remove(victim)
            for it in victim:
                excluded[it.node.node_id] = "budget"
                current -= it.tokens
        if current > non_system:
            shrink_previews(groups, counter, degradations, protected=True)

    flat = [it for g in groups for it in g]
    while flat and flat[0].message.role != "user":
        dropped = flat.pop(0)
        excluded[dropped.node.node_id] = "budget"
    messages = [it.message for it in flat]
    if board_text:
        messages.append(
            ModelMessage(
                role="user",
                content=[TextBlock(text=f"<task_board>{board_text}</task_board>")],
                metadata={"synthetic": True, "source": "task_board"},
            )
        )
    non_system_tokens = sum([it.tokens for it in flat]) + board_tokens
    fits = not static_overflow and non_system_tokens <= non_system
    degradable: list[DegradableBlock] = []
    if not fits:
        degradable = degradable_blocks(flat, inp, non_system, counter)

    included = [it.node.node_id for it in flat]
    synthetic = [
        SyntheticBlockReport(
            source_node_id=it.node.node_id, source_node_type=it.node.node_type, token_count=it.tokens
        )
        for it in flat
        if it.synthetic
    ]
    budget = TokenBudget(
        context_window=window,
        reserve_output_tokens=reserve,
        static_system_tokens=static_tokens,
        dynamic_system_budget=dyn_budget,
        dynamic_system_tokens=dyn_used,
        non_system_budget=non_system,
        non_system_tokens=non_system_tokens,
        total_tokens=static_tokens + dyn_used + non_system_tokens,
    )
    return Composition(
        system=static + dynamic,
        messages=messages,
        fits=fits,
        static_overflow=static_overflow,
        total_tokens=budget.total_tokens,
        budget=budget,
        included_node_ids=included,
        excluded_node_ids=list(excluded),
        excluded_reasons=excluded,
        compaction_node_id=compaction_id,
        system_reports=system_reports,
        synthetic_reports=synthetic,
        degradations=degradations,
        unpaired_tool_call_ids=unpaired,
        degradable=degradable,
        covered_node_ids=covered,
        task_board_text=board_text,
    )


_Conversation = tuple[list[list["_Item"]], list[int], dict[str, str], list[str], str | None, list[str]]
"""``(groups, path index of each group's first node, excluded, unpaired ids, compaction id, covered)``."""


class ComposeMemo:
    """The conversation groups of an agent's last build that needed no trimming.

    Valid while the agent's path list only grows: the next build re-derives only the last (possibly still
    open) group and the nodes appended since, instead of re-walking the whole history (performance issue:
    per-request cost must not grow with the session). Any other change falls back to a full build.
    """

    __slots__ = (
        "compaction_id",
        "consumed",
        "covered",
        "excluded",
        "groups",
        "path",
        "starts",
        "tail",
        "unpaired",
    )

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        self.path: Sequence[Node] | None = None
        self.consumed = 0
        self.tail: Node | None = None
        self.groups: list[list[_Item]] = []
        self.starts: list[int] = []
        self.excluded: dict[str, str] = {}
        self.unpaired: list[str] = []
        self.compaction_id: str | None = None
        self.covered: list[str] = []

    def remember(
        self,
        path: Sequence[Node],
        groups: list[list[_Item]],
        starts: list[int],
        excluded: dict[str, str],
        unpaired: list[str],
        compaction_id: str | None,
        covered: list[str],
        cache: RenderCache,
    ) -> None:
        self.path = path
        self.consumed = len(path)
        self.tail = path[-1] if path else None
        self.groups = list(groups)
        self.starts = list(starts)
        self.excluded = dict(excluded)
        # unpaired ids of the last group are derived again by the next build
        reopened: set[str] = set()
        for node in path[starts[-1] :] if starts and starts[-1] >= 0 else ():
            rendered = cache.entry(node)
            if rendered is not None:
                reopened.update(rendered.call_ids, rendered.result_ids)
        self.unpaired = [u for u in unpaired if u not in reopened]
        self.compaction_id = compaction_id
        self.covered = covered

    def usable_for(self, path: Sequence[Node]) -> bool:
        n = self.consumed
        return (
            self.path is path
            and n > 0
            and len(path) >= n
            and path[n - 1] is self.tail
            and bool(self.groups)
            and self.starts[-1] < len(path)
        )


def _full(inp: ComposeInput, cache: RenderCache, counter: TokenCounter) -> _Conversation:
    excluded: dict[str, str] = {}
    items, compaction_id, covered = _candidates(inp, cache, counter, excluded)
    unpaired = _repair_pairs(items, counter)
    groups = _group(items)
    index_of = {node.node_id: i for i, node in enumerate(inp.path)}
    starts = [index_of.get(g[0].node.node_id, -1) for g in groups]
    return groups, starts, excluded, unpaired, compaction_id, covered


def _incremental(inp: ComposeInput, cache: RenderCache, counter: TokenCounter) -> _Conversation | None:
    memo = inp.memo
    path = inp.path
    if memo is None or inp.substitutions or not memo.usable_for(path):
        return None
    start = memo.starts[-1]
    if start < 0 or any(n.node_type == _COMPACTION for n in path[start:]):
        return None
    excluded = dict(memo.excluded)
    tail: list[_Item] = []
    entry = cache.entry
    for node in path[start:]:
        if node.node_id in excluded:
            continue
        if node.role == "assistant":
            skipped = is_skipped_assistant(node)
            if skipped:
                excluded[node.node_id] = skipped
                continue
        rendered = entry(node)
        if rendered is None:
            continue
        tail.append(
            _Item(
                node,
                rendered.message,
                rendered.tokens,
                rendered.call_ids,
                rendered.result_ids,
                rendered.synthetic,
            )
        )
    unpaired = sorted({*memo.unpaired, *_repair_pairs(tail, counter)})
    tail_groups = _group(tail)
    index_of = {node.node_id: i for i, node in enumerate(path[start:], start)}
    groups = memo.groups[:-1] + tail_groups
    starts = memo.starts[:-1] + [index_of[g[0].node.node_id] for g in tail_groups]
    return groups, starts, excluded, unpaired, memo.compaction_id, memo.covered


def _candidates(
    inp: ComposeInput, cache: RenderCache, counter: TokenCounter, excluded: dict[str, str]
) -> tuple[list[_Item], str | None, list[str]]:
    path = inp.path
    comp_index, invalid = latest_valid_compaction(path)
    for node_id in invalid:
        excluded[node_id] = "compacted"
    ordered: list[Node] = list(path)
    compaction_id: str | None = None
    covered: list[str] = []
    if comp_index is not None:
        comp = path[comp_index]
        compaction_id = comp.node_id
        first_kept = str(comp.metadata.get("first_kept_node_id"))
        start = next(i for i, n in enumerate(path) if n.node_id == first_kept)
        for node in path[:start]:
            if node.node_type != NodeType.instruction_context:
                covered.append(node.node_id)
                excluded[node.node_id] = "compacted"
        for node in path[start:comp_index]:
            if node.node_type == NodeType.compaction:
                excluded[node.node_id] = "compacted"
        ordered = [comp, *path[start:comp_index], *path[comp_index + 1 :]]
    items: list[_Item] = []
    entry = cache.entry
    subs = inp.substitutions
    for node in ordered:
        node_id = node.node_id
        if node_id in excluded:
            continue
        if node.node_type == _COMPACTION and node_id != compaction_id:
            excluded[node_id] = "compacted"
            continue
        if node.role == "assistant":
            skipped = is_skipped_assistant(node)
            if skipped:
                excluded[node_id] = skipped
                continue
        rendered = entry(node)
        if rendered is None:
            continue
        item = _Item(
            node,
            rendered.message,
            rendered.tokens,
            rendered.call_ids,
            rendered.result_ids,
            rendered.synthetic,
        )
        if subs:
            item.message, item.tokens = _apply_substitutions(node, item.message, item.tokens, subs, counter)
        items.append(item)
    return items, compaction_id, covered


def _apply_substitutions(
    node: Node, message: ModelMessage, tokens: int, subs: dict[str, ContentBlock], counter: TokenCounter
) -> tuple[ModelMessage, int]:
    changed = False
    content: list[ContentBlock] = []
    for i, block in enumerate(message.content):
        key = block_key(node.node_id, i)
        if key in subs:
            content.append(subs[key])
            changed = True
            continue
        if isinstance(block, ToolResultBlock):
            inner: list[ContentBlock] = []
            inner_changed = False
            for j, sub_block in enumerate(block.content):
                sub_key = block_key(node.node_id, i, j)
                if sub_key in subs:
                    inner.append(subs[sub_key])
                    inner_changed = True
                else:
                    inner.append(sub_block)
            if inner_changed:
                block = block.model_copy(update={"content": inner})
                changed = True
        content.append(block)
    if not changed:
        return message, tokens
    new = message.model_copy(update={"content": content})
    return new, counter.message(content)


def _repair_pairs(items: list[_Item], counter: TokenCounter) -> list[str]:
    calls: set[str] = set()
    results: set[str] = set()
    for it in items:
        if it.call_ids:
            calls.update(it.call_ids)
        if it.result_ids:
            results.update(it.result_ids)
    if calls == results:
        return []
    unpaired = sorted((calls - results) | (results - calls))
    if not unpaired:
        return []
    bad = set(unpaired)
    keep: list[_Item] = []
    for it in items:
        content = [
            b
            for b in it.message.content
            if not (isinstance(b, ToolCallBlock | ToolResultBlock) and b.tool_call_id in bad)
        ]
        if len(content) != len(it.message.content):
            if not content:
                continue
            it.message = it.message.model_copy(update={"content": content})
            it.tokens = counter.message(content)
            it.call_ids = tuple(i for i in it.call_ids if i not in bad)
            it.result_ids = tuple(i for i in it.result_ids if i not in bad)
        keep.append(it)
    items[:] = keep
    return unpaired


def _group(items: list[_Item]) -> list[list[_Item]]:
    groups: list[list[_Item]] = []
    i = 0
    count = len(items)
    while i < count:
        item = items[i]
        call_ids = item.call_ids if item.message.role == "assistant" else ()
        if not call_ids:
            groups.append([item])
            i += 1
            continue
        tools: list[_Item] = []
        derived: list[_Item] = []
        j = i + 1
        while j < count:
            nxt = items[j]
            if nxt.message.role == "tool":
                tools.append(nxt)
            elif nxt.node.metadata.get("loaded_by_tool_call_id") in call_ids:
                derived.append(nxt)
            else:
                break
            j += 1
        if len(tools) > 1:
            order = {cid: k for k, cid in enumerate(call_ids)}
            tools.sort(key=lambda t: order.get(_result_id(t), len(order)))
        group = [item, *tools, *derived]
        if j < count and items[j].message.role == "assistant" and not items[j].call_ids:
            group.append(items[j])
            j += 1
        groups.append(group)
        i = j
    return groups


def _result_id(item: _Item) -> str:
    return item.result_ids[0] if item.result_ids else ""


def _protect(groups: list[list[_Item]], inp: ComposeInput) -> None:
    latest_compaction = None
    for g in groups:
        for it in g:
            if it.node.node_type == _COMPACTION:
                latest_compaction = it.node.node_id
    user_node_id = inp.current_user_node_id
    run_id = inp.current_run_id
    for g in groups:
        for it in g:
            node = it.node
            if (
                node.node_id == user_node_id
                or (run_id is not None and node.run_id == run_id)
                or node.node_id == latest_compaction
                or node.node_type in _ALWAYS_PROTECTED
            ):
                for member in g:
                    member.protected = True
                break
