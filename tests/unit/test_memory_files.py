"""Memory files, frontmatter, the store and the ``MEMORY.md`` catalog (docs/context.md#files)."""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_core._context.tokens import DEFAULT_COUNTER
from agent_core._memory.catalog import TRUNCATED_MARKER, MemoryCatalogBlock, cut_to_tokens
from agent_core._memory.files import (
    CATALOG_TITLE,
    MEMORY_ID_RE,
    MemoryFrontmatter,
    MemoryStore,
    memory_relpath,
    new_memory_id,
    parse_memory_text,
    render_catalog,
    render_memory_file,
)
from tests.fixtures.env import SoongEnv


def _front(
    memory_id: str, category: str = "user", created: str = "2024-01-02T03:04:05Z", **extra: object
) -> MemoryFrontmatter:
    return MemoryFrontmatter.model_validate(
        {
            "id": memory_id,
            "category": category,
            "summary": f"summary of {memory_id}",
            "tags": ["a", "b"],
            "created_at": created,
            "updated_at": created,
            "source_session_id": "sess_x",
            "source_node_ids": ["node_1"],
            **extra,
        }
    )


def write_memory(
    home: Path, front: MemoryFrontmatter, body: str = "Body text.\n", name: str = "note"
) -> Path:
    created = datetime.fromisoformat(front.created_at.replace("Z", "+00:00"))
    path = home / "memory" / memory_relpath(front.category, name, created, front.id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(front, body), encoding="utf-8")
    return path


def test_memory_id_and_file_name_format() -> None:
    moment = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    memory_id = new_memory_id(moment)
    assert MEMORY_ID_RE.match(memory_id) and memory_id.startswith("mem_20250304050607_")
    assert re.fullmatch(r"mem_20250304050607_[0-9a-f]{6}", memory_id)
    assert (
        memory_relpath("user", "prefers-tabs", moment, memory_id)
        == f"user/prefers-tabs-20250304-{memory_id}.md"
    )
    assert len({new_memory_id(moment) for _ in range(20)}) > 1  # the 6-hex suffix is random


def test_frontmatter_round_trip_keeps_all_fields_and_body() -> None:
    front = _front("mem_20240102030405_abcdef", "reference", evidence={"source": "docs/x.md"})
    text = render_memory_file(front, "Line one\n\nLine two")
    assert text.startswith("---\nid: mem_20240102030405_abcdef\ncategory: reference\n")
    parsed, body = parse_memory_text(text)
    assert parsed.dump() == front.dump()
    assert set(parsed.dump()) == {
        "id", "category", "summary", "tags", "created_at", "updated_at", "source_session_id", "source_node_ids",
        "evidence",
    }  # fmt: skip
    assert body == "Line one\n\nLine two\n"
    assert "evidence" not in _front("mem_20240102030405_abcdef").dump()


@pytest.mark.parametrize(
    "text",
    [
        "no frontmatter at all\n",
        "---\nid: [broken\n---\nbody\n",
        "---\nid: mem_20240102030405_abcdef\ncategory: project\nsummary: s\ncreated_at: 2024-01-01T00:00:00Z\n"
        "updated_at: 2024-01-01T00:00:00Z\n---\nbody\n",
        "---\nid: not-an-id\ncategory: user\nsummary: s\ncreated_at: 2024-01-01T00:00:00Z\n"
        "updated_at: 2024-01-01T00:00:00Z\n---\nbody\n",
    ],
)
def test_invalid_memory_text_is_rejected(text: str) -> None:
    with pytest.raises(ValueError):
        parse_memory_text(text)


def test_catalog_is_ordered_by_created_at_descending_with_exact_line_format(soong_env: SoongEnv) -> None:
    home = soong_env.home
    old = _front("mem_20240101000000_aaaaaa", created="2024-01-01T00:00:00Z")
    new = _front("mem_20240301000000_bbbbbb", "feedback", created="2024-03-01T00:00:00Z", tags=[])
    mid = _front("mem_20240201000000_cccccc", "reference", created="2024-02-01T00:00:00Z")
    # updated later than everything: must not move up
    old = old.model_copy(update={"updated_at": "2025-01-01T00:00:00.000000Z"})
    for front in (old, new, mid):
        write_memory(home, front)
    store = MemoryStore(memory_dir=home / "memory")
    text = render_catalog(store.records())
    lines = text.splitlines()
    assert lines[0] == CATALOG_TITLE
    entries = [line for line in lines if line.startswith("- ")]
    assert [e.split("]")[0][3:] for e in entries] == [new.id, mid.id, old.id]
    assert entries[0] == (
        f"- [{new.id}](feedback/note-20240301-{new.id}.md) (feedback, 2024-03-01) — summary of {new.id}"
    )
    assert entries[2].endswith(f"— summary of {old.id} [tags: a, b]")
    assert render_catalog(store.records()) == text  # deterministic


