"""Skill catalog and ``internal.load_skill`` (docs/context.md#skills).

Covers cases F10, F12 and the tool-level part of F11 (the ``<skill>`` rendering in the next request and
the internal/no-permission event path belong to the composer and the registry); docs/context.md.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_core._ids import new_id
from agent_core._skills.catalog import SkillCatalog
from agent_core._skills.tool import SkillToolAdapter
from agent_core._skills.tool_definition import LOAD_SKILL_TOOL
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools.adapter import ToolAdapter
from agent_core.tools.context import ContextNodeDraft
from agent_core.types.base import utc_now
from agent_core.types.content import TextBlock
from agent_core.types.enums import MessageRole, NodeType
from agent_core.types.model import ToolCall
from agent_core.types.runtime import Node
from tests.fixtures.env import SoongEnv
from tests.fixtures.tool_sink import RecordingSink, make_ctx, make_scope

REVIEW_FM: dict[str, Any] = {"name": "review", "description": "Review a change for bugs and style."}


def _write_skill(env: SoongEnv, filename: str, body: str, frontmatter: dict[str, Any] | None) -> Path:
    return env.write_home(f"skills/{filename}", body, frontmatter=frontmatter)


def _bump_mtime(path: Path, seconds: int = 5) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + seconds * 1_000_000_000))


# ----------------------------------------------------------------------------------------------- catalog


def test_skill_catalog_block_has_names_and_descriptions_only(
    soong_env: SoongEnv, caplog: pytest.LogCaptureFixture
) -> None:
    """Case F10."""
    env = soong_env
    _write_skill(env, "review.md", "BODY-MARKER-REVIEW\n", REVIEW_FM | {"version": 2})
    _write_skill(env, "deploy.md", "BODY-MARKER-DEPLOY\n", {"name": "deploy", "description": "Ship it."})
    _write_skill(env, "noname.md", "BODY-MARKER-NONAME\n", {"description": "x"})
    _write_skill(env, "nodesc.md", "BODY-MARKER-NODESC\n", {"name": "nodesc"})
    _write_skill(env, "plain.md", "BODY-MARKER-PLAIN\n", None)
    env.write_home("skills/broken.md", "---\nname: [oops\n---\nBODY-MARKER-BROKEN\n")
    _write_skill(env, "empty.md", "x\n", {"name": "  ", "description": "d"})

    catalog = SkillCatalog(env.home)
    with caplog.at_level(logging.WARNING, logger="agent_core._skills"):
        entries = catalog.entries()
    assert [(e.name, e.description) for e in entries] == [
        ("deploy", "Ship it."),
        ("review", "Review a change for bugs and style."),
    ]
    assert entries[1].path == (env.home / "skills" / "review.md").resolve()
    assert entries[1].metadata == {"version": 2}
    invalid = sorted(i.path.name for i in catalog.invalid)
    assert invalid == ["broken.md", "empty.md", "nodesc.md", "noname.md", "plain.md"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name in invalid:
        assert name in warned

    block = catalog.block()
    assert block is not None
    assert block.block_id == "skill_catalog" and block.source == "skill_catalog"
    assert block.priority == 120 and block.dynamic is True
    assert block.content.splitlines() == [
        "<skill_catalog>",
        '{"name":"deploy","description":"Ship it."}',
        '{"name":"review","description":"Review a change for bugs and style."}',
        "</skill_catalog>",
    ]
    assert "BODY-MARKER" not in block.content
    assert block.metadata["truncation_marker"].endswith("</skill_catalog>")


def test_duplicate_names_first_file_wins(soong_env: SoongEnv) -> None:
    _write_skill(soong_env, "b-review.md", "B\n", {"name": "review", "description": "second"})
    _write_skill(soong_env, "a-review.md", "A\n", {"name": "review", "description": "first"})
    catalog = SkillCatalog(soong_env.home)
    entry = catalog.get("review")
    assert entry is not None and entry.description == "first" and entry.path.name == "a-review.md"
    assert [d.path.name for d in catalog.duplicates] == ["b-review.md"]
    assert len(catalog.entries()) == 1


def test_catalog_is_non_recursive_and_md_only(soong_env: SoongEnv) -> None:
    _write_skill(soong_env, "sub/nested.md", "x\n", {"name": "nested", "description": "d"})
    _write_skill(soong_env, "notes.txt", "x\n", {"name": "txt", "description": "d"})
    (soong_env.home / "skills" / "dir.md").mkdir()
    soong_env.write_project(".soong-agent/skills/proj.md", "---\nname: proj\ndescription: d\n---\nx\n")
    catalog = SkillCatalog(soong_env.home)
    assert catalog.entries() == []
    assert catalog.block() is None


def test_missing_skills_dir_gives_empty_catalog(tmp_path: Path) -> None:
    catalog = SkillCatalog(tmp_path / "nohome")
    assert catalog.entries() == [] and catalog.block() is None and catalog.get("x") is None


def test_refresh_rebuilds_only_on_added_removed_or_changed_files(soong_env: SoongEnv) -> None:
    env = soong_env
    path = _write_skill(env, "review.md", "x\n", REVIEW_FM)
    catalog = SkillCatalog(env.home)
    assert catalog.refresh() is True
    assert catalog.refresh() is False

    # A content change without an mtime/size change is not seen until the file's stat changes.
    st = path.stat()
    path.write_text(path.read_text().replace("bugs and style", "BUGS AND STYLE"))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert catalog.refresh() is False
    assert catalog.get("review").description == REVIEW_FM["description"]  # type: ignore[union-attr]
    _bump_mtime(path)
    assert catalog.refresh() is True
    assert catalog.get("review").description == "Review a change for BUGS AND STYLE."  # type: ignore[union-attr]

    _write_skill(env, "lint.md", "x\n", {"name": "lint", "description": "Lint."})
    assert catalog.get("lint") is None  # cached until the next run start
    assert catalog.refresh() is True
    assert catalog.get("lint") is not None
    (env.home / "skills" / "lint.md").unlink()
    assert catalog.refresh() is True
    assert catalog.get("lint") is None


# -------------------------------------------------------------------------------------------------- tool


def _node(draft: ContextNodeDraft, seq: int) -> Node:
    return Node(
        node_id=new_id("node_"),
        node_seq=seq,
        session_id="sess_t",
        agent_id="agent_t",
        role=draft.role.value,
        node_type=draft.node_type.value,
        content=list(draft.content),
        metadata=dict(draft.metadata),
        created_at=utc_now(),
    )


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


class Harness:
    def __init__(self, env: SoongEnv, tmp_path: Path) -> None:
        self.env = env
        self.catalog = SkillCatalog(env.home)
        self.adapter = SkillToolAdapter(self.catalog)
        self.sink = RecordingSink(artifact_dir=tmp_path / "artifacts")
        self.scope = make_scope(env.project, env.home, effective_tools=frozenset({LOAD_SKILL_TOOL}))

    async def call(self, **arguments: object) -> dict[str, object]:
        ctx = make_ctx(self.scope, self.sink, LOAD_SKILL_TOOL)
        call = ToolCall(tool_call_id=ctx.tool_call_id, name=LOAD_SKILL_TOOL, arguments=dict(arguments))
        result = await self.adapter.execute(call, ctx)
        return result

    def commit_nodes(self) -> None:
        """Moves buffered drafts onto the active path, as the loop does after the turn."""
        seq = len(self.sink.path)
        for _, draft in self.sink.context_nodes:
            seq += 1
            self.sink.path.append(_node(draft, seq))
        self.sink.context_nodes.clear()


@pytest.fixture
def harness(soong_env: SoongEnv, tmp_path: Path) -> Harness:
    return Harness(soong_env, tmp_path)


def test_load_skill_definition_is_internal_readonly_parallel() -> None:
    """Case F11."""
    adapter = SkillToolAdapter(SkillCatalog(Path("/nonexistent-home")))
    assert isinstance(adapter, ToolAdapter)
    [definition] = adapter.definitions()
    assert definition.name == "internal.load_skill"
    assert definition.permission == "readonly"
    assert definition.tags == ["internal", "readonly"]
    assert definition.metadata["concurrency"] == "parallel"
    assert definition.input_schema == {
        "type": "object",
        "properties": {"name": definition.input_schema["properties"]["name"]},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert definition.input_schema["properties"]["name"]["type"] == "string"


async def test_load_skill_writes_skill_context_node(harness: Harness) -> None:
    """Case F11."""
    path = _write_skill(harness.env, "review.md", "BODY-MARKER-REVIEW\nstep 2\n", REVIEW_FM)
    ctx = make_ctx(harness.scope, harness.sink, LOAD_SKILL_TOOL, tool_call_id="call_load_1")
    call = ToolCall(tool_call_id="call_load_1", name=LOAD_SKILL_TOOL, arguments={"name": "review"})
    result = await harness.adapter.execute(call, ctx)

    assert result == {
        "skill_name": "review",
        "skill_path": str(path.resolve()),
        "already_loaded": False,
        "description": REVIEW_FM["description"],
    }
    assert "BODY-MARKER" not in str(result)
    [(call_id, draft)] = harness.sink.context_nodes
    assert call_id == "call_load_1"
    assert draft.node_type == NodeType.skill_context
    assert draft.role == MessageRole.user
    assert draft.content == [TextBlock(text="BODY-MARKER-REVIEW\nstep 2\n")]
    assert set(draft.metadata) == {
        "skill_name",
        "skill_path",
        "skill_hash",
        "skill_mtime_ns",
        "loaded_by_tool_call_id",
    }
    assert draft.metadata["skill_name"] == "review"
    assert draft.metadata["skill_path"] == str(path.resolve())
    assert draft.metadata["loaded_by_tool_call_id"] == "call_load_1"
    assert draft.metadata["skill_mtime_ns"] == path.stat().st_mtime_ns
    assert len(draft.metadata["skill_hash"]) == 64
    assert harness.sink.events == [] and harness.sink.committed == []


async def test_repeat_load_is_already_loaded_then_reloads_after_edit(harness: Harness) -> None:
    """Case F12."""
    path = _write_skill(harness.env, "review.md", "VERSION-1\n", REVIEW_FM)
    await harness.call(name="review")
    harness.commit_nodes()
    assert len(harness.sink.path) == 1

    again = await harness.call(name="review")
    assert again["already_loaded"] is True
    assert harness.sink.context_nodes == []

    path.write_text(path.read_text().replace("VERSION-1", "VERSION-2"))
    _bump_mtime(path)
    edited = await harness.call(name="review")
    assert edited["already_loaded"] is False
    [(_, draft)] = harness.sink.context_nodes
    assert draft.content == [TextBlock(text="VERSION-2\n")]
    assert draft.metadata["skill_hash"] != harness.sink.path[0].metadata["skill_hash"]
    harness.commit_nodes()
    assert (await harness.call(name="review"))["already_loaded"] is True


async def test_touched_skill_file_is_injected_again(harness: Harness) -> None:
    """Case F12."""
    path = _write_skill(harness.env, "review.md", "SAME\n", REVIEW_FM)
    await harness.call(name="review")
    harness.commit_nodes()
    _bump_mtime(path)
    result = await harness.call(name="review")
    assert result["already_loaded"] is False
    assert len(harness.sink.context_nodes) == 1


async def test_other_skill_on_path_does_not_count_as_loaded(harness: Harness) -> None:
    """Case F12."""
    _write_skill(harness.env, "review.md", "R\n", REVIEW_FM)
    _write_skill(harness.env, "deploy.md", "D\n", {"name": "deploy", "description": "Ship."})
    await harness.call(name="deploy")
    harness.commit_nodes()
    assert (await harness.call(name="review"))["already_loaded"] is False


async def test_skill_covered_by_compaction_is_injected_again(harness: Harness) -> None:
    _write_skill(harness.env, "review.md", "BODY\n", REVIEW_FM)
    harness.sink.path.append(_message("first question", 1))
    await harness.call(name="review")
    harness.commit_nodes()
    kept = _message("kept turn", 3)
    harness.sink.path.append(kept)
    harness.sink.path.append(
        _message("summary", 4, node_type=NodeType.compaction, first_kept_node_id=kept.node_id)
    )
    result = await harness.call(name="review")
    assert result["already_loaded"] is False
    assert len(harness.sink.context_nodes) == 1


async def test_skill_after_compaction_cut_point_stays_loaded(harness: Harness) -> None:
    _write_skill(harness.env, "review.md", "BODY\n", REVIEW_FM)
    first = _message("first question", 1)
    harness.sink.path.append(first)
    await harness.call(name="review")
    harness.commit_nodes()
    harness.sink.path.append(
        _message("summary", 3, node_type=NodeType.compaction, first_kept_node_id=first.node_id)
    )
    assert (await harness.call(name="review"))["already_loaded"] is True


async def test_unknown_skill_is_skill_not_found(harness: Harness) -> None:
    """Case F12."""
    _write_skill(harness.env, "review.md", "x\n", REVIEW_FM)
    for name in ("missing", "Review"):
        with pytest.raises(AgentCoreError) as info:
            await harness.call(name=name)
        assert info.value.code == ErrorCode.skill_not_found
        assert info.value.details == {"skill_name": name}
    assert harness.sink.context_nodes == []


async def test_unreadable_skill_is_skill_load_failed(harness: Harness) -> None:
    """Case F12."""
    path = _write_skill(harness.env, "review.md", "x\n", REVIEW_FM)
    assert harness.catalog.get("review") is not None
    path.unlink()
    path.mkdir()
    with pytest.raises(AgentCoreError) as info:
        await harness.call(name="review")
    assert info.value.code == ErrorCode.skill_load_failed
    assert harness.sink.context_nodes == []

    shutil.rmtree(path)
    with pytest.raises(AgentCoreError) as gone:
        await harness.call(name="review")
    assert gone.value.code == ErrorCode.skill_load_failed


async def test_skill_with_frontmatter_broken_after_catalog_build_fails_to_load(harness: Harness) -> None:
    path = _write_skill(harness.env, "review.md", "x\n", REVIEW_FM)
    harness.catalog.refresh()
    path.write_text("---\nname: [broken\n---\nbody\n")
    with pytest.raises(AgentCoreError) as info:
        await harness.call(name="review")
    assert info.value.code == ErrorCode.skill_load_failed
    assert harness.sink.context_nodes == []


async def test_load_skill_rejects_bad_arguments(harness: Harness) -> None:
    _write_skill(harness.env, "review.md", "x\n", REVIEW_FM)
    for arguments in ({}, {"name": 3}, {"name": "review", "extra": True}):
        with pytest.raises(AgentCoreError) as info:
            await harness.call(**arguments)
        assert info.value.code == ErrorCode.validation_error
    assert harness.sink.context_nodes == []
