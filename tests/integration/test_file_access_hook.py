"""The public file access hook of the built-in file tools (``AgentRuntime(file_access=...)``,
``agent_core.tools.files``): what it is asked, what it may replace, and what it can never widen."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from agent_core.testing import CallTool, FunctionModel, ModelReply, open_runtime
from agent_core.tools.files import FileAccess, FileRead, FileWrite
from agent_core.types.content import ToolResultBlock
from agent_core.types.permissions import PermissionDecision, PermissionRequest


class Buffers:
    """An editor: ``texts`` by path are its unsaved buffers; ``store`` says whether it takes writes."""

    def __init__(self, texts: dict[Path, str] | None = None, *, store: bool = True) -> None:
        self.texts = dict(texts or {})
        self.store = store
        self.reads: list[FileRead] = []
        self.writes: list[FileWrite] = []
        self.fail: Exception | None = None

    async def read_text(self, read: FileRead) -> str | None:
        self.reads.append(read)
        return self.texts.get(read.path)

    async def write_text(self, write: FileWrite) -> bool:
        self.writes.append(write)
        if self.fail is not None:
            raise self.fail
        if self.store:
            self.texts[write.path] = write.text
        return self.store


def one_call(name: str, **arguments: Any) -> FunctionModel:
    """Calls ``name`` once, then answers with the tool's result text."""

    def reply(request: Any) -> Any:
        if request.messages[-1].role == "tool":
            blocks = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
            return "result: " + json.dumps([b.model_dump(mode="json") for b in blocks])
        return ModelReply(tool_calls=[CallTool(name, arguments)])

    return FunctionModel(reply)


async def allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


async def run_once(model: FunctionModel, project: Path, files: FileAccess, **kwargs: Any) -> str:
    async with open_runtime(
        model, project_dir=project, file_access=files, permission_callback=allow, **kwargs
    ) as rt:
        run = await rt.start("go")
        text = ""
        async for event in run.events():
            if event.event_type.value == "message_completed":
                text = str(event.payload.get("text"))
        await run.wait()
        return text


def test_the_hook_satisfies_the_public_protocol() -> None:
    assert isinstance(Buffers(), FileAccess)


async def test_read_file_returns_the_hooks_text_for_the_checked_resolved_path(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    real = project / "real.txt"
    real.write_text("on disk\n", encoding="utf-8")
    (project / "link.txt").symlink_to(real)
    files = Buffers({real: "line one\nunsaved line two\n"})
    answer = await run_once(one_call("code.read_file", path="link.txt", start_line=2), project, files)
    assert [r.path for r in files.reads] == [real]  # the resolved target, not the link
    assert files.reads[0].tool_name == "code.read_file" and files.reads[0].session_id.startswith("sess_")
    assert "unsaved line two" in answer and "on disk" not in answer and "line one" not in answer


async def test_a_binary_file_is_read_from_disk_without_asking_the_hook(tmp_path: Path) -> None:
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01\x02")
    files = Buffers()
    answer = await run_once(one_call("code.read_file", path="blob.bin"), tmp_path, files)
    assert files.reads == [] and '"binary": true' in answer.replace('\\"', '"')


async def test_a_none_answer_reads_the_disk(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("disk text\n", encoding="utf-8")
    files = Buffers()
    answer = await run_once(one_call("code.read_file", path="a.txt"), tmp_path, files)
    assert len(files.reads) == 1 and "disk text" in answer


async def test_edit_applies_to_the_buffer_and_the_hook_stores_it_instead_of_the_disk(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("hello disk\n", encoding="utf-8")
    files = Buffers({target: "hello buffer\n"})
    edits = [{"old": "buffer", "new": "editor"}]
    await run_once(one_call("code.edit_file", path="a.txt", edits=edits), tmp_path, files)
    (write,) = files.writes
    assert (write.path, write.previous_text, write.text, write.created) == (
        target,
        "hello buffer\n",
        "hello editor\n",
        False,
    )
    assert target.read_text(encoding="utf-8") == "hello disk\n"


async def test_a_write_the_hook_declines_goes_to_disk_and_the_hook_still_sees_the_change(
    tmp_path: Path,
) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    files = Buffers(store=False)
    await run_once(
        one_call("code.write_file", path="a.txt", content="new\n", overwrite=True), tmp_path, files
    )
    assert target.read_text(encoding="utf-8") == "new\n"
    assert [(w.previous_text, w.text) for w in files.writes] == [("old\n", "new\n")]
    await run_once(one_call("code.write_file", path="b.txt", content="fresh"), tmp_path, files)
    assert files.writes[-1].created and (tmp_path / "b.txt").read_text(encoding="utf-8") == "fresh"


async def test_a_failing_hook_fails_the_call_and_nothing_is_written(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old\n", encoding="utf-8")
    files = Buffers()
    files.fail = RuntimeError("editor went away")
    answer = await run_once(
        one_call("code.write_file", path="a.txt", content="x", overwrite=True), tmp_path, files
    )
    assert "internal_error" in answer or "editor went away" in answer
    assert target.read_text(encoding="utf-8") == "old\n"


@pytest.mark.parametrize("where", ["outside", "denied"])
async def test_the_hook_is_never_asked_about_what_the_checks_refuse(tmp_path: Path, where: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    outside = tmp_path / "outside.txt"
    files = Buffers()

    async def deny(request: PermissionRequest) -> PermissionDecision:
        return PermissionDecision(decision="deny")

    path = str(outside) if where == "outside" else "inside.txt"
    model = one_call("code.write_file", path=path, content="x")
    async with open_runtime(model, project_dir=project, file_access=files, permission_callback=deny) as rt:
        run = await rt.start("go")
        await run.wait()
    assert files.writes == [] and files.reads == []
    assert not outside.exists() and not (project / "inside.txt").exists()
    assert os.listdir(project) == []
