"""``CodeToolsAdapter``: definitions, protocol, pre-flight contract and the path-attack table."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import AgentCoreError
from agent_core.tools._builtin import CODE_TOOL_NAMES
from agent_core.tools._schema import check_schema, validate_arguments
from agent_core.tools.adapter import PreflightAdapter, ToolAdapter
from tests.fixtures.code_tools import CodeToolsHarness, error_code, make_harness

EXPECTED = {
    "code.read_file": ("readonly", ["code", "filesystem", "readonly"], "parallel"),
    "code.list_dir": ("readonly", ["code", "filesystem", "readonly"], "parallel"),
    "code.search": ("readonly", ["code", "filesystem", "readonly"], "parallel"),
    "code.write_file": ("write", ["code", "filesystem", "write"], "serial"),
    "code.edit_file": ("write", ["code", "filesystem", "write"], "serial"),
    "code.run_command": ("write", ["code", "dangerous"], "serial"),
}
INPUTS = {
    "code.read_file": {"path", "start_line", "max_lines"},
    "code.list_dir": {"path", "recursive", "limit"},
    "code.search": {"query", "path", "glob", "limit"},
    "code.write_file": {"path", "content", "create_dirs", "overwrite"},
    "code.edit_file": {"path", "edits", "unified_diff", "create_if_missing"},
    "code.run_command": {"argv", "cwd", "timeout_ms"},
}


@pytest.fixture
def h(tmp_path: Path) -> CodeToolsHarness:
    return make_harness(tmp_path)


def _closed(schema: Any) -> bool:
    if isinstance(schema, dict):
        if schema.get("type") == "object" and schema.get("additionalProperties") is not False:
            return False
        return all(_closed(v) for v in schema.values())
    if isinstance(schema, list):
        return all(_closed(v) for v in schema)
    return True


def test_definitions_match_contract(h: CodeToolsHarness) -> None:
    definitions = h.adapter.definitions()
    assert [d.name for d in definitions] == list(CODE_TOOL_NAMES) == list(EXPECTED)
    for d in definitions:
        permission, tags, concurrency = EXPECTED[d.name]
        assert (d.permission, d.tags, d.metadata["concurrency"]) == (permission, tags, concurrency), d.name
        assert d.metadata["source"] == "code"
        assert set(d.input_schema["properties"]) == INPUTS[d.name]
        assert _closed(d.input_schema), d.name
        check_schema(d.input_schema, where=d.name)  # the registry's core subset accepts it


def test_registry_validation_rejects_env_and_string_argv(h: CodeToolsHarness) -> None:
    schema = next(d for d in h.adapter.definitions() if d.name == "code.run_command").input_schema
    for bad in ({"argv": "echo hi"}, {"argv": ["x"], "env": {"A": "1"}}):
        with pytest.raises(AgentCoreError) as err:
            validate_arguments(schema, bad)
        assert err.value.code == "validation_error"
    edit = next(d for d in h.adapter.definitions() if d.name == "code.edit_file").input_schema
    with pytest.raises(AgentCoreError):
        validate_arguments(edit, {"path": "a", "edits": [{"old": "a", "new": "b"}], "dry_run": True})


async def test_adapter_protocol_and_unknown_tool(h: CodeToolsHarness) -> None:
    assert isinstance(h.adapter, ToolAdapter)
    adapter: PreflightAdapter = h.adapter
    assert adapter is h.adapter
    assert error_code(await h.run("code.nope")) == "tool_not_available"
    await h.adapter.close()
    await h.adapter.close()


async def test_explicit_null_behaves_like_omission(h: CodeToolsHarness) -> None:
    (h.project / "a.txt").write_text("x\n")
    data = await h.ok("code.read_file", path="a.txt", start_line=None, max_lines=None)
    assert data["content"] == "x"
    pre = await h.preflight("code.search", query="x", path=None, glob=None, limit=None)
    assert pre.target_scope == str(h.project)


async def test_sync_target_scope_and_paths(h: CodeToolsHarness) -> None:
    from tests.fixtures.tool_sink import make_ctx

    call = h.call("code.write_file", {"path": "x/y.txt", "content": ""})
    ctx = make_ctx(h.scope, h.sink, call.name, call.tool_call_id)
    assert h.adapter.target_scope(call, ctx) == str(h.project / "x" / "y.txt")
    assert h.adapter.target_paths(call, ctx) == [h.project / "x" / "y.txt"]
    bad = h.call("code.write_file", {"path": "a\x00", "content": ""})
    assert h.adapter.target_scope(bad, ctx) is None and h.adapter.target_paths(bad, ctx) == []


async def test_target_scope_is_the_resolved_file(h: CodeToolsHarness) -> None:
    """Case H11."""
    (h.project / "a").mkdir()
    (h.project / "b").mkdir()
    x = await h.preflight("code.write_file", path="a/x.txt", content="")
    same = await h.preflight("code.write_file", path="./a/../a/x.txt", content="")
    other = await h.preflight("code.write_file", path="b/x.txt", content="")
    edit = await h.preflight(
        "code.edit_file", path="a/x.txt", create_if_missing=True, edits=[{"old": "", "new": "x"}]
    )
    assert x.target_scope == same.target_scope == edit.target_scope == str(h.project / "a" / "x.txt")
    assert other.target_scope != x.target_scope


# --- the path-attack table --------------------------------------------------------------------------------


@dataclass
class World:
    root: Path
    project: Path
    outside: Path
    home: Path


@dataclass
class Attack:
    id: str
    tool: str
    args: Callable[[World], dict[str, Any]]
    expect: str
    """``outside`` | ``invalid`` | ``hard:<code>`` | ``sensitive`` | ``confined``"""
    setup: Callable[[World], None] = field(default=lambda w: None)


def link(src: str, dst: Callable[[World], str | Path]) -> Callable[[World], None]:
    def make(w: World) -> None:
        path = w.project / src
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(dst(w))

    return make


def write(rel: str, text: str = "x\n") -> Callable[[World], None]:
    def make(w: World) -> None:
        path = w.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return make


def both(*steps: Callable[[World], None]) -> Callable[[World], None]:
    def make(w: World) -> None:
        for step in steps:
            step(w)

    return make


W = "code.write_file"
E = "code.edit_file"
R = "code.run_command"
RD = "code.read_file"
L = "code.list_dir"
S = "code.search"
ETC_TARGET = "/etc/soong-agent-attack-test"


def wr(path: Callable[[World], str]) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"path": path(w), "content": "pwned", "overwrite": True}


def cmd(cwd: Callable[[World], str]) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"argv": ["/bin/sh", "-c", "echo pwned > pwned.txt"], "cwd": cwd(w)}


def rd(path: Callable[[World], str]) -> Callable[[World], dict[str, Any]]:
    return lambda w: {"path": path(w)}


ATTACKS = [
    Attack("w01-dotdot", W, wr(lambda w: "../outside/new.txt"), "outside"),
    Attack("w02-dotdot-nested", W, wr(lambda w: "a/b/../../../outside/new.txt"), "outside"),
    Attack("w03-absolute-outside", W, wr(lambda w: str(w.outside / "new.txt")), "outside"),
    Attack("w04-absolute-etc", W, wr(lambda w: ETC_TARGET), "outside"),
    Attack(
        "w05-symlink-to-etc",
        W,
        wr(lambda w: "etc_link/soong-agent-attack-test"),
        "outside",
        link("etc_link", lambda w: "/etc"),
    ),
    Attack(
        "w06-symlink-chain",
        W,
        wr(lambda w: "c1/new.txt"),
        "outside",
        both(link("c2", lambda w: w.outside), link("c1", lambda w: w.project / "c2")),
    ),
    Attack(
        "w07-symlinked-parent", W, wr(lambda w: "sub/new.txt"), "outside", link("sub", lambda w: w.outside)
    ),
    Attack(
        "w08-dangling-symlink",
        W,
        wr(lambda w: "dangle"),
        "outside",
        link("dangle", lambda w: w.outside / "by-dangle.txt"),
    ),
    Attack(
        "w09-relative-symlink", W, wr(lambda w: "rel/new.txt"), "outside", link("rel", lambda w: "../outside")
    ),
    Attack(
        "w10-symlink-to-outside-file",
        W,
        wr(lambda w: "f.txt"),
        "outside",
        link("f.txt", lambda w: w.outside / "existing.txt"),
    ),
    Attack("w11-tilde", W, wr(lambda w: "~/new.txt"), "outside"),
    Attack("w12-tilde-dotfile", W, wr(lambda w: "~/.bashrc"), "outside"),
    Attack("w13-trailing-slash", W, wr(lambda w: "../outside/newdir/"), "outside"),
    Attack("w14-proc-self-root", W, wr(lambda w: f"/proc/self/root{w.outside}/new.txt"), "outside"),
    Attack("w15-double-slash", W, wr(lambda w: "//" + str(w.outside)[1:] + "/new.txt"), "outside"),
    Attack("w16-dot-segments", W, wr(lambda w: "./././../outside/new.txt"), "outside"),
    Attack("w17-sibling-prefix", W, wr(lambda w: str(w.root / "project2" / "new.txt")), "outside"),
    Attack(
        "w18-symlink-to-parent",
        W,
        wr(lambda w: "up/outside/new.txt"),
        "outside",
        link("up", lambda w: w.root),
    ),
    Attack("w19-proc-self-cwd", W, wr(lambda w: "/proc/self/cwd/soong-attack.txt"), "outside"),
    Attack(
        "w20-symlink-loop",
        W,
        wr(lambda w: "l1/x"),
        "invalid",
        both(link("l1", lambda w: "l2"), link("l2", lambda w: "l1")),
    ),
    Attack("w21-nul-byte", W, wr(lambda w: "a\x00../../outside/x"), "invalid"),
    Attack("w22-long-component", W, wr(lambda w: "x" * 300), "invalid"),
    Attack("w23-long-path", W, wr(lambda w: "a/" * 2100 + "b"), "invalid"),
    Attack("w24-empty", W, wr(lambda w: ""), "invalid"),
    Attack("w25-other-users-home", W, wr(lambda w: "~root/x"), "invalid"),
    Attack("w26-two-dot-leader", W, wr(lambda w: "\u2025/x.txt"), "confined"),
    Attack("w27-fullwidth-dots", W, wr(lambda w: "\uff0e\uff0e/x.txt"), "confined"),
    Attack("w28-fullwidth-solidus", W, wr(lambda w: "..\uff0foutside\uff0fx.txt"), "confined"),
    Attack(
        "w29-hard-link",
        W,
        wr(lambda w: "hl.txt"),
        "confined",
        lambda w: os.link(w.outside / "existing.txt", w.project / "hl.txt"),
    ),
    Attack(
        "w30-inside-symlink-control",
        W,
        wr(lambda w: "in/x.txt"),
        "confined",
        both(write("real/keep"), link("in", lambda w: w.project / "real")),
    ),
    Attack("w31-unicode-nfd-name", W, wr(lambda w: "cafe\u0301/x.txt"), "confined"),
    Attack(
        "e01-edit-symlinked-parent",
        E,
        lambda w: {"path": "sub/existing.txt", "edits": [{"old": "x", "new": "pwned"}]},
        "outside",
        link("sub", lambda w: w.outside),
    ),
    Attack(
        "e02-edit-dotdot",
        E,
        lambda w: {"path": "../outside/existing.txt", "edits": [{"old": "x", "new": "p"}]},
        "outside",
    ),
    Attack(
        "e03-diff-header-escape",
        E,
        lambda w: {
            "path": "a.txt",
            "unified_diff": "--- a/../outside/existing.txt\n+++ b/../outside/existing.txt\n@@ -1 +1 @@\n-x\n+p\n",
        },
        "hard:patch_path_mismatch",
        write("a.txt"),
    ),
    Attack(
        "e04-diff-header-absolute",
        E,
        lambda w: {
            "path": "a.txt",
            "unified_diff": f"--- {w.outside}/existing.txt\n+++ {w.outside}/existing.txt\n@@ -1 +1 @@\n-x\n+p\n",
        },
        "hard:patch_path_mismatch",
        write("a.txt"),
    ),
    Attack("r01-cwd-dotdot", R, cmd(lambda w: ".."), "hard:write_outside_allowed_roots"),
    Attack(
        "r02-cwd-symlink",
        R,
        cmd(lambda w: "cwdlink"),
        "hard:write_outside_allowed_roots",
        link("cwdlink", lambda w: w.outside),
    ),
    Attack(
        "r03-cwd-proc-root",
        R,
        cmd(lambda w: f"/proc/self/root{w.outside}"),
        "hard:write_outside_allowed_roots",
    ),
    Attack("r04-cwd-tilde", R, cmd(lambda w: "~"), "hard:write_outside_allowed_roots"),
    Attack("r05-cwd-etc", R, cmd(lambda w: "/etc"), "hard:write_outside_allowed_roots"),
    Attack("r06-cwd-nul", R, cmd(lambda w: "sub\x00"), "invalid"),
    Attack("s01-ssh-key", RD, rd(lambda w: "~/.ssh/id_rsa"), "sensitive"),
    Attack("s02-gnupg", RD, rd(lambda w: "~/.gnupg/x"), "sensitive"),
    Attack("s03-aws", RD, rd(lambda w: "~/.aws/credentials"), "sensitive"),
    Attack("s04-gcloud", RD, rd(lambda w: "~/.config/gcloud/x"), "sensitive"),
    Attack("s05-dotenv", RD, rd(lambda w: ".env"), "sensitive", write(".env")),
    Attack("s06-dotenv-local", RD, rd(lambda w: ".env.local"), "sensitive", write(".env.local")),
    Attack("s07-pem", RD, rd(lambda w: "k.pem"), "sensitive", write("k.pem")),
    Attack("s08-key", RD, rd(lambda w: "deep/k.key"), "sensitive", write("deep/k.key")),
    Attack(
        "s09-innocent-symlink-to-key",
        RD,
        rd(lambda w: "innocent.txt"),
        "sensitive",
        link("innocent.txt", lambda w: w.home / ".ssh" / "id_rsa"),
    ),
    Attack(
        "s10-dotenv-symlink-to-plain",
        RD,
        rd(lambda w: ".env"),
        "sensitive",
        both(write("plain.txt"), link(".env", lambda w: "plain.txt")),
    ),
    Attack("s11-proc-root-ssh", RD, rd(lambda w: f"/proc/self/root{w.home}/.ssh/id_rsa"), "sensitive"),
    Attack("s12-dotdot-inside-ssh", RD, rd(lambda w: "~/.ssh/../.ssh/id_rsa"), "sensitive"),
    Attack("s13-fullwidth-dotenv", RD, rd(lambda w: "\uff0eenv"), "sensitive", write("\uff0eenv")),
    Attack(
        "s14-symlinked-home-dir",
        RD,
        rd(lambda w: "h/.aws/credentials"),
        "sensitive",
        link("h", lambda w: w.home),
    ),
    Attack("s15-list-ssh", L, rd(lambda w: "~/.ssh"), "sensitive"),
    Attack("s16-list-ssh-trailing-slash", L, rd(lambda w: "~/.ssh/"), "sensitive"),
    Attack("s17-search-gnupg", S, lambda w: {"query": "x", "path": "~/.gnupg"}, "sensitive"),
    Attack("s18-search-dotenv", S, lambda w: {"query": "x", "path": ".env"}, "sensitive", write(".env")),
    Attack("s19-relative-to-home-key", RD, rd(lambda w: "../home_user/.ssh/id_rsa"), "sensitive"),
    Attack("s20-list-gcloud-dir", L, rd(lambda w: "~/.config/gcloud"), "sensitive"),
]


def snapshot(*roots: Path) -> dict[str, tuple[bool, bytes | None]]:
    state: dict[str, tuple[bool, bytes | None]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                state[str(p)] = (
                    p.is_symlink(),
                    p.read_bytes() if p.is_file() and not p.is_symlink() else None,
                )
    return state


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.id for a in ATTACKS])
async def test_path_attack_table(attack: Attack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = (tmp_path / "home_user").resolve()
    for rel in (".ssh/id_rsa", ".gnupg/x", ".aws/credentials", ".config/gcloud/x"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text("secret material\n")
    monkeypatch.setenv("HOME", str(home))
    h = make_harness(tmp_path)
    world = World(root=h.root, project=h.project, outside=h.root / "outside", home=home)
    world.outside.mkdir()
    (world.outside / "existing.txt").write_text("x\n")
    (h.root / "project2").mkdir()
    attack.setup(world)
    args = attack.args(world)
    before = snapshot(world.outside, home, h.root / "project2")
    cwd_marker = Path.cwd() / "soong-attack.txt"

    if attack.expect in ("invalid",) or attack.expect.startswith("hard:"):
        code = "validation_error" if attack.expect == "invalid" else attack.expect.split(":", 1)[1]
        err = await h.preflight_error(attack.tool, **args)
        assert err.code == code
        assert await h.error(attack.tool, **args) == code
    elif attack.expect == "outside":
        pre = await h.preflight(attack.tool, **args)
        assert pre.outside_write_roots, pre
        assert pre.target_paths and not any(str(p).startswith(str(h.project) + "/") for p in pre.target_paths)
        assert await h.error(attack.tool, **args) == "write_outside_allowed_roots"
    elif attack.expect == "confined":
        pre = await h.preflight(attack.tool, **args)
        assert not pre.outside_write_roots
        result = await h.ok(attack.tool, **args)
        assert Path(result["path"]).is_relative_to(h.project)
    elif attack.expect == "sensitive":
        pre = await h.preflight(attack.tool, **args)
        assert pre.sensitive, pre
    else:  # pragma: no cover - table typo
        raise AssertionError(attack.expect)

    assert snapshot(world.outside, home, h.root / "project2") == before
    assert not Path(ETC_TARGET).exists() and not cwd_marker.exists()
    assert not (world.outside / "pwned.txt").exists()


def test_attack_table_is_large_enough() -> None:
    assert len(ATTACKS) >= 40 and len({a.id for a in ATTACKS}) == len(ATTACKS)


H14_FILES = [
    "~/.ssh/id_rsa",
    "~/.gnupg/x",
    "~/.aws/credentials",
    "~/.config/gcloud/x",
    "k.pem",
    "k.key",
    ".env",
    ".env.local",
]
H14_DIRS = ["~/.ssh", "~/.gnupg", "~/.aws", "~/.config/gcloud"]


@pytest.mark.parametrize("target", H14_FILES)
async def test_sensitive_reads_and_searches_are_flagged(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cases H14, H2: The tool half of H14/H2: pre-flight marks the target sensitive (the gate then asks or
    denies)."""
    monkeypatch.setenv("HOME", str(tmp_path / "fake_home"))
    h = make_harness(tmp_path)
    path = Path(os.path.expanduser(target)) if target.startswith("~") else h.project / target
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("needle secret\n")
    read = await h.preflight("code.read_file", path=target)
    search = await h.preflight("code.search", query="needle", path=target)
    assert read.sensitive and search.sensitive
    assert read.target_scope == search.target_scope == str(path.resolve())
    assert search.outside_project_search is target.startswith("~")
    unrelated = await h.preflight("code.read_file", path=str(path.parent / "README"))
    assert unrelated.sensitive is target.startswith("~")  # everything below ~/.ssh etc. is sensitive


@pytest.mark.parametrize("target", H14_DIRS)
async def test_sensitive_directory_listing_is_flagged(
    target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case H14."""
    monkeypatch.setenv("HOME", str(tmp_path / "fake_home"))
    h = make_harness(tmp_path)
    Path(os.path.expanduser(target)).mkdir(parents=True)
    assert (await h.preflight("code.list_dir", path=target)).sensitive
    assert (await h.preflight("code.list_dir", path=target, recursive=True)).sensitive
    assert not (await h.preflight("code.list_dir", path="~")).sensitive
