"""``code.write_file`` and ``code.edit_file`` (docs/tools.md#codewrite_file, docs/tools.md#codeedit_file,
docs/tools.md#write-roots)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

import pytest

from agent_core.tools._builtin.patch import apply_patch, parse_unified_diff
from tests.fixtures.code_tools import CodeToolsHarness, make_harness

WRITE = "code.write_file"
EDIT = "code.edit_file"


@pytest.fixture
def h(tmp_path: Path) -> CodeToolsHarness:
    return make_harness(tmp_path)


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".soong-tmp")]


async def test_write_conflict_leaves_file_unchanged(h: CodeToolsHarness) -> None:
    """Case G7."""
    target = h.project / "a.txt"
    target.write_text("old")
    err = await h.preflight_error(WRITE, path="a.txt", content="new")
    assert err.code == "path_conflict"
    assert await h.error(WRITE, path="a.txt", content="new") == "path_conflict"
    assert target.read_text() == "old"
    (h.project / "d").mkdir()
    assert (await h.preflight_error(WRITE, path="d", content="x", overwrite=True)).code == "path_conflict"
    assert await h.error(WRITE, path="d", content="x", overwrite=True) == "path_conflict"


async def test_write_creates_dirs_and_overwrites(h: CodeToolsHarness) -> None:
    """Case G8."""
    content = "héllo wörld\n"
    data = await h.ok(WRITE, path="new/dir/a.txt", content=content)
    target = h.project / "new" / "dir" / "a.txt"
    assert data == {
        "path": str(target),
        "bytes_written": len(content.encode()),
        "created": True,
        "overwritten": False,
    }
    assert target.read_text() == content
    target.chmod(0o640)
    again = await h.ok(WRITE, path="new/dir/a.txt", content="replaced", overwrite=True)
    assert again["overwritten"] is True and again["created"] is False and target.read_text() == "replaced"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # mode bits kept
    assert leftovers(target.parent) == []
    assert await h.error(WRITE, path="nodir/x.txt", content="x", create_dirs=False) == "file_not_found"
    assert not (h.project / "nodir").exists()
    (h.project / "file").write_text("x")
    assert await h.error(WRITE, path="file/child.txt", content="x") == "path_conflict"


async def test_write_through_symlink_inside_roots_keeps_link(h: CodeToolsHarness) -> None:
    real = h.project / "real.txt"
    real.write_text("old")
    link = h.project / "link.txt"
    link.symlink_to(real)
    data = await h.ok(WRITE, path="link.txt", content="new", overwrite=True)
    assert data["path"] == str(real) and real.read_text() == "new" and link.is_symlink()


async def test_write_hard_link_to_outside_file_is_not_written_through(
    h: CodeToolsHarness, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    os.link(outside, h.project / "hl.txt")
    await h.ok(WRITE, path="hl.txt", content="replaced", overwrite=True)
    assert outside.read_text() == "precious" and (h.project / "hl.txt").read_text() == "replaced"


async def test_write_outside_roots_flagged_refused_and_allowed_explicitly(
    h: CodeToolsHarness, tmp_path: Path
) -> None:
    """Case G21."""
    outside = tmp_path / "outside"
    outside.mkdir()
    pre = await h.preflight(WRITE, path=str(outside / "x.txt"), content="x")
    assert pre.outside_write_roots and pre.target_scope == str(outside / "x.txt")
    assert await h.error(WRITE, path=str(outside / "x.txt"), content="x") == "write_outside_allowed_roots"
    assert not (outside / "x.txt").exists()
    ok = await h.run(WRITE, path=str(outside / "x.txt"), content="x", allowed_outside_roots=True)
    assert not ok.is_error and (outside / "x.txt").read_text() == "x"
    # a symlink resolving outside the project counts as outside
    (h.project / "esc").symlink_to(outside)
    assert (await h.preflight(WRITE, path="esc/y.txt", content="y")).outside_write_roots
    assert await h.error(WRITE, path="esc/y.txt", content="y") == "write_outside_allowed_roots"
    assert not (outside / "y.txt").exists()


async def test_configured_write_root_is_inside(tmp_path: Path) -> None:
    """Case G21."""
    extra = (tmp_path / "extra").resolve()
    extra.mkdir()
    h = make_harness(tmp_path / "w", allowed_write_roots=[str(extra)])
    pre = await h.preflight(WRITE, path=str(extra / "a.txt"), content="x")
    assert not pre.outside_write_roots
    assert (await h.ok(WRITE, path=str(extra / "a.txt"), content="x"))["created"]


async def test_tmp_writes_follow_allow_tmp_write(tmp_path: Path) -> None:
    """Case G21."""
    tmp_target = Path(tempfile.gettempdir()).resolve() / f"soong-tmpwrite-{os.getpid()}-{tmp_path.name}.txt"
    project_parent = tmp_path / "not_tmp_sensitive"
    denied = make_harness(project_parent / "a")
    assert (await denied.preflight(WRITE, path=str(tmp_target), content="x")).outside_write_roots
    allowed = make_harness(project_parent / "b", allow_tmp_write=True)
    try:
        assert not (await allowed.preflight(WRITE, path=str(tmp_target), content="x")).outside_write_roots
        assert (await allowed.ok(WRITE, path=str(tmp_target), content="x"))["created"]
    finally:
        tmp_target.unlink(missing_ok=True)


async def test_write_preflight_flags_sensitive_target(h: CodeToolsHarness) -> None:
    pre = await h.preflight(WRITE, path=".env", content="A=1")
    assert pre.sensitive and not pre.outside_write_roots


async def test_write_argument_errors(h: CodeToolsHarness) -> None:
    assert await h.error(WRITE, path="a.txt") == "validation_error"
    assert await h.error(WRITE, path="a.txt", content=3) == "validation_error"
    assert await h.error(WRITE, path="a.txt", content="x", mode="w") == "validation_error"
    assert await h.error(WRITE, path="a.txt", content="\ud800") == "validation_error"
    assert not (h.project / "a.txt").exists()


# --- edit_file: exact edits ----------------------------------------------------------------------------


async def test_unique_edit(h: CodeToolsHarness) -> None:
    """Case G9."""
    f = h.project / "a.py"
    f.write_text("def f():\n    return 1\n")
    data = await h.ok(EDIT, path="a.py", edits=[{"old": "return 1", "new": "return 42"}])
    assert data == {"path": str(f), "edits_applied": 1, "bytes_written": f.stat().st_size}
    assert f.read_text() == "def f():\n    return 42\n"


async def test_ambiguous_edit_unchanged(h: CodeToolsHarness) -> None:
    """Case G10."""
    f = h.project / "a.txt"
    f.write_text("x = 1\nx = 1\n")
    assert await h.error(EDIT, path="a.txt", edits=[{"old": "x = 1", "new": "y"}]) == "ambiguous_edit"
    assert f.read_text() == "x = 1\nx = 1\n"
    f.write_text("aaa")  # overlapping occurrences are ambiguous too
    assert await h.error(EDIT, path="a.txt", edits=[{"old": "aa", "new": "b"}]) == "ambiguous_edit"


async def test_replace_all(h: CodeToolsHarness) -> None:
    """Case G11."""
    f = h.project / "a.txt"
    f.write_text("x x x\n")
    data = await h.ok(EDIT, path="a.txt", edits=[{"old": "x", "new": "yy", "replace_all": True}])
    assert f.read_text() == "yy yy yy\n" and data["edits_applied"] == 1


async def test_sequential_edits_and_empty_old(h: CodeToolsHarness) -> None:
    f = h.project / "a.txt"
    f.write_text("one two")
    edits = [{"old": "one", "new": "1"}, {"old": "1 two", "new": "done"}]
    assert (await h.ok(EDIT, path="a.txt", edits=edits))["edits_applied"] == 2 and f.read_text() == "done"
    assert await h.error(EDIT, path="a.txt", edits=[{"old": "", "new": "x"}]) == "validation_error"
    empty = h.project / "empty.txt"
    empty.write_text("")
    await h.ok(EDIT, path="empty.txt", edits=[{"old": "", "new": "filled\n"}])
    assert empty.read_text() == "filled\n"
    created = await h.ok(EDIT, path="made/new.txt", create_if_missing=True, edits=[{"old": "", "new": "hi"}])
    assert (h.project / "made" / "new.txt").read_text() == "hi" and created["bytes_written"] == 2


async def test_edit_error_matrix_leaves_file_unchanged(h: CodeToolsHarness) -> None:
    """Case G20."""
    f = h.project / "a.txt"
    original = "alpha\nbeta\ngamma\n"
    f.write_text(original)
    diff = "--- a/a.txt\n+++ b/a.txt\n@@ -1,1 +1,1 @@\n-alpha\n+ALPHA\n"
    cases = [
        ({"edits": [{"old": "missing", "new": "x"}]}, "text_not_found"),
        ({"edits": [{"old": "beta", "new": "B"}, {"old": "missing", "new": "x"}]}, "text_not_found"),
        ({"edits": [{"old": "beta", "new": "B"}], "unified_diff": diff}, "validation_error"),
        ({}, "validation_error"),
        ({"edits": []}, "validation_error"),
        ({"edits": [{"old": "beta"}]}, "validation_error"),
        ({"edits": [{"old": "beta", "new": "b", "regex": True}]}, "validation_error"),
        ({"unified_diff": diff.replace("-alpha", "-ALPHA!")}, "patch_apply_failed"),
        ({"unified_diff": diff + "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n"}, "validation_error"),
        (
            {
                "unified_diff": "diff --git a/a.txt b/c.txt\nsimilarity index 90%\nrename from a.txt\nrename to c.txt\n"
            },
            "validation_error",
        ),
        (
            {"unified_diff": "diff --git a/a.txt b/a.txt\ncopy from a.txt\ncopy to c.txt\n"},
            "validation_error",
        ),
        (
            {"unified_diff": "--- a/a.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-alpha\n-beta\n-gamma\n"},
            "validation_error",
        ),
        (
            {"unified_diff": "diff --git a/a.txt b/a.txt\nBinary files a/a.txt and b/a.txt differ\n"},
            "validation_error",
        ),
        ({"unified_diff": "diff --git a/a.txt b/a.txt\nGIT binary patch\nliteral 0\n"}, "validation_error"),
        (
            {"unified_diff": "diff --git a/a.txt b/a.txt\nold mode 100644\nnew mode 100755\n"},
            "validation_error",
        ),
        ({"unified_diff": "not a diff at all\n"}, "validation_error"),
        ({"unified_diff": "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n-alpha\n"}, "validation_error"),
        ({"unified_diff": "--- /dev/null\n+++ b/a.txt\n@@ -0,0 +1 @@\n+x\n"}, "validation_error"),
        ({"edits": [{"old": "beta", "new": "b"}], "dry_run": True}, "validation_error"),
    ]
    for args, code in cases:
        assert await h.error(EDIT, path="a.txt", **args) == code, args
        assert f.read_text() == original, args
    assert await h.error(EDIT, path="missing.txt", edits=[{"old": "a", "new": "b"}]) == "file_not_found"
    assert not (h.project / "missing.txt").exists()
    (h.project / "bin.dat").write_bytes(b"\x00\x01")
    assert await h.error(EDIT, path="bin.dat", edits=[{"old": "a", "new": "b"}]) == "validation_error"
    assert leftovers(h.project) == []


# --- edit_file: unified diff ---------------------------------------------------------------------------


async def test_clean_unified_diff(h: CodeToolsHarness) -> None:
    """Case G12."""
    f = h.project / "src" / "m.py"
    f.parent.mkdir()
    f.write_text("a\nb\nc\nd\ne\nf\ng\nh\n")
    diff = (
        "diff --git a/src/m.py b/src/m.py\n"
        "index 123..456 100644\n"
        "--- a/src/m.py\t2024-01-01 00:00:00\n"
        "+++ b/src/m.py\n"
        "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        "@@ -6,3 +6,4 @@\n f\n g\n+g2\n h\n"
    )
    data = await h.ok(EDIT, path="src/m.py", unified_diff=diff)
    assert data["edits_applied"] == 2 and f.read_text() == "a\nB\nc\nd\ne\nf\ng\ng2\nh\n"
    assert data["bytes_written"] == f.stat().st_size


async def test_diff_path_mismatch(h: CodeToolsHarness) -> None:
    """Case G13."""
    a, b = h.project / "a.txt", h.project / "b.txt"
    a.write_text("x\n")
    b.write_text("x\n")
    diff = "--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-x\n+y\n"
    assert (await h.preflight_error(EDIT, path="a.txt", unified_diff=diff)).code == "patch_path_mismatch"
    assert await h.error(EDIT, path="a.txt", unified_diff=diff) == "patch_path_mismatch"
    assert a.read_text() == "x\n" and b.read_text() == "x\n"
    outside = "--- a/../outside.txt\n+++ b/../outside.txt\n@@ -1 +1 @@\n-x\n+y\n"
    assert await h.error(EDIT, path="a.txt", unified_diff=outside) == "patch_path_mismatch"


async def test_diff_headers_absolute_unprefixed_and_hunk_only(h: CodeToolsHarness) -> None:
    f = h.project / "a.txt"
    f.write_text("x\n")
    for header in (f"--- {f}\n+++ {f}\n", "--- a.txt\n+++ a.txt\n", ""):
        f.write_text("x\n")
        await h.ok(EDIT, path="a.txt", unified_diff=header + "@@ -1 +1 @@\n-x\n+y\n")
        assert f.read_text() == "y\n", header


async def test_diff_creation_with_dev_null(h: CodeToolsHarness) -> None:
    diff = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n"
    assert await h.error(EDIT, path="new.txt", unified_diff=diff) == "file_not_found"  # missing, no create
    data = await h.ok(EDIT, path="new.txt", unified_diff=diff, create_if_missing=True)
    assert (h.project / "new.txt").read_text() == "hello\nworld\n" and data["edits_applied"] == 1
    assert (
        await h.error(EDIT, path="new.txt", unified_diff=diff, create_if_missing=True) == "validation_error"
    )


def test_patch_offsets_no_fuzz_and_no_newline_markers() -> None:
    content = "".join(f"l{i}\n" for i in range(1, 21))
    shifted = parse_unified_diff("@@ -2,3 +2,3 @@\n l5\n-l6\n+L6\n l7\n")  # header says 2, text is at 5
    assert apply_patch(content, shifted) == content.replace("l6\n", "L6\n")
    fuzzy = parse_unified_diff("@@ -5,3 +5,3 @@\n l5\n-l6\n+L6\n l7x\n")
    with pytest.raises(Exception) as err:
        apply_patch(content, fuzzy)
    assert getattr(err.value, "code", None) == "patch_apply_failed"
    no_eol = "a\nb"
    add_eol = parse_unified_diff("@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n")
    assert apply_patch(no_eol, add_eol) == "a\nb\n"
    drop_eol = parse_unified_diff("@@ -1,2 +1,2 @@\n a\n-b\n+b\n\\ No newline at end of file\n")
    assert apply_patch("a\nb\n", drop_eol) == "a\nb"
    with pytest.raises(Exception) as err:
        apply_patch(no_eol, drop_eol)  # claims a final newline the file does not have
    assert getattr(err.value, "code", None) == "patch_apply_failed"
    insert_top = parse_unified_diff("@@ -0,0 +1 @@\n+top\n")
    assert apply_patch("x\n", insert_top) == "top\nx\n"
    delete_all = parse_unified_diff("@@ -1,2 +0,0 @@\n-a\n-b\n")
    assert apply_patch("a\nb\n", delete_all) == ""
    crlf = parse_unified_diff("@@ -1 +1 @@\n-a\r\n+b\r\n")
    assert apply_patch("a\r\n", crlf) == "b\r\n"
    default_counts = parse_unified_diff("@@ -2 +2 @@\n-b\n+c\n")
    assert apply_patch("a\nb\n", default_counts) == "a\nc\n"


def test_patch_parser_rejects_second_section_without_diff_line() -> None:
    text = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- a/y\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n"
    with pytest.raises(Exception) as err:
        parse_unified_diff(text)
    assert getattr(err.value, "code", None) == "validation_error"
    quoted = parse_unified_diff('--- "a/sp ace\\tx.txt"\n+++ "b/sp ace\\tx.txt"\n@@ -1 +1 @@\n-a\n+b\n')
    assert quoted.old_path == "a/sp ace\tx.txt"


async def test_edit_outside_roots_refused_without_explicit_allow(h: CodeToolsHarness, tmp_path: Path) -> None:
    outside = tmp_path / "o.txt"
    outside.write_text("x\n")
    args = {"path": str(outside), "edits": [{"old": "x", "new": "y"}]}
    assert (await h.preflight(EDIT, **args)).outside_write_roots
    assert await h.error(EDIT, **args) == "write_outside_allowed_roots"
    assert outside.read_text() == "x\n"
    assert not (await h.run(EDIT, allowed_outside_roots=True, **args)).is_error
    assert outside.read_text() == "y\n"


def test_exclusive_atomic_write_never_clobbers(tmp_path: Path) -> None:
    from agent_core.tools._builtin.fileio import atomic_write

    target = tmp_path / "t.txt"
    atomic_write(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        atomic_write(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first" and leftovers(tmp_path) == []
    atomic_write(target, b"third")
    assert target.read_bytes() == b"third" and leftovers(tmp_path) == []


async def test_write_race_with_concurrent_creation_is_path_conflict(
    h: CodeToolsHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file appears between the last conflict check and the write: nothing is clobbered."""
    from agent_core.tools._builtin import write_file as module

    real = module.atomic_write

    def racing(target: Path, data: bytes, *, exclusive: bool = False) -> None:
        target.write_text("someone else")
        real(target, data, exclusive=exclusive)

    monkeypatch.setattr(module, "atomic_write", racing)
    assert await h.error(WRITE, path="race.txt", content="mine") == "path_conflict"
    assert (h.project / "race.txt").read_text() == "someone else"
