"""The runtime's own project-side directories (issue 14 items 2, 3): symlinks in a cloned project must not
redirect the plan directory or the Task WAL outside ``<project>``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, text, tool_calls
from tests.fixtures.orchestrator import Router, create_args, error_code, finish, result_for, roomy, step
from tests.fixtures.runtime import open_runtime
from tests.fixtures.tool_pipeline import PermissionRecorder


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = (tmp_path / "outside").resolve()
    path.mkdir()
    return path


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


async def test_p01_plan_template_suggested_dir_through_symlink(soong_env: SoongEnv, outside: Path) -> None:
    (soong_env.project / "lnk").symlink_to(outside)
    fake = FakeProvider(
        tool_calls(("agent.plan_template", {"suggested_dir": "lnk/plans"}, "p1")),
        text("done"),
    )
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("plan", mode="normal")
        assert (await finish(run)).value == "completed"
    block = result_for(fake.requests, "p1")
    assert error_code(block) == "path_conflict", block
    assert tree(outside) == [], "the plan directory was created outside the project"


async def test_p02_plan_template_default_dir_through_symlinked_private_dir(
    soong_env: SoongEnv, outside: Path
) -> None:
    (soong_env.project / ".soong-agent").symlink_to(outside)
    fake = FakeProvider(tool_calls(("agent.plan_template", {}, "p1")), text("done"))
    async with open_runtime(soong_env, fake, config=roomy()) as rt:
        run = await rt.start("plan", mode="normal")
        assert (await finish(run)).value == "completed"
    block = result_for(fake.requests, "p1")
    assert error_code(block) == "path_conflict", block
    assert ".soong-agent" in (block.error.message if block.error else "")
    assert tree(outside) == []


async def test_p03_task_wal_through_symlinked_private_dir(soong_env: SoongEnv, outside: Path) -> None:
    (soong_env.project / ".soong-agent").symlink_to(outside)
    fake = FakeProvider()
    Router(fake).orch(
        tool_calls(("agent.task_create", create_args("t1", step("s1")), "c1")),
        text("done"),
    )
    permissions = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, config=roomy(), permission_callback=permissions) as rt:
        run = await rt.start("go", mode="orchestrator")
        await finish(run)
    block = result_for(fake.requests, "c1")
    assert error_code(block) == "path_conflict", block
    assert tree(outside) == [], "the Task WAL was written outside the project"
