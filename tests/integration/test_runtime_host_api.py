"""What ``serve``, ``chat`` and workers need from a runtime, as public SDK API (issue 35 item 4): its
configuration, opening, the session store, live runs, deferred permission requests, Task WAL export and the
skill catalog. Uses the public testing kit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_core import AgentRuntime, InvalidArgumentError, PermissionRequest, RunStatus, TaskNotFoundError
from agent_core.permissions import DEFER, PermissionDeferral
from agent_core.testing import CallTool, FunctionModel, ModelReply, ModelRequest, open_runtime, tool_results
from agent_core.types.enums import MessageRole
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, finish, step

SESSION = "sess_20260101_000000_cafebabe0002"


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "project").mkdir()
    return tmp_path / "project", tmp_path / "home"


async def test_config_open_store_and_live_runs(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def reply(request: ModelRequest) -> str:
        await release.wait()
        return "done"

    project, home = _dirs(tmp_path)
    async with open_runtime(FunctionModel(reply), project_dir=project, home_dir=home) as rt:
        assert rt.config.project == project.resolve() and rt.config.home == home.resolve()
        assert rt.config.config_path == home.resolve() / "config.toml"
        await rt.open()  # idempotent
        assert rt.live_runs() == [] and rt.live_run("run_nope") is None
        run = await rt.start("hello there")
        live = rt.live_runs()
        assert [h.run_id for h in live] == [run.run_id]
        handle = rt.live_run(run.run_id)
        assert handle is not None and handle.parent_run_id is None
        assert handle.message is not None and handle.message.content[0].text == "hello there"  # type: ignore[union-attr]
        record = await rt.store.get_run(run.run_id)
        assert record is not None and record.session_id == run.session_id
        release.set()
        assert await run.wait() == RunStatus.completed
        nodes = await rt.store.list_nodes(run.session_id)
        assert [n.role for n in nodes] == [MessageRole.user, MessageRole.assistant]
        assert rt.live_run(run.run_id) is None
    closed = AgentRuntime(project_dir=project, home_dir=home)
    with pytest.raises(InvalidArgumentError):
        closed.store  # noqa: B018  # not open yet
    await closed.close()
    with pytest.raises(InvalidArgumentError):
        await closed.open()  # closed for good


async def test_deferred_permission_requests_are_listed_watched_and_answered(tmp_path: Path) -> None:
    asked = asyncio.Event()
    requests: list[PermissionRequest] = []

    async def defer(request: PermissionRequest) -> PermissionDeferral:
        requests.append(request)
        asked.set()
        return DEFER

    def reply(request: ModelRequest) -> ModelReply | str:
        if tool_results(request):
            return "written"
        return ModelReply(tool_calls=[CallTool("code.write_file", {"path": "out.txt", "content": "x"})])

    project, home = _dirs(tmp_path)
    settled: list[bool] = []
    async with open_runtime(
        FunctionModel(reply), project_dir=project, home_dir=home, permission_callback=defer
    ) as rt:
        run = await rt.start("write it")
        await asyncio.wait_for(asked.wait(), 10)
        request_id = requests[0].request_id
        assert rt.pending_permission_requests() == [request_id]
        assert rt.watch_permission_request(request_id, settled.append) is True
        assert rt.watch_permission_request("perm_nope", settled.append) is False
        await rt.answer_permission(request_id, "allow_once")
        assert await run.wait() == RunStatus.completed
        assert settled == [True] and rt.pending_permission_requests() == []
    assert (project / "out.txt").read_text() == "x"


async def test_task_wals_are_listed_and_exported(tmp_path: Path) -> None:
    project, home = _dirs(tmp_path)
    async with open_runtime(FunctionModel(lambda r: "hi"), project_dir=project, home_dir=home) as rt:
        harness = TaskHarness(project=project, session_id=SESSION, clock=ManualClock())
        await create(harness, step("a"), step("b", "a"), title="Export me")
        await finish(harness, "a")
        await claim(harness, "b", name="w2")
        (summary,) = await rt.list_task_wals(SESSION)
        assert (summary.name, summary.task_id, summary.last_event_type) == (
            "work.wal.jsonl",
            "t1",
            "task_step_claimed",
        )
        exported, data = await rt.export_task_wal(SESSION)
        assert exported == summary and data == harness.wal().read_bytes()
        assert (await rt.export_task_wal(SESSION, "t1"))[1] == data  # by Task id too
        with pytest.raises(TaskNotFoundError) as missing:
            await rt.export_task_wal(SESSION, "nope")
        assert missing.value.details["wals"] == ["work.wal.jsonl"]
        assert await rt.list_task_wals("sess_20260101_000000_cafebabe0003") == []


async def test_skills_are_listed_from_the_home(tmp_path: Path) -> None:
    project, home = _dirs(tmp_path)
    async with open_runtime(FunctionModel(lambda r: "hi"), project_dir=project, home_dir=home) as rt:
        assert rt.skills_dir == rt.config.home / "skills" and rt.list_skills() == []
        rt.skills_dir.mkdir(parents=True, exist_ok=True)
        (rt.skills_dir / "release.md").write_text(
            "---\nname: release\ndescription: Cut a release\n---\nSteps.\n", encoding="utf-8"
        )
        (skill,) = rt.list_skills()
        assert (skill.name, skill.description) == ("release", "Cut a release")
        assert Path(skill.path) == rt.skills_dir / "release.md"
