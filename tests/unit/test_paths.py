"""Path normalisation, write roots, sensitive matching and the instruction-file predicate
(docs/tools.md#paths)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from agent_core._frontmatter import split_frontmatter
from agent_core.config.schema import DEFAULT_SENSITIVE_PATHS
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._instruction_files import match_instruction_file
from agent_core.tools._paths import (
    SKIP_DIRS,
    SensitiveMatcher,
    expand_user,
    is_within,
    lexical_path,
    resolve_path,
    resolve_target,
    write_roots,
)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    project = (tmp_path / "project").resolve()
    project.mkdir()
    return project


def test_relative_paths_join_project_and_normalise(base: Path) -> None:
    assert resolve_path("a/b.txt", base=base) == base / "a" / "b.txt"
    assert resolve_path("./a/./b/../c.txt", base=base) == base / "a" / "c.txt"
    assert resolve_path(".", base=base) == base
    assert resolve_path("a/", base=base) == base / "a"
    assert resolve_path(str(base / "x"), base=Path("/")) == base / "x"


def test_tilde_expands_to_os_home_only(base: Path) -> None:
    home = Path(os.path.expanduser("~"))
    assert resolve_path("~", base=base) == home.resolve()
    assert resolve_path("~/notes.txt", base=base) == home.resolve() / "notes.txt"
    assert expand_user("x/~/y") == "x/~/y"
    with pytest.raises(AgentCoreError) as err:
        expand_user("~root/x")
    assert err.value.code == ErrorCode.validation_error


def test_nonexistent_target_resolves_nearest_existing_ancestor(base: Path, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (base / "link").symlink_to(real)
    assert (
        resolve_path("link/new/deeper/file.txt", base=base) == real.resolve() / "new" / "deeper" / "file.txt"
    )


def test_symlinks_resolved_component_wise_including_dangling_and_relative(base: Path, tmp_path: Path) -> None:
    outside = (tmp_path / "outside").resolve()
    outside.mkdir()
    (base / "abs").symlink_to(outside)
    (base / "rel").symlink_to("../outside")
    (base / "dangling").symlink_to(outside / "missing.txt")
    (base / "chain1").symlink_to(base / "chain2")
    (base / "chain2").symlink_to("rel")
    assert resolve_path("abs/x", base=base) == outside / "x"
    assert resolve_path("rel/x", base=base) == outside / "x"
    assert resolve_path("dangling", base=base) == outside / "missing.txt"
    assert resolve_path("chain1/x", base=base) == outside / "x"


def test_dotdot_after_symlink_is_lexical_first(base: Path, tmp_path: Path) -> None:
    """docs/tools.md#paths: normalise ``..`` lexically, then resolve symlinks."""
    deep = tmp_path / "deep" / "er"
    deep.mkdir(parents=True)
    (base / "d").symlink_to(deep)
    assert resolve_path("d/../x", base=base) == base / "x"


def test_symlink_loop_is_validation_error(base: Path) -> None:
    (base / "l1").symlink_to(base / "l2")
    (base / "l2").symlink_to(base / "l1")
    with pytest.raises(AgentCoreError) as err:
        resolve_path("l1/x", base=base)
    assert err.value.code == ErrorCode.validation_error


@pytest.mark.parametrize(
    "raw",
    ["", "   ", "a\x00b", "x" * 300, "a/" * 2100 + "b", 42, None],
    ids=["empty", "blank", "nul", "long-name", "long-path", "int", "none"],
)
def test_bad_path_arguments_are_validation_errors(base: Path, raw: object) -> None:
    with pytest.raises(AgentCoreError) as err:
        resolve_path(raw, base=base)  # type: ignore[arg-type]
    assert err.value.code == ErrorCode.validation_error


def test_containment_is_component_wise() -> None:
    assert is_within(Path("/a/b/c"), Path("/a/b"))
    assert is_within(Path("/a/b"), Path("/a/b"))
    assert not is_within(Path("/a/bc"), Path("/a/b"))
    assert not is_within(Path("/a"), Path("/a/b"))