def test_store_skips_invalid_files_other_dirs_and_symlink_escapes(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    home = soong_env.home
    good = write_memory(home, _front("mem_20240101000000_aaaaaa"))
    soong_env.write_home("memory/user/broken.md", "no frontmatter\n")
    soong_env.write_home("memory/other/x.md", render_memory_file(_front("mem_20240101000000_bbbbbb"), "b"))
    soong_env.write_home(
        "memory/user/.hidden.md", render_memory_file(_front("mem_20240101000000_cccccc"), "c")
    )
    wrong_dir = home / "memory" / "feedback" / "wrong.md"
    wrong_dir.parent.mkdir(parents=True, exist_ok=True)
    wrong_dir.write_text(
        render_memory_file(_front("mem_20240101000000_dddddd", "user"), "d"), encoding="utf-8"
    )
    outside = tmp_path / "outside.md"
    outside.write_text(
        render_memory_file(_front("mem_20240101000000_eeeeee"), "secret-ish"), encoding="utf-8"
    )
    os.symlink(outside, home / "memory" / "user" / "link.md")
    soong_env.write_project(
        ".soong-agent/memory/p.md", render_memory_file(_front("mem_20240101000000_ffffff"), "p")
    )
    store = MemoryStore(memory_dir=home / "memory")
    records = store.records()
    assert [r.path for r in records] == [good]
    reasons = {p.path.name: p.reason for p in store.issues}
    assert set(reasons) == {"broken.md", "wrong.md", "link.md"}


def test_store_cache_picks_up_changes(soong_env: SoongEnv) -> None:
    home = soong_env.home
    front = _front("mem_20240101000000_aaaaaa")
    path = write_memory(home, front, "first body")
    store = MemoryStore(memory_dir=home / "memory")
    first = store.records()[0]
    assert first.body == "first body\n"
    path.write_text(render_memory_file(front, "second, longer body"), encoding="utf-8")
    second = store.records()[0]
    assert second.body == "second, longer body\n" and second.hash != first.hash
    path.unlink()
    assert store.records() == []


def test_catalog_block_cut_to_catalog_max_tokens_without_changing_the_file(soong_env: SoongEnv) -> None:
    home = soong_env.home
    fronts = [
        _front(f"mem_2024010100000{i}_aaaaa{i}", created=f"2024-01-0{i + 1}T00:00:00Z") for i in range(5)
    ]
    for i, front in enumerate(fronts):
        write_memory(home, front, name=f"n{i}")
    store = MemoryStore(memory_dir=home / "memory")
    catalog = render_catalog(store.records())
    store.catalog_path.write_text(catalog, encoding="utf-8")
    full = MemoryCatalogBlock(store=store, max_tokens=4000).block()
    assert full is not None and full.block_id == "memory_catalog" and full.priority == 130 and full.dynamic
    assert catalog.strip() in full.content and full.metadata["truncated"] is False
    small = MemoryCatalogBlock(store=store, max_tokens=100).block()
    assert small is not None and small.metadata["truncated"] is True
    assert DEFAULT_COUNTER.text(small.content) <= 100
    assert TRUNCATED_MARKER.strip() in small.content
    assert fronts[4].id in small.content and fronts[0].id not in small.content  # newest first survive
    assert store.catalog_path.read_text(encoding="utf-8") == catalog
    assert "Body text" not in full.content


def test_catalog_block_absent_without_catalog_file(soong_env: SoongEnv) -> None:
    store = MemoryStore(memory_dir=soong_env.home / "memory")
    assert MemoryCatalogBlock(store=store, max_tokens=100).source([]) == []


def test_cut_to_tokens_keeps_short_text() -> None:
    assert cut_to_tokens("abc", 10, DEFAULT_COUNTER) == ("abc", False)
