"""File checkpoints and ``runtime.rewind`` (issue 37 item 1) through the public API and ``replay_session``:
files written, edited, created and deleted by tool calls and commands come back with the active path; a
file changed since by someone else refuses the rewind (nothing changed); another session's changes are
never undone, also when made while this session's command ran; ignored and dependency trees, protected
paths and symlinked directories are left alone."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentCoreError, AgentRuntime, PermissionDecision, PermissionRequest
from agent_core.testing import CallTool, FunctionModel, ModelReply, ModelRequest, last_user_text, open_runtime


def scripted(request: ModelRequest) -> ModelReply:
    """``write <path> <content>``, ``edit <path> <old> <new>``, ``cmd <json argv>``; then ``done``."""
    if request.messages and request.messages[-1].role == "tool":
        return ModelReply(text="done")
    text = last_user_text(request)
    verb, _, rest = text.partition(" ")
    if verb == "write":
        path, _, content = rest.partition(" ")
        args: dict[str, Any] = {"path": path, "content": content, "overwrite": True}
        return ModelReply(tool_calls=[CallTool("code.write_file", args)])
    if verb == "edit":
        path, old, new = rest.split(" ", 2)
        edit = {"path": path, "edits": [{"old": old, "new": new}]}
        return ModelReply(tool_calls=[CallTool("code.edit_file", edit)])
    if verb == "cmd":
        return ModelReply(tool_calls=[CallTool("code.run_command", {"argv": json.loads(rest)})])
    return ModelReply(text="ok")


async def allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


async def say(runtime: AgentRuntime, text: str, session_id: str | None = None) -> Any:
    run = await runtime.start(text, session_id=session_id)
    await run.wait()
    assert run.status.value == "completed", run.error
    return run


async def last_node(runtime: AgentRuntime, session_id: str) -> Any:
    """The active leaf now (the final answer of the latest run)."""
    replay = await runtime.replay_session(session_id)
    summary = next(s for s in await runtime.list_sessions() if s.session_id == session_id)
    return next(n for n in replay.nodes if n.node_id == summary.active_node_id)


def sh(script: str) -> str:
    return "cmd " + json.dumps(["sh", "-c", script])


async def test_rewind_restores_files_and_the_active_path(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "keep.txt").write_text("kept\n")
    (project / "c.txt").write_text("see\n")
    model = FunctionModel(scripted)
    async with open_runtime(model, project_dir=project, permission_callback=allow) as runtime:
        first = await say(runtime, "write a.txt one")
        after_first = await last_node(runtime, first.session_id)
        sid = first.session_id
        await say(runtime, "write a.txt two", sid)
        await say(runtime, "edit a.txt two deux", sid)
        await say(
            runtime,
            sh("echo three > b.txt; rm c.txt; mkdir -p d/e && echo x > d/e/f.txt; chmod 600 keep.txt"),
            sid,
        )
        assert (project / "a.txt").read_text() == "deux"
        assert not (project / "c.txt").exists() and (project / "d/e/f.txt").exists()

        replay = await runtime.replay_session(sid)
        named = [n.metadata.get("checkpoint_id") for n in replay.nodes if n.role == "tool"]
        assert len(named) == 4 and all(isinstance(c, str) and c.startswith("ckpt_") for c in named)

        result = await runtime.rewind(sid, after_first.node_id)
        assert (project / "a.txt").read_text() == "one"
        assert not (project / "b.txt").exists() and not (project / "d").exists()
        assert (project / "c.txt").read_text() == "see\n"
        assert (project / "keep.txt").stat().st_mode & 0o777 != 0o600  # the mode change is undone too
        assert result.active_node_id == after_first.node_id and len(result.checkpoints) == 3
        stored = next(s for s in await runtime.list_sessions() if s.session_id == sid)
        assert stored.active_node_id == after_first.node_id  # the switch is stored, not only in memory
        assert sorted(result.removed) == sorted(str(project / p) for p in ("b.txt", "d/e/f.txt", "d/e", "d"))
        assert str(project / "a.txt") in result.restored and str(project / "c.txt") in result.restored
        assert result.skipped == []

        # the conversation goes on from the target: the later turns are not in the next request
        await say(runtime, "what now?", sid)
        texts = [json.dumps(m.model_dump(mode="json")) for m in model.requests[-1].messages]
        assert any("write a.txt one" in t for t in texts)
        assert not any("write a.txt two" in t or "three > b.txt" in t for t in texts)
        path = await runtime.get_node_path((await last_node(runtime, sid)).node_id)
        assert after_first.node_id in [n.node_id for n in path]

        # rewinding to the very first message removes what the first call created; undone checkpoints
        # are never undone twice
        user_first = next(n for n in replay.nodes if n.role == "user")
        again = await runtime.rewind(sid, user_first.node_id)
        assert not (project / "a.txt").exists() and again.removed == [str(project / "a.txt")]
        assert len(again.checkpoints) == 1

        # files only: the active path stays
        files_only = await runtime.rewind(sid, user_first.node_id, conversation=False)
        assert files_only.checkpoints == [] and files_only.active_node_id == user_first.node_id


async def test_rewind_refuses_a_file_changed_elsewhere_and_changes_nothing(tmp_path: Path) -> None:
    model = FunctionModel(scripted)
    async with open_runtime(model, project_dir=tmp_path, permission_callback=allow) as runtime:
        first = await say(runtime, "write a.txt one")
        sid = first.session_id
        start = next(n for n in (await runtime.replay_session(sid)).nodes if n.role == "user")
        await say(runtime, "write b.txt bee", sid)
        leaf = await last_node(runtime, sid)
        (tmp_path / "a.txt").write_text("edited by hand")
        with pytest.raises(AgentCoreError) as refused:
            await runtime.rewind(sid, start.node_id)
        assert refused.value.code == "path_conflict"
        assert refused.value.details["conflicts"] == [
            {"path": str(tmp_path / "a.txt"), "reason": "changed since by someone else"}
        ]
        assert (tmp_path / "a.txt").read_text() == "edited by hand"  # nothing was changed
        assert (tmp_path / "b.txt").read_text() == "bee"
        assert (await last_node(runtime, sid)).node_id == leaf.node_id  # nor the conversation

        # a change between two of the session's calls breaks the chain as well
        (tmp_path / "a.txt").write_text("one")
        await say(runtime, "edit a.txt one uno", sid)
        (tmp_path / "a.txt").write_text("uno by hand")
        await say(runtime, "edit a.txt by BY", sid)
        with pytest.raises(AgentCoreError) as chain:
            await runtime.rewind(sid, start.node_id)
        assert "changed outside this session before code.edit_file" in chain.value.message


async def test_rewind_never_touches_another_session(tmp_path: Path) -> None:
    model = FunctionModel(scripted)
    async with open_runtime(model, project_dir=tmp_path, permission_callback=allow) as runtime:
        a = await say(runtime, "write a.txt from-a")
        b = await say(runtime, "write b.txt from-b")
        a_start = next(n for n in (await runtime.replay_session(a.session_id)).nodes if n.role == "user")

        # session A runs a command while session B writes a file: the command's walk sees B's file appear
        started = asyncio.Event()
        slow = await runtime.start(
            sh("touch started; sleep 1.5; echo late > a2.txt"), session_id=a.session_id
        )

        async def watch() -> None:
            async for event in slow.events():
                if event.event_type.value == "tool_started":
                    started.set()

        watcher = asyncio.ensure_future(watch())
        await asyncio.wait_for(started.wait(), 10)
        while not (tmp_path / "started").exists():
            await asyncio.sleep(0.02)
        await say(runtime, "write b2.txt during-a", b.session_id)
        await slow.wait()
        await watcher
        assert (tmp_path / "a2.txt").exists() and (tmp_path / "b2.txt").exists()

        result = await runtime.rewind(a.session_id, a_start.node_id)
        assert not (tmp_path / "a.txt").exists() and not (tmp_path / "a2.txt").exists()
        assert not (tmp_path / "started").exists()
        assert (tmp_path / "b.txt").read_text() == "from-b"
        assert (tmp_path / "b2.txt").read_text() == "during-a"
        assert [s.path for s in result.skipped] == [str(tmp_path / "b2.txt")]
        assert b.session_id in result.skipped[0].reason

        # and B's own rewind undoes B's files only
        b_start = next(n for n in (await runtime.replay_session(b.session_id)).nodes if n.role == "user")
        await runtime.rewind(b.session_id, b_start.node_id)
        assert not (tmp_path / "b.txt").exists() and not (tmp_path / "b2.txt").exists()


async def test_walks_skip_ignored_trees_and_rewind_leaves_protected_and_linked_paths(tmp_path: Path) -> None:
    project = tmp_path / "project"
    outside = tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (project / ".gitignore").write_text("build/\n*.log\n")
    (project / "node_modules").mkdir()
    (project / "sub").mkdir()
    model = FunctionModel(scripted)
    async with open_runtime(model, project_dir=project, permission_callback=allow) as runtime:
        first = await say(runtime, "write sub/f.txt v1")
        sid = first.session_id
        start = next(n for n in (await runtime.replay_session(sid)).nodes if n.role == "user")
        script = "mkdir -p build && echo o > build/out.o; echo l > run.log; echo m > node_modules/m.js; echo s > src.py"
        await say(runtime, sh(script), sid)
        # the user swaps sub/ for a link to a directory outside the project meanwhile
        os.rename(project / "sub", tmp_path / "moved")
        (outside / "f.txt").write_text("v1")
        (project / "sub").symlink_to(outside)
        result = await runtime.rewind(sid, start.node_id)
        assert not (project / "src.py").exists()  # the command's own file is undone
        for kept in ("build/out.o", "run.log", "node_modules/m.js"):  # ignored trees are never recorded
            assert (project / kept).exists(), kept
        assert (outside / "f.txt").read_text() == "v1"  # never written through the link
        assert [(s.path, s.reason) for s in result.skipped] == [
            (str(project / "sub/f.txt"), "below a symlinked directory: left alone")
        ]


async def test_checkpoints_can_be_switched_off(tmp_path: Path) -> None:
    model = FunctionModel(scripted)
    config = {"checkpoints": {"enabled": False}}
    async with open_runtime(model, project_dir=tmp_path, config=config, permission_callback=allow) as runtime:
        first = await say(runtime, "write a.txt one")
        replay = await runtime.replay_session(first.session_id)
        assert all("checkpoint_id" not in n.metadata for n in replay.nodes)
        start = next(n for n in replay.nodes if n.role == "user")
        result = await runtime.rewind(first.session_id, start.node_id)
        assert result.checkpoints == [] and (tmp_path / "a.txt").exists()
