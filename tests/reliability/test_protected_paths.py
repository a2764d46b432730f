"""Protected paths (issue 31 items 2, 17) through the public runtime.

Writes into git internals (``.git/config``, ``.git/hooks/*``, ``.git/info/attributes``, a worktree's
``.git`` file, through a symlink too) and soong-agent's own state (``<project>/.soong-agent/``,
``${SOONG_AGENT_HOME}``), and reads of well-known credential files (``~/.git-credentials``, ``~/.netrc``,
``~/.docker/config.json``, ``~/.kube/config``, ``~/.npmrc``, ``~/.pypirc``, ``~/.config/gh/``, ``*.p12``,
``*.pfx``, ``id_rsa*`` / ``id_ed25519*`` anywhere) always ask, suggest deny and say why; an allow rule for
every tool and an earlier "allow for session" answer do not cover them; without a callback they are denied.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_core import PermissionDecision, PermissionRequest
from agent_core.cli._prompt import describe_request
from agent_core.types.content import ToolResultBlock
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import result_for, result_json
from tests.fixtures.runtime import collect, open_runtime

ALLOW_EVERYTHING = {"permissions": {"rules": [{"tool": "code.*", "decision": "allow"}]}}
SECRET = "cred-secret-7d41"
CREDENTIAL_HOME_FILES = (
    ".git-credentials",
    ".netrc",
    ".docker/config.json",
    ".kube/config",
    ".npmrc",
    ".pypirc",
    ".config/gh/hosts.yml",
)
CREDENTIAL_PROJECT_FILES = ("certs/client.p12", "certs/server.pfx", "deploy/id_rsa", "keys/id_ed25519.pub")


class User:
    """Answers every request with ``answer`` (a decision or a function of the request) and records it."""

    def __init__(self, answer: str | Callable[[PermissionRequest], str]) -> None:
        self.answer = answer
        self.requests: list[PermissionRequest] = []

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        self.requests.append(request)
        decision = self.answer(request) if callable(self.answer) else self.answer
        return PermissionDecision(decision=decision)  # type: ignore[arg-type]


async def run_calls(
    env: SoongEnv, calls: list[tuple[str, dict[str, Any]]], *, user: User | None, config: dict[str, Any]
) -> dict[str, ToolResultBlock]:
    """Runs ``calls`` one per model turn in one run; the result of each call by its id ``c<i>``."""
    fake = FakeProvider(
        *(tool_calls((name, args, f"c{i}")) for i, (name, args) in enumerate(calls)), text("done")
    )
    kwargs: dict[str, Any] = {"permission_callback": user} if user is not None else {}
    async with open_runtime(env, fake, config=config, **kwargs) as rt:
        run = await rt.start("go")
        await collect(run, timeout=30)
    return {f"c{i}": result_for(fake.requests, f"c{i}") for i in range(len(calls))}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = (tmp_path / "userhome").resolve()
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def git_layout(project: Path) -> None:
    for rel in ("config", "hooks/pre-commit.sample", "info/attributes", "HEAD"):
        (project / ".git" / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / ".git" / rel).write_text("original\n")
    (project / "sub").mkdir()
    (project / "sub" / ".git").write_text("gitdir: ../.git/worktrees/sub\n")
    (project / "hooks").symlink_to(project / ".git" / "hooks", target_is_directory=True)


async def test_writes_into_git_internals_and_runtime_state_always_ask(
    soong_env: SoongEnv, home: Path
) -> None:
    project = soong_env.project
    git_layout(project)
    targets = [
        ".git/config",
        ".git/hooks/post-checkout",
        ".git/info/attributes",
        "sub/.git",
        "hooks/pre-commit",  # a symlink into .git/hooks
        ".soong-agent/worktrees/evil.txt",
        str(soong_env.home / "config.toml"),
    ]
    calls = [("code.write_file", {"path": t, "content": "x = 1\n", "overwrite": True}) for t in targets]
    calls.append(("code.edit_file", {"path": ".git/HEAD", "edits": [{"old": "original", "new": "x"}]}))
    calls.append(("code.run_command", {"argv": ["true"], "cwd": ".git/hooks"}))
    # the user answers "allow for session" every time: nothing may be remembered
    user = User("allow_for_session")
    results = await run_calls(soong_env, calls + calls[:2], user=user, config=ALLOW_EVERYTHING)
    assert len(user.requests) == len(calls) + 2, [r.tool_name for r in user.requests]
    for request in user.requests:
        assert request.suggested_decision == "deny", request
        assert request.metadata["allow_for_session_available"] is False
        entries = request.metadata["protected"]
        assert entries and entries[0]["kind"] in ("git", "runtime"), entries
        assert "git" in entries[0]["why"] or "soong-agent" in entries[0]["why"]
        assert "protected_path" in request.metadata["reasons"]
        prompt = describe_request(request)
        assert "PROTECTED:" in prompt and entries[0]["why"][:40] in prompt
    symlinked = user.requests[4].metadata["protected"][0]
    assert symlinked["path"] == str(project / ".git" / "hooks" / "pre-commit") and symlinked["kind"] == "git"
    assert all(not block.is_error for block in results.values()), "an explicit allow still runs the call"


async def test_protected_writes_are_denied_without_a_callback(soong_env: SoongEnv, home: Path) -> None:
    git_layout(soong_env.project)
    calls = [
        ("code.write_file", {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\n", "overwrite": True}),
        ("code.write_file", {"path": "sub/.git", "content": "gitdir: evil\n", "overwrite": True}),
    ]
    results = await run_calls(soong_env, calls, user=None, config=ALLOW_EVERYTHING)
    for block in results.values():
        assert block.is_error and block.error is not None and block.error.code.value == "permission_denied"
        assert "protected path" in block.error.message
    assert not (soong_env.project / ".git" / "hooks" / "pre-commit").exists()
    assert (soong_env.project / "sub" / ".git").read_text() == "gitdir: ../.git/worktrees/sub\n"


async def test_credential_files_always_ask(soong_env: SoongEnv, home: Path) -> None:
    for rel in CREDENTIAL_HOME_FILES:
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(f"token {SECRET}\n")
    for rel in CREDENTIAL_PROJECT_FILES:
        soong_env.write_project(rel, f"key {SECRET}\n")
    soong_env.write_project("readme.txt", "plain\n")
    targets = [str(home / rel) for rel in CREDENTIAL_HOME_FILES]
    targets += [str(soong_env.project / rel) for rel in CREDENTIAL_PROJECT_FILES]
    calls = [("code.read_file", {"path": t}) for t in targets]
    calls += [
        ("code.list_dir", {"path": str(home / ".config" / "gh")}),
        ("code.list_dir", {"path": ".", "recursive": True}),
        ("code.search", {"query": SECRET}),
        ("code.read_file", {"path": targets[0]}),  # asked again after "allow for session"
    ]
    user = User(lambda r: "allow_for_session" if r.target_scope == targets[0] else "deny")
    results = await run_calls(soong_env, calls, user=user, config=ALLOW_EVERYTHING)
    asked = [r.target_scope for r in user.requests]
    assert asked == [*targets, str(home / ".config" / "gh"), targets[0]], asked
    for request in user.requests:
        assert request.suggested_decision == "deny"
        assert request.metadata["protected"][0]["kind"] == "credential"
        assert "credential_path" in request.metadata["reasons"]
        assert request.metadata["allow_for_session_available"] is False
    for i in range(1, len(targets)):
        block = results[f"c{i}"]
        assert block.is_error and block.error is not None and block.error.code.value == "permission_denied"
    listing = result_json(results[f"c{len(targets) + 1}"])
    names = {Path(e["path"]).name for e in listing["entries"]}
    assert "readme.txt" in names and not names & {"client.p12", "server.pfx", "id_rsa", "id_ed25519.pub"}
    search = result_json(results[f"c{len(targets) + 2}"])
    assert search["matches"] == [], search


def test_packaged_template_keeps_the_configured_sensitive_paths() -> None:
    from importlib.resources import files

    template = files("agent_core").joinpath("_assets/templates/config_default.toml")
    if not template.is_file():  # the data directory's public location
        template = files("agent_core").joinpath("assets/templates/config_default.toml")
    data = tomllib.loads(template.read_text(encoding="utf-8"))
    assert data["tools"]["sensitive_paths"] == [
        "~/.ssh",
        "~/.gnupg",
        "~/.aws",
        "~/.config/gcloud",
        "*.pem",
        "*.key",
        ".env",
        ".env.*",
    ]
