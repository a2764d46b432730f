"""Pure compaction decisions (docs/compaction.md#triggers, docs/compaction.md#the-cut-point,
docs/compaction.md#stale-compactions): trigger threshold, kept tail, cut point, staleness.

Nothing here does I/O. :func:`plan_cut` works on an agent's active path (root → tip) and returns a
:class:`CutPlan` or ``None`` when there is nothing to compact. Token sizes are core estimates: a node's
``token_count`` (estimated on the fly when NULL) plus the per-message overhead.

Cut rules (docs/compaction.md#the-cut-point): the summarisable range starts at ``s`` (the last valid
compaction's ``first_kept_node_id``, else the first node) and ends at the tip. Walking back from the tip until
the kept tail reaches ``effective_keep_recent`` gives the tentative cut ``c``; the cut is then aligned to the
user ``message`` node starting ``c``'s turn when that node lies after ``s`` and the tail from it fits, else
the turn is split at the nearest assistant node at or after ``c`` with no open tool call (its earlier calls
all answered before it). When no such node exists at or after ``c`` (``c`` is the tip's tool result), the
nearest such node before ``c`` inside the turn is used, keeping a slightly larger tail. A cut never lands
on a tool node nor between a ``tool_call`` and its results.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_core._context.conversation import is_skipped_assistant, latest_valid_compaction
from agent_core._context.render import NEVER_RENDER
from agent_core._context.tokens import DEFAULT_COUNTER, MESSAGE_OVERHEAD, TokenCounter
from agent_core.types.content import ToolCallBlock, ToolResultBlock
from agent_core.types.enums import NodeType
from agent_core.types.runtime import Node


def compaction_threshold(context_window: int, reserve_output_tokens: int, reserve_tokens: int) -> int:
    """Background trigger threshold: ``max(W - compact.reserve_tokens, (W - R) // 2)``
    (docs/compaction.md#background-compaction)."""
    usable = context_window - reserve_output_tokens
    return max(context_window - reserve_tokens, usable // 2)


def should_trigger(estimated_tokens: int, threshold: int) -> bool:
    """Background compaction triggers iff the composed request's estimate ``P`` exceeds the threshold."""
    return estimated_tokens > threshold


def effective_keep_recent(keep_recent_tokens: int, non_system_budget: int) -> int:
    """``min(compact.keep_recent_tokens, N // 2)`` (docs/compaction.md#the-cut-point)."""
    return max(0, min(keep_recent_tokens, non_system_budget // 2))


def is_counted(node: Node) -> bool:
    """False for nodes skipped when counting and summarising: compaction nodes, partial/failed/aborted
    assistant nodes, ``instruction_context`` nodes and never-rendered nodes."""
    if node.node_type in (NodeType.compaction, NodeType.instruction_context):
        return False
    if node.metadata.get(NEVER_RENDER):
        return False
    return is_skipped_assistant(node) is None


def node_tokens(node: Node, counter: TokenCounter = DEFAULT_COUNTER) -> int:
    base = node.token_count if node.token_count is not None else counter.blocks(node.content)
    return base + MESSAGE_OVERHEAD


def is_user_message(node: Node) -> bool:
    return node.role == "user" and node.node_type == NodeType.message


def _is_assistant_message(node: Node) -> bool:
    return (
        node.role == "assistant" and node.node_type == NodeType.message and is_skipped_assistant(node) is None
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class CutPlan:
    """Where to cut and what to summarise; computed from the path as it was at trigger time."""

    range_start_node_id: str
    first_kept_node_id: str
    covered_tip_node_id: str
    previous_compaction: Node | None
    conversation: tuple[Node, ...]
    """Counted nodes of ``s .. first_kept`` (exclusive) that are not part of the split-turn prefix."""
    split_prefix: tuple[Node, ...]
    """Counted nodes of the split turn before ``first_kept`` (empty unless ``split_turn``)."""
    split_turn: bool
    turn_start_node_id: str | None
    kept_tokens: int
    summarised_tokens: int

    @property
    def previous_compaction_node_id(self) -> str | None:
        return self.previous_compaction.node_id if self.previous_compaction is not None else None

    @property
    def summarised(self) -> tuple[Node, ...]:
        """Every counted node the summary replaces, oldest first."""
        return self.conversation + self.split_prefix


def _open_calls(path: Sequence[Node]) -> list[int]:
    """``open[j]`` = number of tool calls issued before node ``j`` whose result comes at or after ``j``.

    Calls without any result on the path are ignored (the composer drops them as unpaired).
    """
    result_at: dict[str, int] = {}
    for index, node in enumerate(path):
        for block in node.content:
            if isinstance(block, ToolResultBlock):
                result_at.setdefault(block.tool_call_id, index)
    delta = [0] * (len(path) + 1)
    for index, node in enumerate(path):
        if node.role != "assistant":
            continue
        for block in node.content:
            if isinstance(block, ToolCallBlock):
                end = result_at.get(block.tool_call_id)
                if end is not None and end > index:
                    delta[index + 1] += 1
                    delta[end + 1] -= 1
    counts: list[int] = []
    running = 0
    for index in range(len(path)):
        running += delta[index]
        counts.append(running)
    return counts


def plan_cut(
    path: Sequence[Node],
    *,
    keep_recent_tokens: int,
    non_system_budget: int,
    summary_reserve: int = 0,
    counter: TokenCounter = DEFAULT_COUNTER,
) -> CutPlan | None:
    """The cut for compacting ``path`` (root → tip), or ``None`` when there is nothing to compact.

    ``summary_reserve`` is kept free next to an aligned tail (the tail must fit ``N - summary_reserve``).
    """
    if not path:
        return None
    comp_index, _invalid = latest_valid_compaction(path)
    previous: Node | None = None
    # Without a compaction the range starts at the first node the model can see (a worker's root note
    # is never rendered, so it does not make the first turn look like a later one).
    start = next((i for i, n in enumerate(path) if is_counted(n)), 0)
    if comp_index is not None:
        previous = path[comp_index]
        first_kept = str(previous.metadata.get("first_kept_node_id"))
        start = next(i for i, n in enumerate(path) if n.node_id == first_kept)
    tip = len(path) - 1
    keep = effective_keep_recent(keep_recent_tokens, non_system_budget)
    sizes = [node_tokens(n, counter) if is_counted(n) else 0 for n in path]
    tentative: int | None = None
    total = 0
    for index in range(tip, start - 1, -1):
        if not is_counted(path[index]):
            continue
        total += sizes[index]
        if total >= keep:
            tentative = index
            break
    if tentative is None:
        return None
    open_calls = _open_calls(path)
    turn_start = next((j for j in range(tentative, -1, -1) if is_user_message(path[j])), None)
    room = non_system_budget - summary_reserve
    cut: int | None = None
    split = False
    if (
        turn_start is not None
        and turn_start > start
        and open_calls[turn_start] == 0
        and sum(sizes[turn_start:]) <= room
    ):
        cut = turn_start
    else:
        for j in range(max(tentative, start + 1), tip + 1):
            if open_calls[j]:
                continue
            if is_user_message(path[j]) and j != turn_start:
                cut = j  # the next turn starts before any intra-turn cut: its tail is smaller still
                break
            if _is_assistant_message(path[j]):
                cut, split = j, True
                break
        if cut is None:
            # No valid cut at or after c (c is the tip's tool result, say): keep a little more instead.
            floor = max(start, turn_start if turn_start is not None else start)
            for j in range(tentative - 1, floor, -1):
                if open_calls[j] == 0 and _is_assistant_message(path[j]):
                    cut, split = j, True
                    break
    if cut is None:
        return None
    prefix_start = cut
    if split:
        prefix_start = max(turn_start if turn_start is not None else start, start)
    conversation = tuple(n for n in path[start:prefix_start] if is_counted(n))
    prefix = tuple(n for n in path[prefix_start:cut] if is_counted(n))
    if not conversation and not prefix:
        return None
    turn_start_id = None
    if split:
        turn_start_id = path[turn_start].node_id if turn_start is not None else path[start].node_id
    return CutPlan(
        range_start_node_id=path[start].node_id,
        first_kept_node_id=path[cut].node_id,
        covered_tip_node_id=path[tip].node_id,
        previous_compaction=previous,
        conversation=conversation,
        split_prefix=prefix,
        split_turn=split,
        turn_start_node_id=turn_start_id,
        kept_tokens=sum(sizes[cut:]),
        summarised_tokens=sum(sizes[start:cut]),
    )


def stale_reason(path: Sequence[Node], covered_tip_node_id: str) -> str | None:
    """Why a finished compaction can no longer be applied to ``path`` (docs/compaction.md#stale-compactions),
    or ``None`` when it can.

    The covered tip must still be on the path, and no compaction node may follow it there.
    """
    for index, node in enumerate(path):
        if node.node_id != covered_tip_node_id:
            continue
        if any(n.node_type == NodeType.compaction for n in path[index + 1 :]):
            return "a newer compaction already covers the path"
        return None
    return "the covered path is no longer a prefix of the active path"
