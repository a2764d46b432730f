"""Invariant checks shared by the reliability tests and the crash-harness child (no pytest dependency)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agent_core.types.content import ToolCallBlock, ToolResultBlock
from agent_core.types.model import ModelRequest
from agent_core.types.runtime import Node, RuntimeEvent


def pairing_problems(request: ModelRequest) -> list[str]:
    """Tool calls without exactly one later result (or results without a call) in one provider request."""
    problems: list[str] = []
    calls: dict[str, int] = {}
    results: dict[str, int] = {}
    for index, message in enumerate(request.messages):
        for block in message.content:
            if isinstance(block, ToolCallBlock):
                if block.tool_call_id in calls:
                    problems.append(f"duplicate tool_call {block.tool_call_id}")
                calls[block.tool_call_id] = index
            elif isinstance(block, ToolResultBlock):
                if block.tool_call_id in results:
                    problems.append(f"duplicate tool_result {block.tool_call_id}")
                results[block.tool_call_id] = index
    for call_id, at in calls.items():
        if call_id not in results:
            problems.append(f"tool_call {call_id} has no result")
        elif results[call_id] <= at:
            problems.append(f"tool_result {call_id} precedes its call")
    problems.extend(f"tool_result {cid} has no call" for cid in results if cid not in calls)
    return problems


def path_pairing_problems(path: Sequence[Node]) -> list[str]:
    """The same check over a persisted active path (root → tip)."""
    calls: list[str] = []
    results: list[str] = []
    for node in path:
        for block in node.content:
            if isinstance(block, ToolCallBlock):
                calls.append(block.tool_call_id)
            elif isinstance(block, ToolResultBlock):
                results.append(block.tool_call_id)
    problems = [f"tool_call {c} has no result on the path" for c in calls if c not in results]
    problems += [
        f"tool_call {c} answered {results.count(c)} times" for c in set(results) if results.count(c) > 1
    ]
    problems += [f"tool_result {r} has no call on the path" for r in results if r not in calls]
    return problems


def seq_problems(events: Iterable[RuntimeEvent]) -> list[str]:
    """Session seqs strictly increasing and contiguous from 1; each run's ``run_seq`` is 1..n."""
    problems: list[str] = []
    listed = list(events)
    seqs = [e.seq for e in listed]
    if any(s is None for s in seqs):
        problems.append("a persisted event has no seq")
        return problems
    expected = list(range(1, len(seqs) + 1))
    if seqs != expected:
        gaps = sorted(set(expected) - set(seqs))[:5]
        problems.append(f"session seqs are not 1..{len(seqs)} (first gaps: {gaps})")
    by_run: dict[str, list[int]] = {}
    for event in listed:
        if event.run_id is not None and event.run_seq is not None:
            by_run.setdefault(event.run_id, []).append(event.run_seq)
    for run_id, run_seqs in by_run.items():
        if run_seqs != list(range(1, len(run_seqs) + 1)):
            problems.append(f"run {run_id} run_seqs are not contiguous: {run_seqs[:10]}...")
    return problems
