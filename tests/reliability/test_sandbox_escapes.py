"""Sandbox gaps (issue 31 items 3, 5, 6, 17, 18, 4), attacked through the public runtime with
``[tools] sandbox = "bwrap"`` and every permission answered ``allow_once`` (needs ``bwrap``, which
``.ci/run`` installs; these run in the default suite).

s01: a command plants git hooks and config, rewrites a worktree's ``.git`` file, moves ``.git`` away and
edits ``.soong-agent/`` — all refused (read-only re-binds), nothing changed.
s02: ``cat .env``, ``cat certs/server.pem``, ``grep -r``, a symlink to ``.env``, ``deploy/id_rsa`` and the
credential files of the home (``~/.netrc``, ``~/.docker/config.json``, ``~/.config/gh/``) — the secret
reaches neither the model nor the session store.
s03: ``connect()`` to a unix socket listener outside the project: refused, the listener receives nothing
(with ``network_policy.default = "allow"`` it connects: the network policy decides).
s04: the environment the sandboxed command sees is exactly the allowlist.
s05: a ``bwrap`` shipped by the project on a relative PATH entry is never run.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_core import PermissionDecision, PermissionRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import result_for, result_json
from tests.fixtures.runtime import collect, db_bytes, open_runtime

PY = sys.executable
SECRET = "sandbox-secret-9a3f"
SANDBOX = {"tools": {"sandbox": "bwrap"}, "compact": {"enabled": False}}


async def allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


async def run_commands(
    env: SoongEnv, argvs: list[list[str]], config: dict[str, Any] = SANDBOX
) -> tuple[list[dict[str, Any]], FakeProvider]:
    """Runs each argv as one ``code.run_command`` call; the result data (or error text) of each."""
    fake = FakeProvider(
        *(tool_calls(("code.run_command", {"argv": argv}, f"c{i}")) for i, argv in enumerate(argvs)),
        text("done"),
    )
    async with open_runtime(env, fake, config=config, permission_callback=allow) as rt:
        run = await rt.start("go")
        await collect(run, timeout=60)
    out = []
    for i in range(len(argvs)):
        block = result_for(fake.requests, f"c{i}")
        if block.error is not None and block.error.code.value != "internal_error":
            out.append({"error": block.error.code.value, "message": block.error.message})
        else:
            out.append(result_json(block))
    return out, fake


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = (tmp_path / "userhome").resolve()
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


async def test_s01_git_internals_and_runtime_state_stay_read_only(soong_env: SoongEnv, home: Path) -> None:
    project = soong_env.project
    for rel in ("config", "HEAD", "hooks/pre-commit.sample"):
        (project / ".git" / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / ".git" / rel).write_text("original\n")
    (project / "wt").mkdir()
    (project / "wt" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    (project / ".soong-agent" / "tasks").mkdir(parents=True)
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    script = (
        "echo '#!/bin/sh' > .git/hooks/pre-commit; "
        "printf '[core]\\n\\tfsmonitor = touch /tmp/x\\n' >> .git/config; "
        "echo 'gitdir: evil' > wt/.git; "
        "mv .git .git-moved; mv wt/.git wt/.git-moved; "
        "echo forged > .soong-agent/tasks/t1.wal; "
        "echo ok > inside.txt"
    )
    (result,), _ = await run_commands(soong_env, [["sh", "-c", script]])
    assert "Read-only file system" in result["stderr"] or "Device or resource busy" in result["stderr"], (
        result
    )
    assert {p: p.read_bytes() for p in before} == before
    assert not (project / ".git" / "hooks" / "pre-commit").exists()
    assert not (project / ".git-moved").exists() and not (project / "wt" / ".git-moved").exists()
    assert not (project / ".soong-agent" / "tasks" / "t1.wal").exists()
    assert (project / "inside.txt").read_text() == "ok\n", "the rest of the project stays writable"


async def test_s02_project_and_credential_secrets_are_masked(soong_env: SoongEnv, home: Path) -> None:
    project = soong_env.project
    for rel in (".env", "certs/server.pem", "deploy/id_rsa", "nested/deep/.env.local"):
        soong_env.write_project(rel, f"TOKEN={SECRET}\n")
    (project / "notes.txt").symlink_to(project / ".env")
    soong_env.write_project("readme.txt", "public\n")
    soong_env.write_project(".venv/lib/site-packages/certifi/cacert.pem", "PUBLIC CA BUNDLE\n")
    for rel in (".netrc", ".docker/config.json", ".config/gh/hosts.yml", ".git-credentials"):
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"password {SECRET}\n")
    argvs = [
        ["cat", ".env"],
        ["cat", "certs/server.pem"],
        ["grep", "-r", "TOKEN", "."],
        ["cat", "notes.txt"],
        ["cat", "deploy/id_rsa"],
        ["cat", str(home / ".netrc"), str(home / ".docker/config.json"), str(home / ".git-credentials")],
        ["cat", str(home / ".config/gh/hosts.yml")],
        ["cat", ".venv/lib/site-packages/certifi/cacert.pem"],
        ["cat", "readme.txt"],
    ]
    results, fake = await run_commands(soong_env, argvs)
    assert results[-1]["stdout"] == "public\n", "ordinary files stay readable"
    assert results[-2]["stdout"] == "PUBLIC CA BUNDLE\n", "dependency directories are not masked"
    assert all(SECRET not in json.dumps(r) for r in results), results
    assert SECRET not in json.dumps([r.model_dump(mode="json") for r in fake.requests])
    assert SECRET.encode() not in db_bytes(soong_env)
    assert (project / ".env").read_text() == f"TOKEN={SECRET}\n", "masking leaves the file alone"


def unix_listener(path: Path) -> socket.socket:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)
    server.settimeout(0.5)
    return server


CONNECT = (
    "import socket, sys\n"
    "try:\n"
    "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
    "    s.connect(sys.argv[1]); s.sendall(b'stolen')\n"
    "    print('CONNECTED')\n"
    "except OSError as e:\n"
    "    print('refused', e.__class__.__name__, e.errno)\n"
    "a, b = socket.socketpair(); a.sendall(b'p'); print('pair', b.recv(1))\n"
)


async def test_s03_host_unix_sockets_are_unreachable(soong_env: SoongEnv, home: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    server = unix_listener(outside / "agent.sock")
    try:
        (result,), _ = await run_commands(soong_env, [[PY, "-c", CONNECT, str(outside / "agent.sock")]])
        assert "CONNECTED" not in result["stdout"] and "refused" in result["stdout"], result
        assert "pair b'p'" in result["stdout"], "socketpair keeps working"
        with pytest.raises(TimeoutError):
            server.accept()
        # the network policy decides: with network allowed, the same command connects
        config = {**SANDBOX, "permissions": {"network_policy": {"default": "allow"}}}
        (allowed,), _ = await run_commands(
            soong_env, [[PY, "-c", CONNECT, str(outside / "agent.sock")]], config
        )
        assert "CONNECTED" in allowed["stdout"], allowed
        conn, _ = server.accept()
        with conn:
            conn.settimeout(5)
            assert conn.recv(16) == b"stolen"
    finally:
        server.close()


async def test_s04_sandboxed_environment_is_exactly_the_allowlist(
    soong_env: SoongEnv, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LANG", "LC_ALL", "LC_CTYPE", "LANGUAGE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SOONG_TEST_NOT_ALLOWED", "x")
    config = {**SANDBOX, "tools": {**SANDBOX["tools"], "env_allowlist": ["PATH", "HOME"]}}
    (result,), _ = await run_commands(soong_env, [["env"]], config)
    names = sorted(line.split("=", 1)[0] for line in result["stdout"].splitlines() if line)
    assert names == ["HOME", "PATH"], names


async def test_s05_a_bwrap_shipped_by_the_project_never_runs(
    soong_env: SoongEnv, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = tmp_path / "PWNED-s05"
    for rel in ("bwrap", "bin/bwrap"):
        fake_bwrap = soong_env.project / rel
        fake_bwrap.parent.mkdir(exist_ok=True)
        fake_bwrap.write_text(f"#!/bin/sh\necho {rel} >> {marker}\n")
        fake_bwrap.chmod(0o755)
    monkeypatch.chdir(soong_env.project)
    monkeypatch.setenv("PATH", f":.:bin:{soong_env.project}/bin:{os.environ['PATH']}")
    (result,), _ = await run_commands(soong_env, [["echo", "hello"]])
    assert result["stdout"] == "hello\n", result
    assert not marker.exists(), f"a project bwrap ran: {marker.read_text()!r}"


def test_seccomp_program_covers_the_supported_machines() -> None:
    from agent_core.tools._seccomp import unix_socket_filter

    for machine in ("x86_64", "aarch64", "riscv64"):
        program = unix_socket_filter(machine)
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 64
    assert unix_socket_filter("sparc64") is None
