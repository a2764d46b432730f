"""The pure parts of the editor and MCP adapters (issue 38): the Task board as a plan, diff texts of a change
preview, tool-call titles, ACP prompts as user messages, transcripts."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from acp import RequestError
from acp.schema import (
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from agent_core.adapters._acp_updates import diff_texts
from agent_core.adapters._task_plan import PlanBoard
from agent_core.adapters._tool_display import describe_call, parse_arguments
from agent_core.adapters._transcript import transcript_markdown, transcript_messages
from agent_core.adapters.acp import prompt_message
from agent_core.types.content import TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.runtime import Node

STEPS = [
    {"step_id": "s1", "title": "Write the test", "status": "pending"},
    {"step_id": "s2", "title": "Fix it", "status": "pending"},
]


def created(task_id: str = "t1", title: str = "Bug") -> dict[str, object]:
    return {
        "task_id": task_id,
        "task": {"task_id": task_id, "title": title, "status": "pending", "steps": STEPS},
    }


def test_the_plan_follows_step_events_through_every_status() -> None:
    board = PlanBoard()
    assert not board and board.entries() == []
    assert board.apply("task_created", created())
    assert board.entries() == [("Write the test", "pending"), ("Fix it", "pending")]
    for event, shown in [
        ("task_step_ready", "pending"),
        ("task_step_claimed", "in_progress"),
        ("task_step_started", "in_progress"),
        ("task_step_blocked", "pending"),
        ("task_step_reopened", "pending"),
        ("task_step_lease_expired", "pending"),
        ("task_step_completed", "completed"),
    ]:
        board.apply(event, {"task_id": "t1", "step_id": "s1"})
        assert board.entries()[0] == ("Write the test", shown), event
    assert board.apply("task_step_updated", {"task_id": "t1", "step_id": "s2", "status": "running"})
    assert board.entries()[1] == ("Fix it", "in_progress")
    board.apply("task_step_failed", {"task_id": "t1", "step_id": "s2"})
    assert board.entries()[1] == ("Fix it (failed)", "completed")
    assert not board.apply("task_step_failed", {"task_id": "t1", "step_id": "s2"})  # no change, no update
    assert not board.apply("task_step_started", {"task_id": "t1", "step_id": "nope"})
    assert not board.apply("task_step_started", {"task_id": "unknown", "step_id": "s1"})


def test_task_updates_add_rename_and_delete_steps_and_many_tasks_are_named() -> None:
    board = PlanBoard()
    board.apply("task_created", created())
    ops = [
        {"op": "add_step", "step": {"step_id": "s3", "title": "Document it"}},
        {"op": "update_step", "step_id": "s1", "fields": {"title": "Write a failing test"}},
        {"op": "delete_step", "step_id": "s2"},
    ]
    assert board.apply(
        "task_updated", {"task_id": "t1", "operations": ops, "task_summary": {"status": "running"}}
    )
    assert board.entries() == [("Write a failing test", "pending"), ("Document it", "pending")]
    board.seed({"task_id": "t2", "title": "Docs", "status": "pending", "steps": []})
    assert board.entries()[-1] == ("Docs", "pending")  # a Task without steps is one entry
    assert board.entries()[0] == ("Bug: Write a failing test", "pending")  # several Tasks: prefixed
    board.apply("task_completed", {"task_id": "t2"})
    assert board.entries()[-1] == ("Docs", "completed")


def test_diff_texts_gives_both_sides_of_each_hunk() -> None:
    unified = "--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n@@ -9 +9 @@\n-x\n+y\n\\ No newline at end of file\n"
    assert diff_texts(unified) == ("keep\nold\n…\nx", "keep\nnew\n…\ny")
    assert diff_texts("--- /dev/null\n+++ b.txt\n@@ -0,0 +1 @@\n+hi\n") == (None, "hi")


def test_call_titles_kinds_and_locations(tmp_path: Path) -> None:
    read = describe_call("code.read_file", {"path": "src/a.py", "start_line": 3}, tmp_path)
    assert (read.title, read.kind) == ("Read src/a.py", "read")
    assert [(loc.path, loc.line) for loc in read.locations] == [(str(tmp_path / "src/a.py"), 3)]
    assert describe_call("code.edit_file", None, tmp_path).title == "Edit file"  # not streamed yet
    run = describe_call("code.run_command", {"argv": ["git", "log", "-n 1"]}, tmp_path)
    assert (run.title, run.kind) == ("Run git log '-n 1'", "execute")
    search = describe_call("code.search", {"query": "TODO", "path": "src"}, tmp_path)
    assert (search.title, search.kind) == ('Search "TODO" in src', "search")
    assert describe_call("agent.task_create", {"title": "x"}, tmp_path).kind == "think"
    other = describe_call("mcp.docs.lookup", None, tmp_path, "q='a'")
    assert (other.title, other.kind) == ("mcp.docs.lookup q='a'", "other")
    assert len(describe_call("code.write_file", {"path": "x" * 500}, tmp_path).title) <= 160
    assert parse_arguments('{"path": "a"') is None and parse_arguments("") is None


def test_prompt_blocks_become_one_user_message() -> None:
    message = prompt_message(
        [
            TextContentBlock(type="text", text="look at"),
            ResourceContentBlock(type="resource_link", name="a.py", uri="file:///p/a.py"),
            EmbeddedResourceContentBlock(
                type="resource", resource=TextResourceContents(uri="file:///p/b.py", text="print(1)")
            ),
        ]
    )
    (block,) = message.content
    assert isinstance(block, TextBlock)
    assert block.text == 'look at\n@file:///p/a.py\n<context uri="file:///p/b.py">\nprint(1)\n</context>'
    with pytest.raises(RequestError, match="image prompts are not supported"):
        prompt_message([ImageContentBlock(type="image", data="AA==", mime_type="image/png")])
    with pytest.raises(RequestError, match="no text"):
        prompt_message([TextContentBlock(type="text", text="  ")])


def _node(seq: int, role: str, content: list[object], **meta: object) -> Node:
    return Node(
        node_id=f"n{seq}",
        node_seq=seq,
        session_id="sess_x",
        agent_id="agent_x",
        role=role,
        node_type="message",
        content=content,  # type: ignore[arg-type]
        metadata=dict(meta),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


def test_transcripts_keep_what_the_user_saw() -> None:
    call = ToolCallBlock(tool_call_id="c1", name="code.read_file", arguments={"path": "a"})
    path = [
        _node(1, "user", [TextBlock(text="hi")]),
        _node(2, "assistant", [TextBlock(text="reading"), call]),
        _node(3, "tool", [ToolResultBlock(tool_call_id="c1", content=[], is_error=True)]),
        _node(4, "assistant", [TextBlock(text="broken")], failed=True),
        _node(5, "user", [TextBlock(text="<note>")], synthetic=True),
        _node(6, "assistant", [TextBlock(text="partial")], partial=True, aborted=True),
    ]
    messages = transcript_messages(path)
    assert [(m["role"], m["text"]) for m in messages] == [
        ("user", "hi"),
        ("assistant", "reading"),
        ("assistant", "partial"),
    ]
    assert messages[1]["tool_calls"][0]["status"] == "failed" and messages[2]["cancelled"] is True
    markdown = transcript_markdown("Title", "sess_x", messages)
    assert markdown.startswith("# Title\n") and '- tool `code.read_file` {"path": "a"} → failed' in markdown
    assert "## Assistant (cancelled)" in markdown
