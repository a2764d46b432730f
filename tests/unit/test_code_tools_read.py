"""``code.read_file`` (docs/tools.md#coderead_file, docs/context.md#loading) and instruction-file reads
(docs/context.md#loading)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from agent_core.types.content import TextBlock
from agent_core.types.enums import MessageRole, NodeType
from tests.fixtures.code_tools import CodeToolsHarness, make_harness

READ = "code.read_file"


@pytest.fixture
def h(tmp_path: Path) -> CodeToolsHarness:
    return make_harness(tmp_path)


def lines(n: int) -> str:
    return "".join(f"line {i}\n" for i in range(1, n + 1))


async def test_paging_1200_lines(h: CodeToolsHarness) -> None:
    """Case G1."""
    (h.project / "big.txt").write_text(lines(1200))
    first = await h.ok(READ, path="big.txt", start_line=1, max_lines=1000)
    assert first["content"].split("\n") == [f"line {i}" for i in range(1, 1001)]
    assert first["truncated"] is True and first["next_start_line"] == 1001
    second = await h.ok(READ, path="big.txt", start_line=1001, max_lines=1000)
    assert second["content"].split("\n") == [f"line {i}" for i in range(1001, 1201)]
    assert second["truncated"] is False and second["next_start_line"] is None
    assert set(first) == {
        "path",
        "content",
        "truncated",
        "next_start_line",
        "truncated_lines",
        "binary",
        "already_loaded",
    }
    assert first["path"] == str(h.project / "big.txt") and first["binary"] is False


async def test_line_cap_on_utf8_boundary(h: CodeToolsHarness) -> None:
    """Case G2."""
    long_line = "é" * 2500  # 5000 bytes of 2-byte characters
    (h.project / "long.txt").write_text("short\n" + long_line + "\nend\n" + "x" * 5000 + "\n")
    data = await h.ok(READ, path="long.txt")
    got = data["content"].split("\n")
    assert got[0] == "short" and got[2] == "end"
    assert got[1] == "é" * 2048 and len(got[1].encode()) == 4096
    assert len(got[3].encode()) == 4096
    assert data["truncated_lines"] == [2, 4] and data["truncated"] is True and data["next_start_line"] is None
    (h.project / "odd.txt").write_text(
        "a" + "€" * 2000 + "\n"
    )  # 1 + 6000 bytes; boundary at 4096 is mid-char
    odd = (await h.ok(READ, path="odd.txt"))["content"]
    assert odd == "a" + "€" * 1365 and len(odd.encode()) == 4096


@pytest.mark.parametrize(
    "payload",
    [b"abc\x00def\n" * 10, b"valid start\n" + b"\xff\xfe broken utf8\n", b"x" * 9000 + b"\xc3"],
    ids=["nul", "invalid-utf8", "truncated-multibyte-at-eof"],
)
async def test_binary_file(h: CodeToolsHarness, payload: bytes) -> None:
    """Case G3."""
    (h.project / "blob.bin").write_bytes(payload)
    result = await h.run(READ, path="blob.bin")
    assert not result.is_error
    data = await h.ok(READ, path="blob.bin")
    assert data["binary"] is True and data["content"] == "" and data["truncated"] is False
    assert result.metadata["size_bytes"] == len(payload)
    assert h.sink.artifacts == {}


async def test_nul_after_first_8192_bytes_of_valid_utf8_is_text(h: CodeToolsHarness) -> None:
    (h.project / "late.txt").write_bytes(b"a" * 9000 + b"\n\x00tail\n")
    data = await h.ok(READ, path="late.txt")
    assert data["binary"] is False and data["content"].endswith("\x00tail")


async def test_defaults_and_limits(h: CodeToolsHarness) -> None:
    """Case G18."""
    (h.project / "f.txt").write_text(lines(250))
    data = await h.ok(READ, path="f.txt")
    assert len(data["content"].split("\n")) == 200 and data["next_start_line"] == 201 and data["truncated"]
    for bad in (
        {"max_lines": 1001},
        {"max_lines": 0},
        {"start_line": 0},
        {"start_line": "1"},
        {"max_lines": True},
    ):
        assert await h.error(READ, path="f.txt", **bad) == "validation_error", bad
        err = await h.preflight_error(READ, path="f.txt", **bad)
        assert err.code == "validation_error"


async def test_missing_file_and_directory(h: CodeToolsHarness) -> None:
    """Case G19."""
    assert await h.error(READ, path="missing.txt") == "file_not_found"
    assert await h.error(READ, path="missing_dir/x.txt") == "file_not_found"
    (h.project / "d").mkdir()
    assert await h.error(READ, path="d") == "validation_error"
    (h.project / "f.txt").write_text("x")
    assert await h.error(READ, path="f.txt/child") == "file_not_found"


async def test_read_edge_cases_start_beyond_eof_and_line_splitting(h: CodeToolsHarness) -> None:
    (h.project / "three.txt").write_text("a\nb\nc")  # no trailing newline: still 3 lines
    data = await h.ok(READ, path="three.txt", start_line=4)
    assert data == data | {"content": "", "truncated": False, "next_start_line": None}
    data = await h.ok(READ, path="three.txt", start_line=2, max_lines=1)
    assert data["content"] == "b" and data["next_start_line"] == 3 and data["truncated"]
    (h.project / "crlf.txt").write_bytes(b"a\r\nb\r\n")
    assert (await h.ok(READ, path="crlf.txt"))["content"] == "a\r\nb\r"
    (h.project / "empty.txt").write_text("")
    empty = await h.ok(READ, path="empty.txt")
    assert empty["content"] == "" and empty["next_start_line"] is None and not empty["truncated"]
    (h.project / "blank.txt").write_text("\n\n")
    assert (await h.ok(READ, path="blank.txt", max_lines=1))["next_start_line"] == 2


async def test_large_text_never_artifacted_and_not_instruction(h: CodeToolsHarness) -> None:
    (h.project / "README.md").write_text("# readme\n" + "x" * 200_000 + "\n")
    data = await h.ok(READ, path="README.md")
    assert data["already_loaded"] is None and h.sink.artifacts == {} and h.sink.context_nodes == []
    plans = h.project / ".soong-agent" / "plans"
    plans.mkdir(parents=True)
    (plans / "plan.md").write_text("# plan\n")
    assert (await h.ok(READ, path=".soong-agent/plans/plan.md"))["already_loaded"] is None
    assert h.sink.context_nodes == []


async def test_read_preflight_scope_and_flags(h: CodeToolsHarness) -> None:
    (h.project / "a.txt").write_text("x")
    pre = await h.preflight(READ, path="a.txt")
    assert pre.target_scope == str(h.project / "a.txt") and pre.target_paths == [h.project / "a.txt"]
    assert not pre.sensitive and not pre.outside_write_roots and pre.env_summary == {}


async def test_non_sensitive_read_outside_project_is_not_flagged(h: CodeToolsHarness, tmp_path: Path) -> None:
    """Case H1."""
    other = tmp_path / "elsewhere.txt"
    other.write_text("hello\n")
    pre = await h.preflight(READ, path=str(other))
    assert not pre.sensitive
    assert (await h.ok(READ, path=str(other)))["content"] == "hello"


async def test_instruction_read_registers_context_once_per_hash(h: CodeToolsHarness) -> None:
    """Cases F6, F7, F8."""
    claude = h.project / "CLAUDE.md"
    body = "---\ntitle: Rules\n---\n# Rules\nmarker-one\n" + "".join(f"rule {i}\n" for i in range(300))
    claude.write_text(body)
    first = await h.ok(READ, path="CLAUDE.md", max_lines=2)
    assert first["already_loaded"] is False and first["content"] == "---\ntitle: Rules"
    assert len(h.sink.context_nodes) == 1
    call_id, draft = h.sink.context_nodes[0]
    assert call_id == h.calls[-1].tool_call_id
    assert draft.node_type == NodeType.instruction_context and draft.role == MessageRole.system
    assert draft.content == [TextBlock(text=body)]  # full body, not the window
    meta = draft.metadata
    assert meta["path"] == str(claude) and meta["scope"] == "project" and meta["relative_path"] == "CLAUDE.md"
    assert meta["hash"] == hashlib.sha256(body.encode()).hexdigest()
    assert meta["frontmatter"] == {"title": "Rules"} and meta["size_bytes"] == len(body.encode())
    assert meta["loaded_by_tool_call_id"] == call_id and isinstance(meta["mtime_ns"], int)

    h.remember_instruction_loads()
    again = await h.ok(READ, path="CLAUDE.md")
    assert again["already_loaded"] is True and len(h.sink.context_nodes) == 1

    claude.write_text(body.replace("marker-one", "marker-two"))
    changed = await h.ok(READ, path="CLAUDE.md")
    assert changed["already_loaded"] is False and len(h.sink.context_nodes) == 2
    assert "marker-two" in h.sink.context_nodes[1][1].content[0].text  # type: ignore[union-attr]


async def test_user_level_rules_and_symlinked_instruction(h: CodeToolsHarness) -> None:
    """Case F6."""
    rules = h.home / "rules" / "sub"
    rules.mkdir(parents=True)
    (rules / "b.md").write_text("no frontmatter\n")
    data = await h.ok(READ, path=str(rules / "b.md"))
    assert data["already_loaded"] is False
    meta = h.sink.context_nodes[-1][1].metadata
    assert meta["scope"] == "user" and meta["relative_path"] == "rules/sub/b.md" and meta["frontmatter"] == {}
    (h.project / "pkg").mkdir()
    (h.project / "pkg" / "AGENTS.md").write_text("agents\n")
    (h.project / "alias.txt").symlink_to(h.project / "pkg" / "AGENTS.md")
    await h.ok(READ, path="alias.txt")  # the resolved path is what counts
    assert h.sink.context_nodes[-1][1].metadata["relative_path"] == "pkg/AGENTS.md"


async def test_ordinary_and_excluded_markdown_register_nothing(h: CodeToolsHarness) -> None:
    """Case F9."""
    for rel in ("README.md", "node_modules/x/CLAUDE.md", ".soong-agent/rules/a.md", "docs/claude.md"):
        path = h.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("body\n")
        assert (await h.ok(READ, path=rel))["already_loaded"] is None, rel
    assert h.sink.context_nodes == []


async def test_binary_instruction_file_registers_nothing(h: CodeToolsHarness) -> None:
    (h.project / "CLAUDE.md").write_bytes(b"\x00\x01")
    data = await h.ok(READ, path="CLAUDE.md")
    assert data["binary"] is True and data["already_loaded"] is None and h.sink.context_nodes == []
