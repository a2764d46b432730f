"""The conversation part of a prompt (docs/compaction.md#the-compaction-node,
docs/compaction.md#the-conversation; docs/context.md#static-blocks).

The agent's active path (root → tip) becomes rendered :class:`ConversationItem` s: compacted and skipped
nodes excluded (with the reason), substitute blocks applied, tool call/result pairs repaired, and items
grouped so a tool round (the call, its results, derived nodes, the closing answer) is kept or dropped as a
whole. :class:`ComposeMemo` lets a build over a path that only grew reuse the previous groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_core._context.render import RenderCache
from agent_core._context.tokens import TokenCounter
from agent_core.types.content import ContentBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.enums import NodeType
from agent_core.types.model import ModelMessage
from agent_core.types.runtime import Node, SyntheticBlockReport

_COMPACTION = NodeType.compaction.value
_ALWAYS_PROTECTED = frozenset({NodeType.skill_context.value, NodeType.memory_context.value})


def block_key(node_id: str, *indexes: int) -> str:
    """Key of a (nested) content block of a node: ``node_id:i`` or ``node_id:i:j``."""
    return ":".join([node_id, *map(str, indexes)])


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
    """Index of the last valid compaction node on ``path`` and the ids of invalid ones
    (docs/compaction.md#the-compaction-node)."""
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
class ConversationItem:
    """One rendered node of the conversation (mutable: trimming shrinks its message)."""

    node: Node
    message: ModelMessage
    tokens: int
    call_ids: tuple[str, ...] = ()
    """ids of the message's tool_call blocks"""
    result_ids: tuple[str, ...] = ()
    """ids of the message's tool_result blocks"""
    synthetic: bool = False
    protected: bool = False


@dataclass(slots=True)
class Conversation:
    """The grouped conversation of a path (see :func:`build_conversation`)."""

    groups: list[list[ConversationItem]]
    starts: list[int]
    """Path index of each group's first node."""
    excluded: dict[str, str]
    unpaired: list[str]
    compaction_id: str | None
    covered: list[str]
    reused: int = 0
    """Leading groups taken unchanged from the memo (the memo's :class:`Flat` covers them)."""


@dataclass(slots=True)
class Flat:
    """The items of a conversation in order and what a request and its report take from them.

    Built once per group and extended as the path grows (:func:`flatten`), so a build over a long session
    copies lists instead of walking every item in Python.
    """

    items: list[ConversationItem]
    messages: list[ModelMessage]
    node_ids: list[str]
    synthetic: list[SyntheticBlockReport]
    tokens: int
    head: tuple[int, int, int]
    """``(items, synthetic reports, tokens)`` before the last group."""


def flatten(groups: list[list[ConversationItem]], base: Flat | None = None, reused: int = 0) -> Flat:
    """:class:`Flat` of ``groups``; ``base`` is the memo's flat whose groups before its last one are the
    first ``reused`` groups here (only the groups after them are walked)."""
    if base is not None and reused:
        n_items, n_synthetic, tokens = base.head
        items = base.items[:n_items]
        messages = base.messages[:n_items]
        node_ids = base.node_ids[:n_items]
        synthetic = base.synthetic[:n_synthetic]
    else:
        items, messages, node_ids, synthetic, tokens, reused = [], [], [], [], 0, 0
    last = len(groups) - 1
    head = (len(items), len(synthetic), tokens)
    for index in range(reused, len(groups)):
        if index == last:
            head = (len(items), len(synthetic), tokens)
        for it in groups[index]:
            node = it.node
            items.append(it)
            messages.append(it.message)
            node_ids.append(node.node_id)
            tokens += it.tokens
            if it.synthetic:
                synthetic.append(
                    SyntheticBlockReport(
                        source_node_id=node.node_id, source_node_type=node.node_type, token_count=it.tokens
                    )
                )
    return Flat(items, messages, node_ids, synthetic, tokens, head)


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
        "flat",
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
        self.groups: list[list[ConversationItem]] = []
        self.starts: list[int] = []
        self.excluded: dict[str, str] = {}
        self.unpaired: list[str] = []
        self.compaction_id: str | None = None
        self.covered: list[str] = []
        self.flat: Flat | None = None

    def remember(
        self, path: Sequence[Node], conversation: Conversation, flat: Flat, cache: RenderCache
    ) -> None:
        """Keeps a build that needed no trimming (``flat``: :func:`flatten` of its groups)."""
        starts = conversation.starts
        self.path = path
        self.consumed = len(path)
        self.tail = path[-1] if path else None
        self.groups = list(conversation.groups)
        self.starts = list(starts)
        self.excluded = dict(conversation.excluded)
        # unpaired ids of the last group are derived again by the next build
        reopened: set[str] = set()
        for node in path[starts[-1] :] if starts and starts[-1] >= 0 else ():
            rendered = cache.entry(node)
            if rendered is not None:
                reopened.update(rendered.call_ids, rendered.result_ids)
        self.unpaired = [u for u in conversation.unpaired if u not in reopened]
        self.compaction_id = conversation.compaction_id
        self.covered = conversation.covered
        self.flat = flat

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


def build_conversation(
    path: Sequence[Node],
    cache: RenderCache,
    counter: TokenCounter,
    *,
    substitutions: dict[str, ContentBlock],
    memo: ComposeMemo | None,
) -> Conversation:
    """The grouped conversation of ``path``: from ``memo`` when the path only grew, else a full walk."""
    if memo is not None and not substitutions:
        conversation = _incremental(path, memo, cache, counter)
        if conversation is not None:
            return conversation
    return _full(path, substitutions, cache, counter)


def _full(
    path: Sequence[Node], subs: dict[str, ContentBlock], cache: RenderCache, counter: TokenCounter
) -> Conversation:
    excluded: dict[str, str] = {}
    items, compaction_id, covered = _candidates(path, subs, cache, counter, excluded)
    unpaired = _repair_pairs(items, counter)
    groups = _group(items)
    index_of = {node.node_id: i for i, node in enumerate(path)}
    starts = [index_of.get(g[0].node.node_id, -1) for g in groups]
    return Conversation(groups, starts, excluded, unpaired, compaction_id, covered)


def _incremental(
    path: Sequence[Node], memo: ComposeMemo, cache: RenderCache, counter: TokenCounter
) -> Conversation | None:
    if not memo.usable_for(path):
        return None
    start = memo.starts[-1]
    if start < 0 or any(n.node_type == _COMPACTION for n in path[start:]):
        return None
    excluded = dict(memo.excluded)
    tail: list[ConversationItem] = []
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
            ConversationItem(
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
    reused = len(memo.groups) - 1
    return Conversation(groups, starts, excluded, unpaired, memo.compaction_id, memo.covered, reused)


def _candidates(
    path: Sequence[Node],
    subs: dict[str, ContentBlock],
    cache: RenderCache,
    counter: TokenCounter,
    excluded: dict[str, str],
) -> tuple[list[ConversationItem], str | None, list[str]]:
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
    items: list[ConversationItem] = []
    entry = cache.entry
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
        item = ConversationItem(
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


def _repair_pairs(items: list[ConversationItem], counter: TokenCounter) -> list[str]:
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
    keep: list[ConversationItem] = []
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


def _group(items: list[ConversationItem]) -> list[list[ConversationItem]]:
    groups: list[list[ConversationItem]] = []
    i = 0
    count = len(items)
    while i < count:
        item = items[i]
        call_ids = item.call_ids if item.message.role == "assistant" else ()
        if not call_ids:
            groups.append([item])
            i += 1
            continue
        tools: list[ConversationItem] = []
        derived: list[ConversationItem] = []
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


def _result_id(item: ConversationItem) -> str:
    return item.result_ids[0] if item.result_ids else ""


def protect(groups: list[list[ConversationItem]], *, user_node_id: str | None, run_id: str | None) -> None:
    """Marks the groups trimming must keep: the current user message and run, the latest compaction, and
    skill/memory context."""
    latest_compaction = None
    for g in groups:
        for it in g:
            if it.node.node_type == _COMPACTION:
                latest_compaction = it.node.node_id
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
