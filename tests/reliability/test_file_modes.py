"""Conversation data is private to the user (issue 31 item 14).

With the usual umask 022 the runtime used to create ``sessions.sqlite`` (and ``-wal``/``-shm``),
artifacts and memory files 0644 in a 0755 home: any local user could read every conversation. Now a home
the runtime creates is 0700, every directory it creates 0700 and every file 0600; a directory the user
made keeps its permissions.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_core import PermissionDecision, PermissionRequest, RunStatus
from agent_core._memory.writer import MemoryWriter
from agent_core._redaction import Redactor
from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime
from agent_core.types.model import ModelRequest


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def usual_umask() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


async def _run_with_artifact(project: Path, home: Path) -> None:
    async def allow(request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(decision="allow_once")

    def reply(request: ModelRequest) -> ModelReply:
        if any(m.role == "tool" for m in request.messages):
            return ModelReply(text="done")
        big = ["python3", "-c", "print('conversation data ' * 400)"]
        return ModelReply(tool_calls=[CallTool("code.run_command", {"argv": big})])

    config = {"tools": {"stdout_limit_bytes": 1024}, "compact": {"enabled": False}}
    async with open_runtime(
        FunctionModel(reply), project_dir=project, home_dir=home, permission_callback=allow, config=config
    ) as runtime:
        run = await runtime.start("print a lot")
        await run.wait()
        assert run.status == RunStatus.completed, run.error


@pytest.mark.usefixtures("usual_umask")
async def test_a_home_the_runtime_creates_is_private(tmp_path: Path) -> None:
    """Case I14."""
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "new" / "home"
    await _run_with_artifact(project, home)
    assert mode(tmp_path / "new") == 0o700 and mode(home) == 0o700
    for suffix in ("", "-wal", "-shm"):
        db = Path(f"{home / 'sessions.sqlite'}{suffix}")
        if db.exists():
            assert mode(db) == 0o600, f"{db.name} is {mode(db):04o}"
    artifacts = list((home / "sessions").rglob("*"))
    assert any(p.is_file() for p in artifacts), "the test expected an artifact"
    for path in artifacts:
        expected = 0o700 if path.is_dir() else 0o600
        assert mode(path) == expected, f"{path.relative_to(home)} is {mode(path):04o}"
    assert mode(home / "sessions") == 0o700


@pytest.mark.usefixtures("usual_umask")
async def test_a_home_the_user_made_keeps_its_mode(tmp_path: Path) -> None:
    """Case I14."""
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    home.chmod(0o755)
    await _run_with_artifact(project, home)
    assert mode(home) == 0o755
    assert mode(home / "sessions.sqlite") == 0o600
    assert mode(home / "sessions") == 0o700


@pytest.mark.usefixtures("usual_umask")
def test_memory_files_and_directories_are_private(tmp_path: Path) -> None:
    """Case I14."""
    memory = tmp_path / "memory"
    writer = MemoryWriter(memory, redactor=Redactor(environ={}))
    (written,) = writer.commit([("user/likes-tea.md", "# Likes tea\n\nThe user likes tea.\n")])
    assert mode(written) == 0o600
    assert mode(written.parent) == 0o700 and mode(memory) == 0o700
