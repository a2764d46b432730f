"""Loaded instruction content: dynamic ``instruction:<path>`` blocks from ``instruction_context`` nodes.

Covers the block/freshness half of cases F6–F8 and docs/testing.md and docs/context.md (the ``code.read_file``
half — result fields, ``already_loaded`` — belongs to the code tools).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from agent_core._context.instructions import (
    INSTRUCTION_PRIORITY,
    InstructionScope,
    instruction_blocks,
    latest_instruction_nodes,
)
from agent_core._ids import new_id
from agent_core.types.base import utc_now
from agent_core.types.content import TextBlock
from agent_core.types.enums import NodeType
from agent_core.types.runtime import Node
from tests.fixtures.env import SoongEnv


def _message(text: str, seq: int, node_type: NodeType = NodeType.message, **meta: object) -> Node:
    return Node(
        node_id=new_id("node_"),
        node_seq=seq,
        session_id="sess_t",
        agent_id="agent_t",
        role="user",
        node_type=node_type.value,
        content=[TextBlock(text=text)],
        metadata=dict(meta),
        created_at=utc_now(),
    )


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _load(path: Path, seq: int, scope: InstructionScope = "project", call_id: str = "call_1") -> Node:
    """An ``instruction_context`` node as ``code.read_file`` writes it (docs/context.md#loading)."""
    data = path.read_bytes()
    st = path.stat()
    return Node(
        node_id=new_id("node_"),
        node_seq=seq,
        session_id="sess_t",
        agent_id="agent_t",
        role="system",
        node_type=NodeType.instruction_context.value,
        content=[TextBlock(text=data.decode("utf-8"))],
        metadata={
            "path": str(path),
            "scope": scope,
            "hash": file_hash(data),
            "mtime_ns": st.st_mtime_ns,
            "size_bytes": st.st_size,
            "loaded_by_tool_call_id": call_id,
        },
        created_at=utc_now(),
    )


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_loaded_instruction_becomes_dynamic_block(soong_env: SoongEnv) -> None:
    """Case F6."""
    path = soong_env.write_project("pkg/AGENTS.md", "MARKER-PKG-RULES\n")
    nodes = [_message("hi", 1), _load(path, 2, call_id="call_read")]
    blocks, notes = instruction_blocks(nodes)
    assert notes == []
    assert len(blocks) == 1
    block = blocks[0]
    assert block.block_id == f"instruction:{path}"
    assert block.source == "instruction"
    assert block.priority == INSTRUCTION_PRIORITY == 110
    assert block.dynamic is True
    assert "MARKER-PKG-RULES" in block.content
    assert block.content.startswith(f'<instruction path="{path}" scope="project">')
    assert block.content.endswith("</instruction>")
    assert block.metadata["path"] == str(path)
    assert block.metadata["hash"] == file_hash(path.read_bytes())
    assert block.metadata["node_id"] == nodes[1].node_id
    assert block.metadata["loaded_by_tool_call_id"] == "call_read"
    assert block.metadata["reloaded"] is False
    marker = block.metadata["truncation_marker"]
    assert "code.read_file" in marker and str(path) in marker and marker.endswith("</instruction>")


def test_same_file_loaded_twice_gives_one_block(soong_env: SoongEnv) -> None:
    """Case F7."""
    path = soong_env.write_project("CLAUDE.md", "MARKER-ONCE\n")
    first = _load(path, 1)
    second = _load(path, 3)
    blocks, _ = instruction_blocks([first, _message("x", 2), second])
    assert len(blocks) == 1
    assert blocks[0].content.count("MARKER-ONCE") == 1
    assert blocks[0].metadata["node_id"] == second.node_id
    assert [n.node_id for n in latest_instruction_nodes([first, second])] == [second.node_id]


def test_changed_file_is_reloaded_at_build(soong_env: SoongEnv) -> None:
    """Case F8."""
    path = soong_env.write_project("CLAUDE.md", "OLD-BODY\n")
    node = _load(path, 1)
    path.write_text("NEW-BODY with more text\n")
    _bump_mtime(path)
    blocks, notes = instruction_blocks([node])
    assert len(blocks) == 1
    assert "NEW-BODY" in blocks[0].content and "OLD-BODY" not in blocks[0].content
    assert blocks[0].metadata["reloaded"] is True
    assert blocks[0].metadata["hash"] == file_hash(path.read_bytes())
    assert notes == [
        {
            "path": str(path),
            "node_id": node.node_id,
            "action": "reloaded",
            "reason": "content_changed",
            "old_hash": node.metadata["hash"],
            "new_hash": file_hash(path.read_bytes()),
        }
    ]


def test_new_load_after_change_supersedes_old_node(soong_env: SoongEnv) -> None:
    """Case F8."""
    path = soong_env.write_project("CLAUDE.md", "VERSION-1\n")
    old = _load(path, 1)
    path.write_text("VERSION-2\n")
    _bump_mtime(path)
    new = _load(path, 2, call_id="call_2")
    blocks, notes = instruction_blocks([old, new])
    assert notes == []
    assert len(blocks) == 1
    assert "VERSION-2" in blocks[0].content and "VERSION-1" not in blocks[0].content
    assert blocks[0].metadata["node_id"] == new.node_id


def test_touched_file_with_same_content_keeps_node_content(soong_env: SoongEnv) -> None:
    path = soong_env.write_project("CLAUDE.md", "SAME\n")
    node = _load(path, 1)
    _bump_mtime(path)
    blocks, notes = instruction_blocks([node])
    assert "SAME" in blocks[0].content and blocks[0].metadata["reloaded"] is False
    assert [(n["action"], n["reason"]) for n in notes] == [("kept", "hash_unchanged")]


def test_deleted_or_replaced_file_block_is_dropped(soong_env: SoongEnv) -> None:
    gone = soong_env.write_project("a/CLAUDE.md", "A\n")
    dirred = soong_env.write_project("b/CLAUDE.md", "B\n")
    kept = soong_env.write_project("c/CLAUDE.md", "C\n")
    nodes = [_load(gone, 1), _load(dirred, 2), _load(kept, 3)]
    gone.unlink()
    dirred.unlink()
    dirred.mkdir()
    blocks, notes = instruction_blocks(nodes)
    assert [b.metadata["path"] for b in blocks] == [str(kept)]
    assert sorted((n["path"], n["action"], n["reason"]) for n in notes) == [
        (str(gone), "dropped", "missing"),
        (str(dirred), "dropped", "not_a_file"),
    ]


def test_blocks_ordered_most_recently_loaded_first(soong_env: SoongEnv) -> None:
    a = soong_env.write_project("a/CLAUDE.md", "A\n")
    b = soong_env.write_home("rules/b.md", "B\n")
    c = soong_env.write_project("c/AGENTS.md", "C\n")
    nodes = [_load(a, 1), _load(b, 2, scope="user"), _load(c, 3), _load(a, 4)]
    blocks, _ = instruction_blocks(nodes)
    assert [b_.metadata["path"] for b_ in blocks] == [str(a), str(c), str(b)]
    assert blocks[2].metadata["scope"] == "user"


def test_instruction_nodes_covered_by_compaction_stay_effective(soong_env: SoongEnv) -> None:
    path = soong_env.write_project("CLAUDE.md", "STILL-HERE\n")
    loaded = _load(path, 2)
    first = _message("old question", 1)
    kept = _message("kept", 3)
    compaction = _message("summary", 4, node_type=NodeType.compaction, first_kept_node_id=kept.node_id)
    blocks, _ = instruction_blocks([first, loaded, kept, compaction])
    assert len(blocks) == 1 and "STILL-HERE" in blocks[0].content


def test_non_instruction_nodes_produce_no_blocks() -> None:
    nodes = [
        _message("hello", 1),
        _message("skill body", 2, node_type=NodeType.skill_context, skill_name="x"),
        _message("x", 3, node_type=NodeType.instruction_context),
    ]
    assert instruction_blocks(nodes) == ([], [])


def test_instruction_index_matches_full_scan_on_append_and_rewrite() -> None:
    from agent_core._context.instructions import InstructionIndex, latest_instruction_nodes
    from agent_core.types.base import utc_now
    from agent_core.types.content import TextBlock
    from agent_core.types.runtime import Node

    def mk(i: int, path: str | None) -> Node:
        return Node(
            node_id=f"node_{i}",
            node_seq=i,
            session_id="sess_x",
            agent_id="agent_x",
            role="system" if path else "user",
            node_type="instruction_context" if path else "message",
            content=[TextBlock(text="x")],
            metadata={"path": path} if path else {},
            created_at=utc_now(),
        )

    index = InstructionIndex()
    path = [mk(1, "/a"), mk(2, None), mk(3, "/b")]
    assert index.latest(path) == latest_instruction_nodes(path)
    path.extend([mk(4, "/a"), mk(5, None)])
    assert index.latest(path) == latest_instruction_nodes(path)
    assert [n.node_id for n in index.latest(path)] == ["node_4", "node_3"]
    del path[3:]
    path.append(mk(6, "/c"))
    assert index.latest(path) == latest_instruction_nodes(path)
    other = [mk(7, "/z")]
    assert index.latest(other) == latest_instruction_nodes(other)
