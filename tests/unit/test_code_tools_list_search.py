"""``code.list_dir`` and ``code.search`` (docs/tools.md#codelist_dir, docs/tools.md#codesearch)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_core.tools._builtin.search import find_ripgrep
from agent_core.tools._paths import SKIP_DIRS
from tests.fixtures.code_tools import CodeToolsHarness, make_harness

LIST = "code.list_dir"
SEARCH = "code.search"
RG = find_ripgrep()


@pytest.fixture
def h(tmp_path: Path) -> CodeToolsHarness:
    return make_harness(tmp_path)


@pytest.fixture(params=["rg", "python"])
def engine(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> CodeToolsHarness:
    """Both search engines; the fallback variant runs with ``rg`` removed from ``PATH`` (G6)."""
    if request.param == "rg":
        assert RG is not None, "ripgrep is a dependency and must be installed"
        return make_harness(tmp_path, rg=RG)
    monkeypatch.setenv("PATH", "/nonexistent-bin")
    return make_harness(tmp_path, rg=None)


def write(root: Path, rel: str, text: str = "x\n") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


async def test_list_dir_non_recursive(h: CodeToolsHarness) -> None:
    """Case G4."""
    write(h.project, "a.txt", "hello")
    write(h.project, "sub/deep/b.txt")
    (h.project / "link").symlink_to(h.project / "sub")
    data = await h.ok(LIST, path=".")
    assert data == {
        "entries": [
            {"path": "a.txt", "type": "file", "size_bytes": 5},
            {"path": "link", "type": "symlink", "size_bytes": None},
            {"path": "sub", "type": "dir", "size_bytes": None},
        ],
        "truncated": False,
    }


async def test_list_dir_recursive_limit_and_default(h: CodeToolsHarness) -> None:
    """Case G5."""
    for i in range(3):
        write(h.project, f"d{i}/f.txt")
    data = await h.ok(LIST, path=".", recursive=True, limit=2)
    assert len(data["entries"]) == 2 and data["truncated"] is True
    assert [e["path"] for e in data["entries"]] == ["d0", "d0/f.txt"]
    many = h.project / "many"
    many.mkdir()
    for i in range(1500):
        (many / f"f{i:04d}").touch()
    data = await h.ok(LIST, path="many", recursive=True)
    assert len(data["entries"]) == 1000 and data["truncated"] is True
    assert data["entries"][0]["path"] == "f0000"
    assert await h.error(LIST, path=".", limit=0) == "validation_error"


async def test_list_dir_recursive_skips_dirs_symlinks_and_sensitive(
    h: CodeToolsHarness, tmp_path: Path
) -> None:
    for name in SKIP_DIRS:
        write(h.project, f"{name}/inner.txt")
    write(h.project, "src/.env", "SECRET=1")
    write(h.project, "src/key.pem")
    write(h.project, "src/.env.d/inside.txt")
    write(h.project, "src/ok.py")
    outside = write(tmp_path, "outside/o.txt").parent
    (h.project / "src" / "ext").symlink_to(outside)
    entries = {e["path"]: e["type"] for e in (await h.ok(LIST, path=".", recursive=True))["entries"]}
    for name in SKIP_DIRS:
        assert entries[name] == "dir" and f"{name}/inner.txt" not in entries
    assert entries["src/ok.py"] == "file" and entries["src/ext"] == "symlink"
    assert "src/ext/o.txt" not in entries
    assert not any(".env" in p or p.endswith(".pem") for p in entries)
    # asking for the sensitive target itself (a permitted prompt) lists it normally
    inner = await h.ok(LIST, path="src/.env.d", recursive=True)
    assert inner["entries"] == [{"path": "inside.txt", "type": "file", "size_bytes": 2}]
    # non-recursive listings show names (no content) and are not filtered
    names = [e["path"] for e in (await h.ok(LIST, path="src"))["entries"]]
    assert ".env" in names and "key.pem" in names


async def test_list_dir_errors(h: CodeToolsHarness) -> None:
    assert await h.error(LIST, path="missing") == "file_not_found"
    write(h.project, "f.txt")
    assert await h.error(LIST, path="f.txt") == "validation_error"
    assert await h.error(LIST, path=".", recursive="yes") == "validation_error"


async def test_list_dir_outside_project_not_flagged(h: CodeToolsHarness, tmp_path: Path) -> None:
    write(tmp_path, "other/x.txt")
    pre = await h.preflight(LIST, path=str(tmp_path / "other"))
    assert not pre.sensitive and not pre.outside_project_search
    assert [e["path"] for e in (await h.ok(LIST, path=str(tmp_path / "other")))["entries"]] == ["x.txt"]


async def test_list_dir_sensitive_home_prefix_not_descended(
    h: CodeToolsHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "fake_home"))
    home = h.user_home
    write(home, ".ssh/id_rsa_listtest")
    write(home, "visible/a.txt")
    pre = await h.preflight(LIST, path="~")
    assert not pre.sensitive
    entries = [e["path"] for e in (await h.ok(LIST, path="~", recursive=True, limit=100000))["entries"]]
    assert ".ssh" in entries and not any(p.startswith(".ssh/") for p in entries)
    assert "visible/a.txt" in entries


# --- code.search ---------------------------------------------------------------------------------------


async def test_search_default_path_glob_limit_literal_case(engine: CodeToolsHarness) -> None:
    """Case G6."""
    h = engine
    a = write(h.project, "a.py", "x = 1\nneedle here\n")
    b = write(h.project, "pkg/b.txt", "no\nno\nthe needle\n")
    write(h.project, "pkg/regex.txt", "call a(b) now\naXb\n")
    write(h.project, "upper.txt", "NEEDLE\n")
    data = await h.ok(SEARCH, query="needle")
    assert data == {
        "matches": [
            {"path": str(a), "line": 2, "text": "needle here"},
            {"path": str(b), "line": 3, "text": "the needle"},
        ],
        "truncated": False,
    }
    assert [m["path"] for m in (await h.ok(SEARCH, query="needle", glob="*.py"))["matches"]] == [str(a)]
    limited = await h.ok(SEARCH, query="needle", limit=1)
    assert limited["matches"] == [{"path": str(a), "line": 2, "text": "needle here"}] and limited["truncated"]
    regex = await h.ok(SEARCH, query="a(b")
    assert [(m["line"], m["text"]) for m in regex["matches"]] == [(1, "call a(b) now")]
    assert (await h.ok(SEARCH, query="a.b"))["matches"] == []
    assert (await h.ok(SEARCH, query="NEEDLE"))["matches"][0]["path"].endswith("upper.txt")
    assert len((await h.ok(SEARCH, query="NEEDLE"))["matches"]) == 1
    assert (await h.ok(SEARCH, query="Needle"))["matches"] == []


async def test_search_skips_skip_dirs_binary_symlinks_and_sensitive(
    engine: CodeToolsHarness, tmp_path: Path
) -> None:
    h = engine
    for name in SKIP_DIRS:
        write(h.project, f"{name}/hit.txt", "needle\n")
        write(h.project, f"src/{name}/hit.txt", "needle\n")
    write(h.project, "build_output.txt", "needle\n")  # a file, not the skip dir
    write(h.project, ".env", "needle=1\n")
    write(h.project, ".env.local", "needle\n")
    write(h.project, "conf/server.pem", "needle\n")
    write(h.project, "conf/x.key", "needle\n")
    write(h.project, "sec/.env.d/x.txt", "needle\n")
    (h.project / "blob.bin").write_bytes(b"needle\x00\n")
    (h.project / "latin1.txt").write_bytes(b"needle \xe9\n")
    write(h.project, ".hidden/visible.txt", "needle\n")
    outside = write(tmp_path, "outside/o.txt", "needle\n")
    (h.project / "ln.txt").symlink_to(outside)
    (h.project / "lndir").symlink_to(outside.parent)
    paths = [m["path"] for m in (await h.ok(SEARCH, query="needle", limit=1000))["matches"]]
    assert paths == [str(h.project / ".hidden/visible.txt"), str(h.project / "build_output.txt")]


async def test_search_single_file_root_and_sensitive_root(engine: CodeToolsHarness) -> None:
    h = engine
    f = write(h.project, "notes.md", "one needle\ntwo\nneedle again\n")
    data = await h.ok(
        SEARCH, query="needle", path="notes.md", glob="*.py"
    )  # glob never filters the root file
    assert [m["line"] for m in data["matches"]] == [1, 3] and data["matches"][0]["path"] == str(f)
    env = write(h.project, ".env", "TOKEN=needle\n")
    pre = await h.preflight(SEARCH, query="needle", path=".env")
    assert pre.sensitive and pre.target_scope == str(env)
    assert (await h.ok(SEARCH, query="needle", path=".env"))["matches"][0]["path"] == str(env)


async def test_search_text_cap_and_errors(engine: CodeToolsHarness) -> None:
    h = engine
    write(h.project, "long.txt", "needle" + "é" * 3000 + "\n")
    text = (await h.ok(SEARCH, query="needle"))["matches"][0]["text"]
    assert len(text.encode()) <= 4096 and text.startswith("needle")
    assert await h.error(SEARCH, query="") == "validation_error"
    assert await h.error(SEARCH, query="a\nb") == "validation_error"
    assert await h.error(SEARCH, query="x", limit=0) == "validation_error"
    assert await h.error(SEARCH, query="x", glob="[abc") == "validation_error"
    assert await h.error(SEARCH, query="x", path="missing") == "file_not_found"


@pytest.mark.parametrize(
    "glob",
    [
        "*.py",
        "src/*.py",
        "/src/*.py",
        "**/deep/*.py",
        "src/**",
        "!src",
        "!*.py",
        "{a,b}.txt",
        "?.txt",
        "[ab].txt",
        "[!a].txt",
        "deep/",
        "!deep/",
        "x.py",
    ],
)
async def test_glob_semantics_identical_in_rg_and_fallback(
    tmp_path: Path, glob: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert RG is not None
    results = []
    for engine in (RG, None):
        h = make_harness(tmp_path / ("rg" if engine else "py"), rg=engine)
        for rel in (
            "x.py",
            "a.txt",
            "b.txt",
            "c.txt",
            "src/x.py",
            "src/a.txt",
            "src/deep/y.py",
            "other/deep/z.py",
            "deep/q.txt",
        ):
            write(h.project, rel, "needle\n")
        data = await h.ok(SEARCH, query="needle", glob=glob, limit=1000)
        results.append([os.path.relpath(m["path"], h.project) for m in data["matches"]])
    assert results[0] == results[1], (glob, results)


async def test_search_outside_project_is_flagged(h: CodeToolsHarness, tmp_path: Path) -> None:
    """Case G25."""
    outside = write(tmp_path, "ext/x.txt", "needle\n").parent
    pre = await h.preflight(SEARCH, query="needle", path=str(outside))
    assert pre.outside_project_search and not pre.sensitive and pre.target_scope == str(outside)
    inside = await h.preflight(SEARCH, query="needle")
    assert not inside.outside_project_search and inside.target_scope == str(h.project)
    data = await h.ok(SEARCH, query="needle", path=str(outside))  # after an allow the search runs
    assert data["matches"] == [{"path": str(outside / "x.txt"), "line": 1, "text": "needle"}]


async def test_search_truncated_when_more_matches_than_limit(engine: CodeToolsHarness) -> None:
    h = engine
    write(h.project, "many.txt", "needle\n" * 150)
    data = await h.ok(SEARCH, query="needle")
    assert len(data["matches"]) == 100 and data["truncated"] and data["matches"][-1]["line"] == 100


async def test_candidate_cap_is_deterministic_and_flags_truncation(
    engine: CodeToolsHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_core.tools._builtin import search as module

    monkeypatch.setattr(module, "MAX_CANDIDATES", 5)
    h = engine
    for i in range(10):
        write(h.project, f"d{i}/f.txt", "needle\nneedle\n")
    data = await h.ok(SEARCH, query="needle", limit=3)
    assert data["truncated"] is True
    assert [(os.path.relpath(m["path"], h.project), m["line"]) for m in data["matches"]] == [
        ("d0/f.txt", 1),
        ("d0/f.txt", 2),
        ("d1/f.txt", 1),
    ]
