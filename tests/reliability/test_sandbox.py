"""The bwrap sandbox for command tools (issue 14 item 8): writes outside the roots fail, a planted ``~/.ssh``
key is unreadable, no network connection opens, the runtime's /proc is not visible and no process is left
running; a sandbox that cannot start fails the call clearly (never a silent fallback)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_core.tools import _sandbox
from tests.fixtures.code_tools import CodeToolsHarness, data_of, error_code, make_harness, text_of
from tests.reliability.test_process_tree import ESCAPER

PY = sys.executable
RUN = "code.run_command"
KEY = "-----BEGIN OPENSSH PRIVATE KEY----- sandbox-secret-5c1e"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = (tmp_path / "userhome").resolve()
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY + "\n")
    (home / "deploy.pem").write_text(KEY + "\n")
    (home / "notes.txt").write_text("visible\n")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def h(tmp_path: Path, home: Path) -> CodeToolsHarness:
    return make_harness(tmp_path, sandbox="bwrap")


async def run(h: CodeToolsHarness, code: str, *extra: str) -> tuple[int | None, str, str]:
    result = await h.run(RUN, argv=[PY, "-c", code, *extra])
    data = data_of(result)
    return data["exit_code"], data["stdout"], data["stderr"]


async def test_writes_inside_project_only(h: CodeToolsHarness, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    code = "import sys; open(sys.argv[1], 'w').write('x')"
    status, _, err = await run(h, code, str(h.project / "inside.txt"))
    assert status == 0, err
    assert (h.project / "inside.txt").read_text() == "x"
    status, _, err = await run(h, code, str(outside))
    assert status != 0 and "Read-only file system" in err
    assert not outside.exists()


async def test_planted_ssh_key_and_home_secrets_are_hidden(h: CodeToolsHarness, home: Path) -> None:
    code = (
        "import os, sys\n"
        "for p in sys.argv[1:]:\n"
        "    try:\n"
        "        print(p, repr(open(p).read()))\n"
        "    except OSError as e:\n"
        "        print(p, 'ERR', e.__class__.__name__)\n"
        "print('ls', os.listdir(os.path.dirname(sys.argv[1])))\n"
    )
    status, out, err = await run(h, code, str(home / ".ssh" / "id_rsa"), str(home / "deploy.pem"))
    assert status == 0, err
    assert "sandbox-secret" not in out and "ls []" in out
    status, out, _ = await run(h, "import sys; print(open(sys.argv[1]).read())", str(home / "notes.txt"))
    assert status == 0 and "visible" in out


async def test_no_network_connection(h: CodeToolsHarness) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        code = (
            "import socket, sys\n"
            "try:\n"
            "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)\n"
            "    print('CONNECTED')\n"
            "except OSError as e:\n"
            "    print('refused', e.__class__.__name__)\n"
        )
        status, out, err = await run(h, code, str(port))
        assert status == 0, err
        assert "CONNECTED" not in out and "refused" in out
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


async def test_runtime_proc_not_visible(h: CodeToolsHarness) -> None:
    code = "import os, sys; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit())); print(os.path.exists(f'/proc/{sys.argv[1]}/environ'))"
    status, out, err = await run(h, code, str(os.getpid()))
    assert status == 0, err
    pids, runtime_visible = out.strip().split("\n")
    assert runtime_visible == "False" and len(eval(pids)) <= 3


async def test_leaves_no_process(h: CodeToolsHarness, tmp_path: Path) -> None:
    marker, pidfile = h.project / "late-marker", h.project / "pid"
    result = await h.run(RUN, argv=[PY, "-c", ESCAPER, str(marker), str(pidfile), "0.8"])
    assert not result.is_error, text_of(result)
    await asyncio.sleep(1.3)
    assert not marker.exists(), "a sandboxed descendant outlived the call"


async def test_sandbox_that_cannot_start_fails_clearly(
    h: CodeToolsHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = h.project / "ran.txt"
    monkeypatch.setattr(_sandbox, "find_bwrap", lambda exclude=(): None)
    result = await h.run(RUN, argv=[PY, "-c", f"open({str(target)!r}, 'w')"])
    assert result.is_error and error_code(result) == "config_error"
    assert "tools.sandbox" in text_of(result) or "sandbox" in text_of(result)
    assert not target.exists()
    broken = tmp_path / "bwrap"
    broken.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    broken.chmod(0o755)
    monkeypatch.setattr(_sandbox, "find_bwrap", lambda exclude=(): str(broken))
    result = await h.run(RUN, argv=[PY, "-c", f"open({str(target)!r}, 'w')"])
    assert result.is_error and error_code(result) == "config_error"
    assert "No permissions to create new namespace" in text_of(result)
    assert not target.exists()


async def test_declarative_shell_tool_is_sandboxed(soong_env: Any, tmp_path: Path, home: Path) -> None:
    from tests.unit.test_declarative_tools import adapter_for, spec
    from tests.unit.test_declarative_tools import run as run_declarative

    outside = tmp_path / "outside-decl.txt"
    script = f"cat {home}/.ssh/id_rsa; echo pwned > {outside}; echo done"
    tool = spec(name="demo.leak", command_type="shell", permission="write", command=script, args=[])
    adapter = adapter_for(soong_env, tool, tools={"sandbox": "bwrap"})
    result, _ = await run_declarative(adapter, soong_env, tmp_path, "demo.leak")
    assert KEY not in str(result.model_dump())
    assert not outside.exists()
