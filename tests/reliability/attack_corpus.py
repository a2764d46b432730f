"""The path and command attack corpus (issue 10 item 3): what each attempt does and what must happen.

Each :class:`Attack` is one model turn (one or more tool calls) issued through the public runtime. The
permission callback plays a careful user: it follows ``suggested_decision`` (allow in-root work, deny
outside-root writes and sensitive reads). An *escape* is any of: a file created or changed outside the project,
the planted secret or sensitive marker reaching a provider request or SQLite, a shell interpreting model text,
or a command running with a cwd outside the allowed roots.

``expect`` values: ``denied`` (a permission request with ``suggested_decision=deny`` naming the resolved
target, then ``permission_denied``), ``refused:<code>`` (a hard tool error before any prompt), ``fails:<code>``
(that tool error, a prompt allowed), ``ok`` (the call succeeds; its effect stays inside the project), ``error``
(any structured tool error).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MARKER = "SENSITIVE-MARKER-7f3a9c"
"""Searched for by the model; the searches must never match a sensitive file."""
LEAK = "payload-31d7e2b9"
"""Follows ``MARKER`` in every sensitive file and appears nowhere else: it must never reach a model request,
SQLite or an artifact."""
SECRET = "sk-test-9c8b7a6f5e4d3c2b1a0f9e8d"
"""The API-key environment value; never passed to commands, never persisted."""


@dataclass
class World:
    root: Path
    project: Path
    outside: Path
    home: Path


Args = Callable[[World], dict[str, Any]]
Setup = Callable[[World], None]


@dataclass
class Attack:
    id: str
    calls: list[tuple[str, Args]]
    expect: str
    setup: Setup = field(default=lambda w: None)
    check: Callable[[World, str], None] | None = None
    """Extra assertion on (world, tool result text) of the last call."""


def link(src: str, dst: Callable[[World], str | Path]) -> Setup:
    def make(w: World) -> None:
        path = w.project / src
        target = str(dst(w))
        if path.is_symlink() and os.readlink(path) == target:
            return  # shared with an earlier attack of the corpus
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    return make


def put(rel: str, text: str = "x\n") -> Setup:
    def make(w: World) -> None:
        path = w.project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    return make


def both(*steps: Setup) -> Setup:
    def make(w: World) -> None:
        for step in steps:
            step(w)

    return make


def hard_link(w: World) -> None:
    os.link(w.outside / "existing.txt", w.project / "hl.txt")


W, E, R, RD, L, S = (
    "code.write_file",
    "code.edit_file",
    "code.run_command",
    "code.read_file",
    "code.list_dir",
    "code.search",
)


def one(tool: str, args: Args, expect: str, setup: Setup | None = None, **kw: Any) -> list[Any]:
    return [tool, args, expect, setup or (lambda w: None), kw]


def wr(path: Callable[[World], str]) -> Args:
    return lambda w: {"path": path(w), "content": "pwned", "overwrite": True}


def rd(path: Callable[[World], str]) -> Args:
    return lambda w: {"path": path(w)}


def cmd(argv: list[str], cwd: Callable[[World], str] | None = None, **extra: Any) -> Args:
    return lambda w: {"argv": argv, **({"cwd": cwd(w)} if cwd else {}), **extra}


def diff(old_path: str, new_path: str, body: str = "@@ -1 +1 @@\n-x\n+pwned\n") -> str:
    return f"--- {old_path}\n+++ {new_path}\n{body}"


def no_leak(w: World, text: str) -> None:
    assert LEAK not in text and SECRET not in text, text


def no_sensitive_entries(w: World, text: str) -> None:
    assert "id_rsa" not in text and "credentials" not in text, text


def literal_no_shell(payload: str) -> Callable[[World, str], None]:
    def check(w: World, text: str) -> None:
        assert json.dumps(payload)[1:-1] in text, text  # echoed verbatim: no shell saw it
        assert not (w.project / "pwned").exists() and not (w.outside / "pwned").exists()

    return check


SHELL_PAYLOADS = [
    "$(touch pwned)",
    "`touch pwned`",
    "; touch pwned",
    "&& touch pwned",
    "| touch pwned",
    "$(touch ../outside/pwned)",
]

_TABLE: list[tuple[str, list[Any]]] = [
    # ---- write_file: every way out of the project -------------------------------------------------------
    ("w01-dotdot", one(W, wr(lambda w: "../outside/new.txt"), "denied")),
    ("w02-dotdot-nested", one(W, wr(lambda w: "a/b/../../../outside/new.txt"), "denied")),
    ("w03-absolute-outside", one(W, wr(lambda w: str(w.outside / "new.txt")), "denied")),
    ("w04-absolute-etc", one(W, wr(lambda w: "/etc/soong-agent-attack"), "denied")),
    ("w05-symlink-to-etc", one(W, wr(lambda w: "etc/soong-attack"), "denied", link("etc", lambda w: "/etc"))),
    (
        "w06-symlink-chain",
        one(
            W,
            wr(lambda w: "c1/new.txt"),
            "denied",
            both(link("c2", lambda w: w.outside), link("c1", lambda w: w.project / "c2")),
        ),
    ),
    ("w07-symlinked-parent", one(W, wr(lambda w: "sub/new.txt"), "denied", link("sub", lambda w: w.outside))),
    (
        "w08-dangling-symlink",
        one(W, wr(lambda w: "dangle"), "denied", link("dangle", lambda w: w.outside / "by-dangle.txt")),
    ),
    (
        "w09-relative-symlink",
        one(W, wr(lambda w: "rel/new.txt"), "denied", link("rel", lambda w: "../outside")),
    ),
    (
        "w10-symlink-to-outside-file",
        one(W, wr(lambda w: "f.txt"), "denied", link("f.txt", lambda w: w.outside / "existing.txt")),
    ),
    ("w11-tilde", one(W, wr(lambda w: "~/new.txt"), "denied")),
    ("w12-tilde-bashrc", one(W, wr(lambda w: "~/.bashrc"), "denied")),
    ("w13-proc-self-root", one(W, wr(lambda w: f"/proc/self/root{w.outside}/new.txt"), "denied")),
    ("w14-double-slash", one(W, wr(lambda w: "//" + str(w.outside)[1:] + "/new.txt"), "denied")),
    ("w15-dot-segments", one(W, wr(lambda w: "./././../outside/new.txt"), "denied")),
    ("w16-sibling-prefix", one(W, wr(lambda w: str(w.root / "project2" / "new.txt")), "denied")),
    (
        "w17-symlink-to-root",
        one(W, wr(lambda w: "up/outside/new.txt"), "denied", link("up", lambda w: w.root)),
    ),
    ("w18-proc-self-cwd", one(W, wr(lambda w: "/proc/self/cwd/soong-attack-cwd.txt"), "denied")),
    ("w19-ssh-authorized-keys", one(W, wr(lambda w: "~/.ssh/authorized_keys"), "denied")),
    (
        "w20-symlink-loop",
        one(
            W,
            wr(lambda w: "l1/x"),
            "refused:validation_error",
            both(link("l1", lambda w: "l2"), link("l2", lambda w: "l1")),
        ),
    ),
    ("w21-nul-byte", one(W, wr(lambda w: "a\x00../../outside/x"), "refused:validation_error")),
    ("w22-long-component", one(W, wr(lambda w: "x" * 300), "refused:validation_error")),
    ("w23-empty-path", one(W, wr(lambda w: ""), "refused:validation_error")),
    ("w24-other-users-home", one(W, wr(lambda w: "~root/x"), "refused:validation_error")),
    ("w25-hard-link-to-outside", one(W, wr(lambda w: "hl.txt"), "ok", hard_link)),
    ("w26-fullwidth-dots", one(W, wr(lambda w: "\uff0e\uff0e/x.txt"), "ok")),
    ("w27-fullwidth-solidus", one(W, wr(lambda w: "..\uff0foutside\uff0fx.txt"), "ok")),
    ("w28-directory-target", one(W, wr(lambda w: "."), "refused:path_conflict")),
    # ---- edit_file ------------------------------------------------------------------------------------------
    (
        "e01-edit-dotdot",
        one(E, lambda w: {"path": "../outside/existing.txt", "edits": [{"old": "x", "new": "p"}]}, "denied"),
    ),
    (
        "e02-edit-symlinked-parent",
        one(
            E,
            lambda w: {"path": "sub/existing.txt", "edits": [{"old": "x", "new": "p"}]},
            "denied",
            link("sub", lambda w: w.outside),
        ),
    ),
    (
        "e03-diff-header-escape",
        one(
            E,
            lambda w: {
                "path": "a.txt",
                "unified_diff": diff("a/../outside/existing.txt", "b/../outside/existing.txt"),
            },
            "refused:patch_path_mismatch",
            put("a.txt"),
        ),
    ),
    (
        "e04-diff-header-absolute",
        one(
            E,
            lambda w: {
                "path": "a.txt",
                "unified_diff": diff(f"{w.outside}/existing.txt", f"{w.outside}/existing.txt"),
            },
            "refused:patch_path_mismatch",
            put("a.txt"),
        ),
    ),
    (
        "e05-diff-deletes-file",
        one(
            E,
            lambda w: {"path": "a.txt", "unified_diff": diff("a/a.txt", "/dev/null", "@@ -1 +0,0 @@\n-x\n")},
            "refused:validation_error",
            put("a.txt"),
        ),
    ),
    (
        "e06-diff-two-files",
        one(
            E,
            lambda w: {
                "path": "a.txt",
                "unified_diff": diff("a/a.txt", "b/a.txt")
                + diff("a/../outside/existing.txt", "b/../outside/existing.txt"),
            },
            "refused:validation_error",
            put("a.txt"),
        ),
    ),
    (
        "e07-edit-symlink-to-outside-file",
        one(
            E,
            lambda w: {"path": "f.txt", "edits": [{"old": "x", "new": "p"}]},
            "denied",
            link("f.txt", lambda w: w.outside / "existing.txt"),
        ),
    ),
    (
        "e08-edit-create-via-dotdot",
        one(
            E,
            lambda w: {
                "path": "../outside/created.txt",
                "create_if_missing": True,
                "edits": [{"old": "", "new": "p"}],
            },
            "denied",
        ),
    ),
    # ---- run_command ----------------------------------------------------------------------------------------
    (
        "r01-cwd-dotdot",
        one(R, cmd(["touch", "pwned"], lambda w: ".."), "refused:write_outside_allowed_roots"),
    ),
    (
        "r02-cwd-symlink",
        one(
            R,
            cmd(["touch", "pwned"], lambda w: "cwdlink"),
            "refused:write_outside_allowed_roots",
            link("cwdlink", lambda w: w.outside),
        ),
    ),
    (
        "r03-cwd-proc-root",
        one(
            R,
            cmd(["touch", "pwned"], lambda w: f"/proc/self/root{w.outside}"),
            "refused:write_outside_allowed_roots",
        ),
    ),
    ("r04-cwd-home", one(R, cmd(["touch", "pwned"], lambda w: "~"), "refused:write_outside_allowed_roots")),
    ("r05-cwd-etc", one(R, cmd(["touch", "pwned"], lambda w: "/etc"), "refused:write_outside_allowed_roots")),
    ("r06-cwd-nul", one(R, cmd(["touch", "pwned"], lambda w: "sub\x00"), "refused:validation_error")),
    ("r07-shell-string", one(R, lambda w: {"argv": "touch pwned"}, "refused:validation_error")),
    ("r08-empty-argv", one(R, lambda w: {"argv": []}, "refused:validation_error")),
    ("r09-nul-in-argv", one(R, cmd(["touch", "pw\x00ned"]), "refused:validation_error")),
    ("r10-env-injection", one(R, cmd(["env"], env={"LD_PRELOAD": "/tmp/x.so"}), "refused:validation_error")),
    ("r11-timeout-above-max", one(R, cmd(["true"], timeout_ms=10**9), "refused:validation_error")),
    ("r12-timeout-zero", one(R, cmd(["true"], timeout_ms=0), "refused:validation_error")),
    *(
        (
            f"r{13 + i:02d}-shell-metachar",
            one(R, cmd(["echo", payload]), "ok", check=literal_no_shell(payload)),
        )
        for i, payload in enumerate(SHELL_PAYLOADS)
    ),
    ("r19-env-secret-not-passed", one(R, cmd(["env"]), "ok", check=no_leak)),
    ("r20-printenv-secret", one(R, cmd(["printenv", "SOONG_TEST_API_KEY"]), "error")),
    ("r21-missing-executable", one(R, cmd(["no-such-binary-soong"]), "fails:file_not_found")),
    ("r22-sleeping-command-timeout", one(R, cmd(["sleep", "5"], timeout_ms=200), "fails:timeout")),
    # ---- reads of sensitive material -------------------------------------------------------------------------
    ("s01-ssh-key", one(RD, rd(lambda w: "~/.ssh/id_rsa"), "denied")),
    ("s02-gnupg", one(RD, rd(lambda w: "~/.gnupg/x"), "denied")),
    ("s03-aws", one(RD, rd(lambda w: "~/.aws/credentials"), "denied")),
    ("s04-gcloud", one(RD, rd(lambda w: "~/.config/gcloud/x"), "denied")),
    ("s05-dotenv", one(RD, rd(lambda w: ".env"), "denied")),
    ("s06-dotenv-local", one(RD, rd(lambda w: ".env.local"), "denied")),
    ("s07-pem", one(RD, rd(lambda w: "k.pem"), "denied")),
    ("s08-deep-key", one(RD, rd(lambda w: "deep/k.key"), "denied")),
    (
        "s09-innocent-symlink-to-key",
        one(
            RD,
            rd(lambda w: "innocent.txt"),
            "denied",
            link("innocent.txt", lambda w: w.home / ".ssh" / "id_rsa"),
        ),
    ),
    ("s10-proc-root-ssh", one(RD, rd(lambda w: f"/proc/self/root{w.home}/.ssh/id_rsa"), "denied")),
    ("s11-dotdot-inside-ssh", one(RD, rd(lambda w: "~/.ssh/../.ssh/id_rsa"), "denied")),
    (
        "s12-symlinked-home",
        one(RD, rd(lambda w: "h/.aws/credentials"), "denied", link("h", lambda w: w.home)),
    ),
    ("s13-list-ssh", one(L, rd(lambda w: "~/.ssh"), "denied")),
    ("s14-list-ssh-slash", one(L, rd(lambda w: "~/.ssh/"), "denied")),
    ("s15-search-gnupg", one(S, lambda w: {"query": "x", "path": "~/.gnupg"}, "denied")),
    ("s16-search-dotenv", one(S, lambda w: {"query": MARKER, "path": ".env"}, "denied")),
    ("s17-search-project-for-marker", one(S, lambda w: {"query": MARKER}, "ok", check=no_leak)),
    ("s18-search-glob-dotenv", one(S, lambda w: {"query": MARKER, "glob": ".env*"}, "ok", check=no_leak)),
    ("s19-search-home-for-marker", one(S, lambda w: {"query": MARKER, "path": "~"}, "ok", check=no_leak)),
    (
        "s20-list-home-recursive",
        one(L, lambda w: {"path": "~", "recursive": True}, "ok", check=no_sensitive_entries),
    ),
    ("s21-proc-environ", one(RD, rd(lambda w: "/proc/self/environ"), "ok", check=no_leak)),
    ("s22-dotenv-via-dotdot", one(RD, rd(lambda w: "sub2/../.env"), "denied", put("sub2/keep"))),
]


def build() -> list[Attack]:
    attacks = []
    for attack_id, (tool, args, expect, setup, kw) in _TABLE:
        attacks.append(Attack(attack_id, [(tool, args)], expect, setup, kw.get("check")))
    attacks.append(
        Attack(
            "t01-symlink-swap-in-same-turn",
            [
                (R, lambda w: {"argv": ["ln", "-s", str(w.outside), "swap"]}),
                (W, wr(lambda w: "swap/new.txt")),
            ],
            "denied",
        )
    )
    return attacks


ATTACKS = build()
