"""Compaction policy: threshold, kept tail, cut point and staleness (docs/compaction.md#triggers,
docs/compaction.md#the-cut-point, docs/compaction.md#stale-compactions)."""

from __future__ import annotations

from itertools import count
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_core._compact.policy import (
    compaction_threshold,
    effective_keep_recent,
    is_counted,
    node_tokens,
    plan_cut,
    should_trigger,
    stale_reason,
)
from agent_core.types.base import utc_now
from agent_core.types.content import ContentBlock, TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import Node

_seq = count(1)


def node(
    role: str,
    tokens: int,
    *,
    node_type: str = "message",
    content: list[ContentBlock] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Node:
    n = next(_seq)
    return Node(
        node_id=f"node_{n:05d}",
        node_seq=n,
        session_id="sess_x",
        agent_id="agent_x",
        run_id="run_x",
        role=role,
        node_type=node_type,
        content=content if content is not None else [TextBlock(text="x")],
        metadata=metadata or {},
        token_count=tokens,
        created_at=utc_now(),
    )


def user(tokens: int = 100) -> Node:
    return node("user", tokens)


def assistant(tokens: int = 50, calls: tuple[str, ...] = ()) -> Node:
    blocks: list[ContentBlock] = [TextBlock(text="a")]
    blocks += [ToolCallBlock(tool_call_id=c, name="code.read_file", arguments={"path": "f"}) for c in calls]
    return node("assistant", tokens, content=blocks)


def tool(call_id: str, tokens: int = 100) -> Node:
    return node(
        "tool", tokens, content=[ToolResultBlock(tool_call_id=call_id, content=[TextBlock(text="r")])]
    )


def turn(index: int, *, calls: int = 1, result_tokens: int = 100) -> list[Node]:
    """user → (assistant tool_call → tool result)* → assistant answer."""
    out = [user()]
    for k in range(calls):
        cid = f"call_{index}_{k}"
        out += [assistant(20, (cid,)), tool(cid, result_tokens)]
    out.append(assistant())
    return out


def tokens_of(nodes: list[Node]) -> int:
    return sum(node_tokens(n) for n in nodes if is_counted(n))


def assert_pairs_not_split(path: list[Node], first_kept: str) -> None:
    cut = next(i for i, n in enumerate(path) if n.node_id == first_kept)
    before_calls, before_results, after_calls, after_results = set(), set(), set(), set()
    for i, n in enumerate(path):
        calls = {b.tool_call_id for b in n.content if isinstance(b, ToolCallBlock)}
        results = {b.tool_call_id for b in n.content if isinstance(b, ToolResultBlock)}
        (before_calls if i < cut else after_calls).update(calls)
        (before_results if i < cut else after_results).update(results)
    assert not (before_calls & after_results), "a tool_call was separated from its result"
    assert not (after_calls & before_results)


def test_threshold_arithmetic() -> None:
    assert compaction_threshold(200_000, 4096, 8000) == 192_000
    assert should_trigger(192_001, 192_000) and not should_trigger(192_000, 192_000)
    assert compaction_threshold(8192, 4096, 8000) == 2048
    assert should_trigger(2049, 2048) and not should_trigger(2048, 2048)


def test_effective_keep_recent_is_capped_by_half_the_budget() -> None:
    assert effective_keep_recent(16_000, 10_000) == 5000
    assert effective_keep_recent(2000, 10_000) == 2000
    assert effective_keep_recent(2000, 0) == 0


def test_cut_aligns_to_a_user_turn() -> None:
    path = [n for i in range(6) for n in turn(i)]
    plan = plan_cut(path, keep_recent_tokens=600, non_system_budget=10_000)
    assert plan is not None and not plan.split_turn
    kept_index = next(i for i, n in enumerate(path) if n.node_id == plan.first_kept_node_id)
    first_kept = path[kept_index]
    assert first_kept.role == "user" and first_kept.node_type == "message"
    assert tokens_of(path[kept_index:]) >= 600
    assert plan.kept_tokens == tokens_of(path[kept_index:])
    assert plan.range_start_node_id == path[0].node_id
    assert plan.covered_tip_node_id == path[-1].node_id
    assert [n.node_id for n in plan.conversation] == [n.node_id for n in path[:kept_index]]
    assert plan.split_prefix == () and plan.turn_start_node_id is None
    assert_pairs_not_split(path, plan.first_kept_node_id)
    # the cut starts the turn in which the kept tail reached the threshold: the next turn's tail is smaller
    next_user = next(i for i in range(kept_index + 1, len(path)) if path[i].role == "user")
    assert tokens_of(path[next_user:]) < 600


def test_nothing_to_compact_when_everything_fits_the_kept_tail() -> None:
    path = turn(0) + turn(1)
    assert plan_cut(path, keep_recent_tokens=10_000, non_system_budget=100_000) is None


def test_nothing_to_compact_for_one_huge_user_message() -> None:
    path = [user(5000)]
    assert plan_cut(path, keep_recent_tokens=100, non_system_budget=1000) is None
    assert plan_cut([], keep_recent_tokens=100, non_system_budget=1000) is None


def test_single_oversized_turn_is_split() -> None:
    path = turn(0, calls=6, result_tokens=300)
    plan = plan_cut(path, keep_recent_tokens=700, non_system_budget=2000)
    assert plan is not None and plan.split_turn
    kept_index = next(i for i, n in enumerate(path) if n.node_id == plan.first_kept_node_id)
    assert path[kept_index].role == "assistant"
    assert plan.turn_start_node_id == path[0].node_id
    assert plan.conversation == ()
    assert [n.node_id for n in plan.split_prefix] == [n.node_id for n in path[:kept_index]]
    assert tokens_of(path[kept_index:]) >= 700
    assert_pairs_not_split(path, plan.first_kept_node_id)


def test_aligned_tail_that_does_not_fit_is_split_inside_the_turn() -> None:
    old = turn(0) + turn(1)
    current = turn(2, calls=5, result_tokens=400)
    path = old + current
    plan = plan_cut(path, keep_recent_tokens=900, non_system_budget=1800, summary_reserve=200)
    assert plan is not None and plan.split_turn
    assert plan.turn_start_node_id == current[0].node_id
    assert [n.node_id for n in plan.conversation] == [n.node_id for n in old]
    assert plan.split_prefix[0].node_id == current[0].node_id
    kept = next(n for n in path if n.node_id == plan.first_kept_node_id)
    assert kept.role == "assistant" and kept in current
    assert_pairs_not_split(path, plan.first_kept_node_id)


def test_summary_reserve_forces_a_split_when_the_tail_leaves_no_room() -> None:
    path = turn(0) + turn(1, calls=3, result_tokens=200)
    aligned = plan_cut(path, keep_recent_tokens=500, non_system_budget=1200)
    assert aligned is not None and not aligned.split_turn
    split = plan_cut(path, keep_recent_tokens=500, non_system_budget=1200, summary_reserve=600)
    assert split is not None and split.split_turn


def test_cut_starts_after_the_previous_compaction() -> None:
    first = turn(0) + turn(1)
    second = turn(2) + turn(3)
    comp = node(
        "user",
        80,
        node_type="compaction",
        metadata={"first_kept_node_id": second[0].node_id, "details": {"files_read": ["a.txt"]}},
    )
    later = turn(4) + turn(5) + turn(6)
    path = first + second + [comp] + later
    plan = plan_cut(path, keep_recent_tokens=500, non_system_budget=10_000)
    assert plan is not None
    assert plan.previous_compaction is comp and plan.previous_compaction_node_id == comp.node_id
    assert plan.range_start_node_id == second[0].node_id
    summarised = {n.node_id for n in plan.summarised}
    assert not summarised & {n.node_id for n in first}
    assert comp.node_id not in summarised
    index = {n.node_id: i for i, n in enumerate(path)}
    assert index[plan.first_kept_node_id] > index[second[0].node_id]


def test_skipped_nodes_are_neither_counted_nor_summarised() -> None:
    partial = node("assistant", 5000, metadata={"partial": True, "failed": True})
    instruction = node("system", 5000, node_type="instruction_context", metadata={"path": "/p/CLAUDE.md"})
    hidden = node("user", 5000, node_type="system_note", metadata={"never_render": True})
    path = [hidden, *turn(0), partial, instruction, *turn(1), *turn(2)]
    plan = plan_cut(path, keep_recent_tokens=300, non_system_budget=10_000)
    assert plan is not None
    ids = {n.node_id for n in plan.summarised}
    assert not ids & {partial.node_id, instruction.node_id, hidden.node_id}
    assert plan.summarised_tokens == tokens_of(
        path[: [n.node_id for n in path].index(plan.first_kept_node_id)]
    )


def test_split_falls_back_before_a_trailing_tool_result() -> None:
    path = [
        *turn(0),
        user(),
        assistant(20, ("c1",)),
        tool("c1", 600),
        assistant(20, ("c2",)),
        tool("c2", 600),
    ]
    plan = plan_cut(path, keep_recent_tokens=200, non_system_budget=1000)
    assert plan is not None and plan.split_turn
    assert plan.first_kept_node_id == path[-2].node_id  # the assistant call whose result is the tip
    assert_pairs_not_split(path, plan.first_kept_node_id)


def test_a_never_rendered_root_does_not_count_as_an_earlier_turn() -> None:
    root = node("user", 30, node_type="system_note", metadata={"never_render": True})
    path = [root, user(50), assistant(3000, ("c1",)), tool("c1", 40)]
    plan = plan_cut(path, keep_recent_tokens=500, non_system_budget=20_000)
    assert plan is not None and plan.split_turn
    assert plan.range_start_node_id == path[1].node_id and plan.first_kept_node_id == path[2].node_id
    assert [n.node_id for n in plan.split_prefix] == [path[1].node_id]


def test_dangling_tool_call_does_not_block_cuts() -> None:
    dangling = assistant(20, ("call_lost",))
    path = [user(), dangling, *turn(1), *turn(2), *turn(3)]
    plan = plan_cut(path, keep_recent_tokens=300, non_system_budget=10_000)
    assert plan is not None and not plan.split_turn


def test_stale_reason() -> None:
    path = turn(0) + turn(1)
    tip = path[-1].node_id
    assert stale_reason(path, tip) is None
    assert stale_reason(path, path[3].node_id) is None
    assert stale_reason(path, "node_elsewhere") is not None
    comp = node("user", 10, node_type="compaction", metadata={"first_kept_node_id": path[4].node_id})
    assert stale_reason([*path, comp], tip) is not None
    assert stale_reason([*path, comp], comp.node_id) is None


@st.composite
def paths(draw: st.DrawFn) -> list[Node]:
    out: list[Node] = []
    for t in range(draw(st.integers(1, 8))):
        out.append(user(draw(st.integers(1, 400))))
        for k in range(draw(st.integers(0, 4))):
            ids = tuple(f"call_{t}_{k}_{j}" for j in range(draw(st.integers(1, 3))))
            out.append(assistant(draw(st.integers(1, 100)), ids))
            out.extend(tool(cid, draw(st.integers(1, 600))) for cid in ids)
        if draw(st.booleans()):
            out.append(assistant(draw(st.integers(1, 200))))
    return out


@settings(max_examples=100, deadline=None)
@given(paths(), st.integers(50, 3000), st.integers(200, 6000))
def test_cut_invariants_property(path: list[Node], keep: int, budget: int) -> None:
    plan = plan_cut(path, keep_recent_tokens=keep, non_system_budget=budget)
    if plan is None:
        return
    index = {n.node_id: i for i, n in enumerate(path)}
    cut = index[plan.first_kept_node_id]
    first_kept = path[cut]
    assert first_kept.role != "tool"
    assert cut > 0 and plan.summarised
    assert_pairs_not_split(path, plan.first_kept_node_id)
    if plan.split_turn:
        assert first_kept.role == "assistant"
    else:
        assert first_kept.role == "user"
    assert [n.node_id for n in plan.summarised] == [n.node_id for n in path[:cut]]
    target = effective_keep_recent(keep, budget)
    acc, tentative = 0, 0
    for i in range(len(path) - 1, -1, -1):
        acc += node_tokens(path[i])
        if acc >= target:
            tentative = i
            break
    if not plan.split_turn and cut <= tentative:
        # aligned to the user message starting the tentative cut's turn: the kept tail reaches the target
        assert tokens_of(path[cut:]) >= target
        assert all(path[i].role != "user" for i in range(cut + 1, tentative + 1))
    elif cut >= tentative:
        # the turn was split (or the next turn started first): the nearest valid cut at/after the tentative one
        for i in range(max(tentative, 1), cut):
            assert path[i].role == "tool" or (path[i].role == "user" and i == tentative)
    else:
        # nothing valid at or after the tentative cut: the nearest valid intra-turn cut before it
        assert plan.split_turn and first_kept.role == "assistant"
        assert all(path[i].role == "tool" for i in range(max(tentative, 1), len(path)))
        assert all(path[i].role == "tool" for i in range(cut + 1, tentative))
