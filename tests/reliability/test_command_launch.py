"""What a command runs and with which environment (issue 31 items 4, 18), through the public runtime.

x01: an allow rule for bare ``git`` while the user's PATH has an empty entry, ``.``, ``bin``,
``node_modules/.bin`` and an absolute entry inside the project, and the process starts in the project
which ships a ``git`` in each of them: the system git runs, the repository's never; the resolved absolute
path is what the audit (``soong-agent audit``) and the prompt show.
x02: a name found only through such an entry is ``file_not_found`` with the explicit path to use; named
explicitly it runs (after a prompt naming the absolute file).
x03: the command's environment is exactly the allowlist: ``env`` printed by the command shows nothing else
(the launcher's interpreter used to add ``LC_CTYPE`` through C locale coercion).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent_core import PermissionDecision, PermissionRequest, RunStatus
from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import events, result_for, result_json
from tests.fixtures.runtime import collect, open_runtime

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PLANTED = ("git", "bin/git", "node_modules/.bin/git", "tools/git", "node_modules/.bin/mytool")


def plant(project: Path, marker: Path) -> None:
    for rel in PLANTED:
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"#!/bin/sh\necho {rel} >> {marker}\necho planted-ran\n")
        path.chmod(0o755)


class User:
    def __init__(self) -> None:
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        return PermissionDecision(decision="allow_once")


async def test_x01_x02_bare_names_never_resolve_into_the_project(
    soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = soong_env.project
    marker = tmp_path / "PWNED-x01"
    plant(project, marker)
    system_git = shutil.which("git", path=SYSTEM_PATH)
    assert system_git is not None
    monkeypatch.chdir(project)
    monkeypatch.setenv("PATH", f":.:bin:node_modules/.bin:{project}/tools:{SYSTEM_PATH}")
    fake = FakeProvider(
        tool_calls(("code.run_command", {"argv": ["git", "--version"]}, "c_git")),
        tool_calls(("code.run_command", {"argv": ["mytool"]}, "c_bare")),
        tool_calls(("code.run_command", {"argv": ["./node_modules/.bin/mytool"]}, "c_explicit")),
        text("done"),
    )
    rules = [{"tool": "code.run_command", "argv_prefix": ["git"], "decision": "allow"}]
    user = User()
    config = {"permissions": {"rules": rules}, "compact": {"enabled": False}}
    async with open_runtime(soong_env, fake, config=config, permission_callback=user) as rt:
        run = await rt.start("check the version")
        await collect(run, timeout=30)
        assert run.status == RunStatus.completed, run.error
    ran = result_for(fake.requests, "c_git")
    assert not ran.is_error, ran.model_dump()
    assert result_json(ran)["stdout"].startswith("git version")
    started = [e for e in events(soong_env, run.session_id, "tool_started") if e["tool_call_id"] == "c_git"]
    assert started[0]["payload"]["permission_audit"]["executable"] == system_git
    # a name only the project provides: a clear error naming the explicit path
    bare = result_for(fake.requests, "c_bare")
    assert bare.is_error and bare.error is not None and bare.error.code.value == "file_not_found"
    assert "./node_modules/.bin/mytool" in bare.error.message
    # named explicitly, it runs after a prompt that shows the absolute file
    assert [r.metadata.get("executable") for r in user.requests] == [
        str(project / "node_modules/.bin/mytool")
    ]
    assert not result_for(fake.requests, "c_explicit").is_error
    assert marker.read_text() == "node_modules/.bin/mytool\n", "a repository git ran"
    audit = run_cli(["audit", run.run_id, "--path", str(project)], env={"PATH": SYSTEM_PATH})
    assert audit.exit_code == 0, audit
    line = next(ln for ln in audit.stdout.splitlines() if ln.split()[2:3] == ["c_git"])  # "<run> #n  <id>"
    following = audit.stdout.splitlines()[audit.stdout.splitlines().index(line) + 1]
    assert f"executable {system_git}" in following, audit.stdout


async def test_x03_command_environment_is_exactly_the_allowlist(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LANG", "LC_ALL", "LC_CTYPE", "LANGUAGE", "PYTHONCOERCECLOCALE", "PYTHONUTF8"):
        monkeypatch.delenv(name, raising=False)  # the C locale: the launcher's interpreter coerces it
    monkeypatch.setenv("SOONG_TEST_NOT_ALLOWED", "x")
    fake = FakeProvider(tool_calls(("code.run_command", {"argv": ["env"]}, "c_env")), text("done"))
    config = {"tools": {"env_allowlist": ["PATH", "HOME"]}, "compact": {"enabled": False}}
    async with open_runtime(soong_env, fake, config=config, permission_callback=User()) as rt:
        run = await rt.start("print the environment")
        await collect(run, timeout=30)
    block = result_for(fake.requests, "c_env")
    assert not block.is_error, block.model_dump()
    names = sorted(line.split("=", 1)[0] for line in result_json(block)["stdout"].splitlines() if line)
    assert names == ["HOME", "PATH"], names