def test_write_roots_project_configured_and_tmp(base: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    roots = write_roots(base, [extra])
    assert roots == (base, extra.resolve())
    with_tmp = write_roots(base, [extra], allow_tmp=True)
    assert Path(tempfile.gettempdir()).resolve() in with_tmp
    assert Path("/tmp").resolve() in with_tmp
    assert len(with_tmp) == len(set(with_tmp))


def test_sensitive_defaults_prefixes_and_globs(base: Path) -> None:
    home = Path(os.path.expanduser("~")).resolve()
    matcher = SensitiveMatcher.from_entries(DEFAULT_SENSITIVE_PATHS)
    for rel in (".ssh", ".ssh/id_rsa", ".gnupg/x", ".aws/credentials", ".config/gcloud/x"):
        assert matcher.is_sensitive(home / rel), rel
    for name in ("k.pem", "k.key", ".env", ".env.local"):
        assert matcher.is_sensitive(base / "sub" / name), name
    for rel in (".sshx/id", ".config/gcloudy", "env", "a.env", "k.pem.txt", ".ENV"):
        assert not matcher.is_sensitive(base / rel if not rel.startswith(".ssh") else home / rel), rel
    assert not matcher.is_sensitive(home / ".config" / "gcloudy")


def test_sensitive_lexical_form_and_nfkc_are_checked(base: Path) -> None:
    matcher = SensitiveMatcher.from_entries(["*.pem", ".env"])
    assert matcher.is_sensitive(base / "real.txt", lexical=base / ".env")
    assert matcher.name_matches("\uff0eenv")  # fullwidth full stop + "env" normalises to ".env"
    assert not matcher.name_matches("environment")


def test_sensitive_placeholders_and_absolute_prefixes(base: Path, tmp_path: Path) -> None:
    soong_home = (tmp_path / "h").resolve()
    matcher = SensitiveMatcher.from_entries(
        ["${SOONG_AGENT_HOME}/secrets", "<project>/private", "/etc/shadow"],
        soong_home=soong_home,
        project_dir=base,
    )
    assert matcher.is_sensitive(soong_home / "secrets" / "a")
    assert matcher.is_sensitive(base / "private")
    assert matcher.is_sensitive(Path("/etc/shadow"))
    assert not matcher.is_sensitive(base / "privateer")


def test_resolve_target_keeps_both_forms(base: Path, tmp_path: Path) -> None:
    (base / "l").symlink_to(tmp_path)
    target = resolve_target("l/x", base=base)
    assert target.lexical == base / "l" / "x"
    assert target.resolved == tmp_path.resolve() / "x"
    assert lexical_path("//etc//x", base=base) == Path("/etc/x")


def test_skip_dirs_are_the_contract_list() -> None:
    assert {
        ".git",
        "node_modules",
        ".venv",
        "venv",
        "dist",
        "build",
        "target",
        ".next",
        ".cache",
        "__pycache__",
    } == SKIP_DIRS


# --- instruction-file predicate (docs/context.md#loading) ---------------------------------------------------


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    project = (tmp_path / "p").resolve()
    home = (tmp_path / "h").resolve()
    project.mkdir()
    home.mkdir()
    return project, home


@pytest.mark.parametrize(
    ("where", "rel", "scope"),
    [
        ("home", "CLAUDE.md", "user"),
        ("home", "AGENTS.md", "user"),
        ("home", "rules/a.md", "user"),
        ("home", "rules/sub/b.md", "user"),
        ("project", "CLAUDE.md", "project"),
        ("project", "AGENTS.md", "project"),
        ("project", "pkg/deep/AGENTS.md", "project"),
    ],
)
def test_instruction_sources_match(roots: tuple[Path, Path], where: str, rel: str, scope: str) -> None:
    project, home = roots
    base = home if where == "home" else project
    ref = match_instruction_file(base / rel, project_dir=project, home_dir=home)
    assert ref is not None and ref.scope == scope and ref.relative_path == rel


@pytest.mark.parametrize(
    ("where", "rel"),
    [
        ("home", "rules/a.txt"),
        ("home", "other/CLAUDE.md"),
        ("home", "rules/node_modules/x.md"),
        ("home", "claude.md"),
        ("project", "README.md"),
        ("project", ".soong-agent/rules/a.md"),
        ("project", ".soong-agent/CLAUDE.md"),
        ("project", "node_modules/pkg/CLAUDE.md"),
        ("project", ".git/AGENTS.md"),
        ("project", "a/build/CLAUDE.md"),
        ("project", "a/__pycache__/AGENTS.md"),
        ("project", "Claude.md"),
        ("project", ".soong-agent/plans/plan.md"),
    ],
)
def test_non_instruction_paths(roots: tuple[Path, Path], where: str, rel: str) -> None:
    project, home = roots
    base = home if where == "home" else project
    assert match_instruction_file(base / rel, project_dir=project, home_dir=home) is None


def test_every_skip_dir_excludes_instructions(roots: tuple[Path, Path]) -> None:
    project, home = roots
    for name in SKIP_DIRS:
        assert (
            match_instruction_file(project / name / "CLAUDE.md", project_dir=project, home_dir=home) is None
        )


def test_home_inside_project_is_not_a_project_source(tmp_path: Path) -> None:
    project = tmp_path.resolve()
    home = project / "home"
    assert match_instruction_file(home / "sub" / "CLAUDE.md", project_dir=project, home_dir=home) is None
    ref = match_instruction_file(home / "CLAUDE.md", project_dir=project, home_dir=home)
    assert ref is not None and ref.scope == "user"
    assert match_instruction_file(project / "CLAUDE.md", project_dir=project, home_dir=home) is not None


def test_frontmatter_split() -> None:
    fm = split_frontmatter("---\ntitle: x\ndate: 2024-01-02\n---\nbody\n")
    assert (
        fm.present
        and not fm.error
        and fm.data == {"title": "x", "date": "2024-01-02"}
        and fm.body == "body\n"
    )
    assert split_frontmatter("no front\n").data == {}
    assert split_frontmatter("no front\n").present is False
    broken = split_frontmatter("---\n: [unclosed\n---\nbody")
    assert broken.error and broken.data == {}
    assert split_frontmatter("---\n- a list\n---\n").error
    assert split_frontmatter("---\nnever closed\n").error


def test_is_within_matches_the_component_wise_definition() -> None:
    """The string fast path for absolute paths gives exactly ``path == root or root in path.parents``."""
    forms = ["/", "/a", "/a/b", "/a/bc", "/ab", "/a/b/c", "//a", "//a/b", "a", "a/b", ".", "/tmp/x y/z"]
    for path in forms:
        for root in forms:
            expected = Path(path) == Path(root) or Path(root) in Path(path).parents
            assert is_within(Path(path), Path(root)) == expected, (path, root)
