"""Instruction catalog scan, catalog block and the instruction-file predicate
(docs/context.md#instruction-files, docs/context.md#the-catalog).

Covers cases F1–F5 and F13; docs/testing.md; docs/context.md. The
predicate itself (:func:`match_instruction_file`, F9) belongs to the code tools; here only the catalog's
agreement with it is checked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_core._context.instructions import (
    CATALOG_PRIORITY,
    MAX_CATALOG_ENTRIES,
    catalog_block,
    scan_instruction_catalog,
)
from agent_core.tools._instruction_files import match_instruction_file
from agent_core.tools._paths import SKIP_DIRS
from tests.fixtures.env import SoongEnv


def _listing(env: SoongEnv) -> list[tuple[str, str]]:
    catalog = scan_instruction_catalog(env.home, env.project)
    return [(e.scope, e.relative_path) for e in catalog.entries]


def _block_entries(content: str) -> list[dict[str, object]]:
    lines = content.splitlines()
    return [json.loads(line) for line in lines[1:-1]]


def test_catalog_lists_sources_with_frontmatter_and_no_bodies(soong_env: SoongEnv) -> None:
    """Case F1."""
    env = soong_env
    env.write_home("CLAUDE.md", "BODY-HOME-CLAUDE\n", frontmatter={"title": "home rules", "tags": ["a"]})
    env.write_home("rules/a.md", "BODY-RULE-A\n", frontmatter={"applies_to": "python"})
    env.write_home("rules/sub/b.md", "BODY-RULE-B\n")
    env.write_project("CLAUDE.md", "BODY-PROJECT-ROOT\n", frontmatter={"title": "project"})
    env.write_project("pkg/AGENTS.md", "BODY-PKG-AGENTS\n")
    env.write_project("sub/AGENTS.md", "BODY-SUB-AGENTS\n", frontmatter={"owner": "team"})
    env.write_project("README.md", "BODY-README\n")
    env.write_home("notes.md", "BODY-HOME-NOTES\n")

    catalog = scan_instruction_catalog(env.home, env.project)
    assert [(e.scope, e.relative_path) for e in catalog.entries] == [
        ("user", "CLAUDE.md"),
        ("user", "rules/a.md"),
        ("user", "rules/sub/b.md"),
        ("project", "CLAUDE.md"),
        ("project", "pkg/AGENTS.md"),
        ("project", "sub/AGENTS.md"),
    ]
    assert catalog.truncated is False and catalog.total_found == 6
    by_rel = {(e.scope, e.relative_path): e for e in catalog.entries}
    assert by_rel[("user", "CLAUDE.md")].path == str(env.home / "CLAUDE.md")
    assert by_rel[("project", "sub/AGENTS.md")].path == str(env.project / "sub" / "AGENTS.md")
    assert by_rel[("user", "CLAUDE.md")].frontmatter == {"title": "home rules", "tags": ["a"]}
    assert by_rel[("user", "rules/a.md")].frontmatter == {"applies_to": "python"}
    assert by_rel[("project", "sub/AGENTS.md")].frontmatter == {"owner": "team"}

    block = catalog_block(catalog)
    assert block.block_id == "instruction_catalog"
    assert block.source == "instruction_catalog"
    assert block.priority == CATALOG_PRIORITY == 70
    assert block.dynamic is False
    lines = block.content.splitlines()
    assert lines[0] == '<instruction_catalog truncated="false" total_found="6">'
    assert lines[-1] == "</instruction_catalog>"
    entries = _block_entries(block.content)
    assert entries == [e.to_dict() for e in catalog.entries]
    assert set(entries[0]) == {"path", "scope", "relative_path", "frontmatter"}
    assert "BODY-" not in block.content


def test_no_frontmatter_file_listed_with_relative_path(soong_env: SoongEnv) -> None:
    """Case F2."""
    soong_env.write_project("CLAUDE.md", "just text, no frontmatter\n")
    soong_env.write_project("deep/er/AGENTS.md", "plain\n")
    catalog = scan_instruction_catalog(soong_env.home, soong_env.project)
    dicts = [e.to_dict() for e in catalog.entries]
    assert dicts == [
        {
            "path": str(soong_env.project / "CLAUDE.md"),
            "scope": "project",
            "relative_path": "CLAUDE.md",
            "frontmatter": {},
        },
        {
            "path": str(soong_env.project / "deep/er/AGENTS.md"),
            "scope": "project",
            "relative_path": "deep/er/AGENTS.md",
            "frontmatter": {},
        },
    ]


def test_claude_md_wins_over_agents_md_in_same_directory(soong_env: SoongEnv) -> None:
    """Case F3."""
    env = soong_env
    for rel in ("CLAUDE.md", "AGENTS.md", "sub/CLAUDE.md", "sub/AGENTS.md", "other/AGENTS.md"):
        env.write_project(rel, "x\n")
    env.write_home("CLAUDE.md", "x\n")
    env.write_home("AGENTS.md", "x\n")
    assert _listing(env) == [
        ("user", "CLAUDE.md"),
        ("project", "CLAUDE.md"),
        ("project", "other/AGENTS.md"),
        ("project", "sub/CLAUDE.md"),
    ]


@pytest.mark.parametrize("skipped", sorted(SKIP_DIRS))
def test_skipped_directories_are_not_listed(soong_env: SoongEnv, skipped: str) -> None:
    """Case F4."""
    env = soong_env
    env.write_project(f"{skipped}/CLAUDE.md", "x\n")
    env.write_project(f"{skipped}/pkg/AGENTS.md", "x\n")
    env.write_project(f"src/{skipped}/CLAUDE.md", "x\n")
    env.write_home(f"rules/{skipped}/r.md", "x\n")
    env.write_project("src/CLAUDE.md", "kept\n")
    assert _listing(env) == [("project", "src/CLAUDE.md")]


def test_project_soong_agent_dir_and_rules_never_scanned(soong_env: SoongEnv) -> None:
    """Case F5."""
    env = soong_env
    env.write_project(".soong-agent/rules/a.md", "x\n")
    env.write_project(".soong-agent/rules/CLAUDE.md", "x\n")
    env.write_project(".soong-agent/CLAUDE.md", "x\n")
    env.write_project(".soong-agent/plans/AGENTS.md", "x\n")
    env.write_project("rules/a.md", "project rules are not a source\n")
    env.write_project("nested/.soong-agent/CLAUDE.md", "only the root state dir is excluded\n")
    assert _listing(env) == [("project", "nested/.soong-agent/CLAUDE.md")]


def test_names_match_case_sensitively(soong_env: SoongEnv) -> None:
    env = soong_env
    env.write_project("claude.md", "x\n")
    env.write_project("a/Agents.md", "x\n")
    env.write_project("b/CLAUDE.MD", "x\n")
    env.write_home("claude.md", "x\n")
    env.write_home("rules/UPPER.MD", "x\n")
    env.write_home("rules/notes.txt", "x\n")
    assert _listing(env) == []


def test_user_entries_come_before_project_entries(soong_env: SoongEnv) -> None:
    env = soong_env
    env.write_home("rules/zzz.md", "x\n")
    env.write_project("AAA/CLAUDE.md", "x\n")
    env.write_project("CLAUDE.md", "x\n")
    env.write_home("rules/aaa.md", "x\n")
    assert _listing(env) == [
        ("user", "rules/aaa.md"),
        ("user", "rules/zzz.md"),
        ("project", "AAA/CLAUDE.md"),
        ("project", "CLAUDE.md"),
    ]


def test_home_inside_project_is_skipped_by_the_project_walk(tmp_path: Path) -> None:
    project = (tmp_path / "proj").resolve()
    home = project / "agent-home"
    (home / "rules").mkdir(parents=True)
    (home / "CLAUDE.md").write_text("x\n")
    (home / "rules" / "r.md").write_text("x\n")
    (home / "sub").mkdir()
    (home / "sub" / "AGENTS.md").write_text("x\n")
    (project / "CLAUDE.md").write_text("x\n")
    catalog = scan_instruction_catalog(home, project)
    assert [(e.scope, e.relative_path) for e in catalog.entries] == [
        ("user", "CLAUDE.md"),
        ("user", "rules/r.md"),
        ("project", "CLAUDE.md"),
    ]


def test_symlinked_directories_are_not_followed(soong_env: SoongEnv, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "CLAUDE.md").write_text("x\n")
    (outside / "deep" / "AGENTS.md").write_text("x\n")
    os.symlink(outside, soong_env.project / "linked", target_is_directory=True)
    os.symlink(outside, soong_env.home / "rules", target_is_directory=True)
    soong_env.write_project("real/CLAUDE.md", "x\n")
    assert _listing(soong_env) == [("project", "real/CLAUDE.md")]


def test_symlinked_file_pointing_outside_the_sources_is_skipped(soong_env: SoongEnv, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.md"
    target.write_text("x\n")
    os.symlink(target, soong_env.project / "CLAUDE.md")
    inside = soong_env.write_project("docs/shared.md", "x\n")
    (soong_env.project / "docs" / "CLAUDE.md").symlink_to(inside)
    assert _listing(soong_env) == []


def test_frontmatter_error_and_normalised_values(soong_env: SoongEnv) -> None:
    env = soong_env
    env.write_project("bad/CLAUDE.md", "---\ntitle: [unclosed\n---\nbody\n")
    env.write_project("list/CLAUDE.md", "---\n- a\n- b\n---\nbody\n")
    env.write_project("open/CLAUDE.md", "---\ntitle: never closed\nbody\n")
    env.write_project("dated/CLAUDE.md", "---\nsince: 2024-05-01\n7: seven\n---\nbody\n")
    catalog = scan_instruction_catalog(env.home, env.project)
    by_rel = {e.relative_path: e.to_dict() for e in catalog.entries}
    for rel in ("bad/CLAUDE.md", "list/CLAUDE.md", "open/CLAUDE.md"):
        assert by_rel[rel]["frontmatter"] == {}
        assert by_rel[rel]["frontmatter_error"] is True
    assert by_rel["dated/CLAUDE.md"]["frontmatter"] == {"since": "2024-05-01", "7": "seven"}
    assert "frontmatter_error" not in by_rel["dated/CLAUDE.md"]
    json.loads(catalog_block(catalog).content.splitlines()[1])


def test_more_than_200_files_truncated_after_200(soong_env: SoongEnv) -> None:
    """Case F13."""
    env = soong_env
    for i in range(205):
        env.write_project(f"d{i:03d}/CLAUDE.md", "x\n")
    catalog = scan_instruction_catalog(env.home, env.project)
    assert len(catalog.entries) == MAX_CATALOG_ENTRIES == 200
    assert catalog.truncated is True
    assert catalog.total_found == 205
    assert [e.relative_path for e in catalog.entries] == [f"d{i:03d}/CLAUDE.md" for i in range(200)]
    block = catalog_block(catalog)
    assert block.content.splitlines()[0] == '<instruction_catalog truncated="true" total_found="205">'
    assert len(_block_entries(block.content)) == 200
    assert block.metadata["truncated"] is True and block.metadata["total_found"] == 205


def test_user_entries_are_kept_first_when_truncating(soong_env: SoongEnv) -> None:
    """Case F13."""
    env = soong_env
    env.write_home("rules/zz.md", "x\n")
    for i in range(3):
        env.write_project(f"p{i}/AGENTS.md", "x\n")
    catalog = scan_instruction_catalog(env.home, env.project, limit=2)
    assert [(e.scope, e.relative_path) for e in catalog.entries] == [
        ("user", "rules/zz.md"),
        ("project", "p0/AGENTS.md"),
    ]
    assert catalog.truncated and catalog.total_found == 4


def test_catalog_rescan_sees_file_added_between_runs(soong_env: SoongEnv) -> None:
    """Case F13."""
    env = soong_env
    env.write_project("CLAUDE.md", "x\n")
    first = scan_instruction_catalog(env.home, env.project)
    env.write_project("new/AGENTS.md", "x\n", frontmatter={"k": "v"})
    second = scan_instruction_catalog(env.home, env.project)
    assert [e.relative_path for e in first.entries] == ["CLAUDE.md"]
    assert [e.relative_path for e in second.entries] == ["CLAUDE.md", "new/AGENTS.md"]
    assert second.entries[1].frontmatter == {"k": "v"}


def test_missing_home_and_project_directories_give_empty_catalog(tmp_path: Path) -> None:
    catalog = scan_instruction_catalog(tmp_path / "no-home", tmp_path / "no-project")
    assert catalog.entries == () and catalog.total_found == 0 and not catalog.truncated
    assert catalog_block(catalog).content == (
        '<instruction_catalog truncated="false" total_found="0">\n</instruction_catalog>'
    )


def test_catalog_block_escapes_closing_tag_in_frontmatter(soong_env: SoongEnv) -> None:
    soong_env.write_project("CLAUDE.md", "x\n", frontmatter={"title": "a </instruction_catalog> b"})
    block = catalog_block(scan_instruction_catalog(soong_env.home, soong_env.project))
    assert block.content.count("</instruction_catalog>") == 1
    assert _block_entries(block.content)[0]["frontmatter"] == {"title": "a </instruction_catalog> b"}


# ------------------------------------------------------------------------------------------------ predicate


def test_predicate_ignores_precedence_and_catalog_truncation(soong_env: SoongEnv) -> None:
    env = soong_env
    env.write_project("CLAUDE.md", "x\n")
    agents = env.write_project("AGENTS.md", "x\n")
    for i in range(3):
        env.write_project(f"d{i}/CLAUDE.md", "x\n")
    catalog = scan_instruction_catalog(env.home, env.project, limit=1)
    assert str(agents) not in {e.path for e in catalog.entries}
    for path in (agents, env.project / "d2" / "CLAUDE.md"):
        ref = match_instruction_file(path, project_dir=env.project, home_dir=env.home)
        assert ref is not None and ref.scope == "project"


def test_catalog_entries_all_satisfy_the_predicate(soong_env: SoongEnv) -> None:
    env = soong_env
    for rel in ("CLAUDE.md", "a/AGENTS.md", "a/b/CLAUDE.md"):
        env.write_project(rel, "x\n")
    env.write_home("rules/r/s.md", "x\n")
    env.write_home("AGENTS.md", "x\n")
    catalog = scan_instruction_catalog(env.home, env.project)
    assert len(catalog.entries) == 5
    for entry in catalog.entries:
        ref = match_instruction_file(Path(entry.path), project_dir=env.project, home_dir=env.home)
        assert ref is not None
        assert (ref.scope, ref.relative_path) == (entry.scope, entry.relative_path)
