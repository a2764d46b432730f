"""Trigger decisions and scan-range text (docs/context.md#extraction), without a runtime."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core._context.tokens import DEFAULT_COUNTER
from agent_core._memory.scan import (
    ScanCursor,
    ScanInput,
    active_path_summary,
    conversation_text,
    job_prompt,
    parse_cursor,
)
from agent_core._memory.triggers import EXPLICIT_INTENT, decide_reason
from agent_core.config.schema import MemorySection
from agent_core.types.base import utc_now
from agent_core.types.content import TextBlock, ToolResultBlock
from agent_core.types.runtime import Node

SETTINGS = MemorySection(extract_every_messages=3, extract_every_tokens=40)


def node(
    seq: int, role: str, body: str, run_id: str = "run_a", node_type: str = "message", **meta: Any
) -> Node:
    content: list[Any] = [TextBlock(text=body)]
    if role == "tool":
        content = [ToolResultBlock(tool_call_id="c", content=[TextBlock(text=body)])]
    return Node(
        node_id=f"node_{seq}",
        node_seq=seq,
        session_id="sess_t",
        agent_id="agent_root",
        run_id=run_id,
        role=role,
        node_type=node_type,
        content=content,
        metadata=meta,
        created_at=utc_now(),
    )


def scan(nodes: list[Node], cursor: int = 0) -> ScanInput:
    return ScanInput(
        session_id="sess_t",
        root_agent_id="agent_root",
        cursor=ScanCursor(node_seq=cursor, node_id=f"node_{cursor}") if cursor else None,
        root_nodes=nodes,
        new_nodes=[n for n in nodes if n.node_seq > cursor],
    )


@pytest.mark.parametrize(
    ("message", "explicit"),
    [
        ("Remember that I prefer tabs", True),
        ("请记住我的名字", True),
        ("以后都用中文回答", True),
        ("这是我的偏好", True),
        ("I prefer pytest", True),
        ("Don't forget the tests", True),
        ("don’t forget", True),
        ("do not forget", True),
        ("ALWAYS use black", True),
        ("never push to main", True),
        ("nevertheless, fix the bug", False),
        ("alwaysOn flag", False),
        ("fix the failing test", False),
    ],
)
def test_explicit_intent_phrases(message: str, explicit: bool) -> None:
    assert bool(EXPLICIT_INTENT.search(message)) is explicit


def test_trigger_precedence_explicit_then_messages_then_tokens() -> None:
    nodes = [node(1, "user", "remember tabs", run_id="run_1"), node(2, "assistant", "ok", run_id="run_1")]
    assert decide_reason(scan(nodes), {"run_1"}, SETTINGS, DEFAULT_COUNTER) == "explicit"
    # the explicit message belongs to another run: not explicit for this run's end
    assert decide_reason(scan(nodes), {"run_2"}, SETTINGS, DEFAULT_COUNTER) is None
    three = [node(i, "user", "remember", run_id=f"run_{i}") for i in (1, 2, 3)]
    assert decide_reason(scan(three), {"run_3"}, SETTINGS, DEFAULT_COUNTER) == "explicit"
    assert decide_reason(scan(three), {"run_x"}, SETTINGS, DEFAULT_COUNTER) == "message_backlog"
    long = [node(1, "user", "x" * 200)]
    assert decide_reason(scan(long), set(), SETTINGS, DEFAULT_COUNTER) == "token_backlog"
    assert decide_reason(scan(long, cursor=1), set(), SETTINGS, DEFAULT_COUNTER) is None  # scanned already


def test_conversation_shows_candidates_with_surrounding_context_and_tool_summaries() -> None:
    nodes = [
        node(1, "user", "OLD-USER"),
        node(2, "assistant", "OLD-ANSWER"),
        node(3, "user", "NEW-USER remember tabs", run_id="run_b"),
        node(4, "assistant", "", run_id="run_b"),
        node(5, "tool", "TOOL-OUTPUT-SECRET-LOOKING", run_id="run_b", tool_name="code.run_command"),
        node(6, "user", "PLAN-TEMPLATE", run_id="run_b", node_type="plan_instruction"),
        node(7, "assistant", "PARTIAL", run_id="run_b", partial=True),
        node(8, "assistant", "FINAL-ANSWER", run_id="run_b"),
        node(9, "assistant", "LATER-ANSWER", run_id="run_b"),
    ]
    s = scan(nodes, cursor=2)
    text = conversation_text(s)
    assert "[node_id=node_3 role=user candidate=new]\nNEW-USER remember tabs" in text
    assert "[node_id=node_2 role=assistant context=true]\nOLD-ANSWER" in text
    assert "FINAL-ANSWER" in text and "LATER-ANSWER" not in text and "PARTIAL" not in text
    assert "tool=code.run_command: ok" in text and "TOOL-OUTPUT" not in text
    assert "PLAN-TEMPLATE" not in text and "OLD-USER" not in text
    summary = active_path_summary(s)
    assert "OLD-USER" in summary and "NEW-USER" not in summary
    prompt = job_prompt(s, categories=["user"], catalog=None, records=[])
    assert "<allowed_categories>user</allowed_categories>" in prompt and "<compaction_summary>" not in prompt
    assert [n.node_id for n in s.candidates] == ["node_3"]
    assert s.source_range == {"from_node_seq": 3, "to_node_seq": 9}
    assert s.next_cursor == ScanCursor(node_seq=9, node_id="node_9")


def test_compaction_summary_section_and_cursor_parsing() -> None:
    nodes = [
        node(1, "user", "hi"),
        node(2, "user", "SUMMARY-TEXT", node_type="compaction"),
        node(3, "user", "x"),
    ]
    prompt = job_prompt(scan(nodes, cursor=2), categories=["user"], catalog="# Memory Catalog", records=[])
    assert "<compaction_summary>\nSUMMARY-TEXT\n</compaction_summary>" in prompt
    assert parse_cursor('{"memory_scan_cursor": {"node_seq": 4, "node_id": "node_4"}, "mode": "normal"}') == (
        ScanCursor(node_seq=4, node_id="node_4")
    )
    for bad in (None, "", "not json", '{"memory_scan_cursor": {"node_seq": "4"}}', "[]"):
        assert parse_cursor(bad) is None
