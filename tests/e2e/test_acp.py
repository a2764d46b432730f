"""``soong-agent acp`` driven as an editor drives it (issue 38 item 1): the official ACP SDK's client side
spawns ``python -m agent_core.cli acp --path <project>`` and speaks JSON-RPC over its stdin/stdout pipes.
The model is the scripted Ollama server (:mod:`tests.fixtures.adapter_model`)."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileEditToolCallContent,
    FileSystemCapabilities,
    PermissionOption,
    ReadTextFileResponse,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
    UserMessageChunk,
    WriteTextFileResponse,
)

from tests.fixtures.adapter_model import AdapterModel
from tests.fixtures.cli import cli_env
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer, error


class EditorClient:
    """The editor's side: records updates, answers permission requests with ``choice`` (an option id or
    ``None`` for a cancelled request), serves reads from ``buffers`` (unsaved text by path, else the disk)
    and records writes without touching the disk (the editor owns the buffer)."""

    def __init__(self, choice: str | None = "allow_once", *, fs: bool = True) -> None:
        self.choice = choice
        self.fs = fs
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.buffers: dict[str, str] = {}
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.permission_asked = asyncio.Event()
        self.release_permission = asyncio.Event()
        self.release_permission.set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.permissions.append((tool_call, options))
        self.permission_asked.set()
        await self.release_permission.wait()
        if self.choice is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.choice))

    async def read_text_file(self, session_id: str, path: str, **kwargs: Any) -> ReadTextFileResponse:
        self.reads.append(path)
        if path in self.buffers:
            return ReadTextFileResponse(content=self.buffers[path])
        return ReadTextFileResponse(content=Path(path).read_text(encoding="utf-8"))

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> WriteTextFileResponse:
        self.writes.append((path, content))
        return WriteTextFileResponse()

    def of(self, kind: type) -> list[Any]:
        return [u for _, u in self.updates if isinstance(u, kind)]

    def title(self, call_id: str) -> str:
        """A tool call's title as the editor shows it: the last one its updates set."""
        calls = [u for u in self.of(ToolCallStart) + self.of(ToolCallProgress) if u.tool_call_id == call_id]
        return [u.title for u in sorted(calls, key=lambda u: self.order(u)) if u.title][-1]

    def order(self, update: Any) -> int:
        return next(i for i, (_, u) in enumerate(self.updates) if u is update)

    def text(self) -> str:
        return "".join(u.content.text for u in self.of(AgentMessageChunk))


@asynccontextmanager
async def editor(
    soong_env: SoongEnv, client: EditorClient, *extra: str
) -> AsyncIterator[tuple[Any, Any, Path]]:
    """``(connection, process, stderr file)``: an initialized connection to ``soong-agent acp``."""
    stderr_path = soong_env.home.parent / "acp-stderr.txt"
    with stderr_path.open("wb") as stderr:
        async with acp.spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "agent_core.cli",
            "acp",
            "--path",
            str(soong_env.project),
            *extra,
            env=cli_env(),
            transport_kwargs={"stderr": stderr},
        ) as (conn, process):
            capabilities = ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=client.fs, write_text_file=client.fs)
            )
            init = await asyncio.wait_for(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities), 30
            )
            assert init.protocol_version == PROTOCOL_VERSION
            assert init.agent_capabilities.load_session is True
            yield conn, process, stderr_path


def use_model(soong_env: SoongEnv, server: ScriptedOllamaServer) -> AdapterModel:
    soong_env.write_config(model={"provider": "ollama", "base_url": server.base_url, "context_window": 65536})
    model = AdapterModel()
    server.handler(model)
    server.allow_unconsumed = True
    return model


async def prompt(conn: Any, session_id: str, text: str, timeout: float = 30) -> Any:
    return await asyncio.wait_for(
        conn.prompt(session_id=session_id, prompt=[TextContentBlock(type="text", text=text)]), timeout
    )


async def test_a_prompt_streams_text_and_usage_and_a_new_session_can_be_loaded_with_its_history(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    client = EditorClient()
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        assert session.session_id.startswith("sess_")
        answer = await prompt(conn, session.session_id, "hello there")
        assert answer.stop_reason == "end_turn"
        assert answer.usage is not None and answer.usage.output_tokens > 0
        assert client.text() == "Echo: hello there"
        assert len(client.of(AgentMessageChunk)) == 3  # streamed as the model produced it
        usage = client.of(UsageUpdate)
        assert usage and usage[-1].size == 65536 and 0 < usage[-1].used <= 65536
        listed = await conn.list_sessions(cwd=str(soong_env.project))
        assert [s.session_id for s in listed.sessions] == [session.session_id]
        assert listed.sessions[0].title == "hello there"

    replayed = EditorClient()  # a new editor process reopens the conversation
    async with editor(soong_env, replayed) as (conn, _process, _stderr):
        await conn.load_session(cwd=str(soong_env.project), session_id=session.session_id, mcp_servers=[])
        history = [u for _, u in replayed.updates]
        assert isinstance(history[0], UserMessageChunk) and history[0].content.text == "hello there"
        assert replayed.text() == "Echo: hello there"
        answer = await prompt(conn, session.session_id, "again")
        assert answer.stop_reason == "end_turn"
        assert replayed.text().endswith("Echo: again")
        with pytest.raises(RequestError, match="unknown session"):
            await conn.load_session(cwd=str(soong_env.project), session_id="sess_nope", mcp_servers=[])


async def test_reads_see_the_editor_buffer_and_edits_land_in_the_editor_with_a_diff(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    notes = soong_env.write_project("notes.txt", "hello disk\n")
    client = EditorClient("allow_once")
    client.buffers[str(notes)] = "hello buffer\n"  # unsaved in the editor
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        await prompt(conn, session.session_id, "read notes.txt")
        assert client.reads == [str(notes)]
        assert "hello buffer" in client.text() and "hello disk" not in client.text()
        starts = client.of(ToolCallStart)
        assert starts[0].kind == "read" and client.title(starts[0].tool_call_id) == "Read notes.txt"
        located = [u for u in client.of(ToolCallProgress) if u.locations]
        assert located[0].locations[0].path == str(notes)
        done = [u for u in client.of(ToolCallProgress) if u.status == "completed"]
        assert done and done[-1].tool_call_id == starts[0].tool_call_id

        await prompt(conn, session.session_id, "edit notes.txt buffer editor")
        assert client.writes == [(str(notes), "hello editor\n")]  # applied to the buffer, through the editor
        assert notes.read_text(encoding="utf-8") == "hello disk\n"  # the runtime did not write the disk
        (asked, options) = client.permissions[0]
        assert [o.kind for o in options] == ["allow_once", "allow_always", "reject_once"]
        assert asked.kind == "edit" and asked.title == "Edit notes.txt"
        edit_call = next(u for u in client.of(ToolCallStart) if u.kind == "edit")
        assert asked.tool_call_id == edit_call.tool_call_id
        final = [u for u in client.of(ToolCallProgress) if u.tool_call_id == edit_call.tool_call_id][-1]
        assert final.status == "completed"
        diff = [c for c in final.content or [] if isinstance(c, FileEditToolCallContent)]
        assert diff and diff[0].path == str(notes)
        assert (diff[0].old_text, diff[0].new_text) == ("hello buffer\n", "hello editor\n")


async def test_without_fs_capabilities_the_disk_is_used_and_write_diffs_still_show(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    client = EditorClient("allow_always", fs=False)
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        await prompt(conn, session.session_id, "write out.txt first")
        await prompt(conn, session.session_id, "write out.txt second")
        assert (soong_env.project / "out.txt").read_text(encoding="utf-8") == "second"
        assert client.reads == [] and client.writes == []
        assert len(client.permissions) == 1  # allow_always = allow for the session: asked once
        diffs = [
            c
            for u in client.of(ToolCallProgress)
            if u.status == "completed"
            for c in u.content or []
            if isinstance(c, FileEditToolCallContent)
        ]
        assert [(d.old_text, d.new_text) for d in diffs] == [(None, "first"), ("first", "second")]


async def test_a_rejected_or_cancelled_permission_request_denies_the_call(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    client = EditorClient(fs=False)
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        for choice in ("reject_once", None):
            client.choice = choice
            answer = await prompt(conn, session.session_id, "write denied.txt nope")
            assert answer.stop_reason == "end_turn"
            assert not (soong_env.project / "denied.txt").exists()
            failed = [u for u in client.of(ToolCallProgress) if u.status == "failed"]
            assert failed and "Denied" in failed[-1].content[-1].content.text
        assert len(client.permissions) == 2


async def test_session_modes_are_the_permission_modes_and_set_mode_applies_to_the_next_prompts(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    client = EditorClient("reject_once", fs=False)
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        modes = session.modes
        assert modes.current_mode_id == "default"
        offered = [m.id for m in modes.available_modes]
        assert offered == ["default", "accept_edits", "plan", "dont_ask"]  # no sandbox: no bypass
        await conn.set_session_mode(session_id=session.session_id, mode_id="accept_edits")
        await prompt(conn, session.session_id, "write edits.txt accepted")
        assert (soong_env.project / "edits.txt").read_text(encoding="utf-8") == "accepted"
        assert client.permissions == []  # a write in the project: not asked in accept_edits
        await conn.set_session_mode(session_id=session.session_id, mode_id="dont_ask")
        await prompt(conn, session.session_id, 'command ["touch", "ran.txt"]')
        assert not (soong_env.project / "ran.txt").exists() and client.permissions == []  # denied unasked
        with pytest.raises(acp.RequestError, match="bypass needs"):
            await conn.set_session_mode(session_id=session.session_id, mode_id="bypass")
        with pytest.raises(acp.RequestError, match="unknown mode 'yolo'"):
            await conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        loaded = await conn.load_session(
            cwd=str(soong_env.project), session_id=session.session_id, mcp_servers=[]
        )
        assert loaded.modes.current_mode_id == "default"


async def test_cancel_stops_the_run_and_the_prompt_answers_cancelled(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    client = EditorClient()
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        running = asyncio.ensure_future(prompt(conn, session.session_id, "slow 100", timeout=60))
        for _ in range(300):
            if client.of(AgentMessageChunk):
                break
            await asyncio.sleep(0.05)
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(running, 30)
        assert answer.stop_reason == "cancelled"
        assert len(client.of(AgentMessageChunk)) < 100

        # a cancel while a permission request is open: the request is abandoned, the run ends cancelled
        client.release_permission.clear()
        running = asyncio.ensure_future(prompt(conn, session.session_id, "write x.txt y", timeout=60))
        await asyncio.wait_for(client.permission_asked.wait(), 30)
        await conn.cancel(session_id=session.session_id)
        answer = await asyncio.wait_for(running, 30)
        assert answer.stop_reason == "cancelled"
        client.release_permission.set()
        assert not (soong_env.project / "x.txt").exists()


async def test_the_task_board_streams_as_a_plan_in_orchestrator_sessions(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    client = EditorClient()
    async with editor(soong_env, client, "--orchestrator") as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        answer = await prompt(conn, session.session_id, "plan")
        assert answer.stop_reason == "end_turn"
        plans = client.of(AgentPlanUpdate)
        assert plans, client.updates
        assert [(e.content, e.status) for e in plans[-1].entries] == [
            ("Write the failing test", "pending"),
            ("Fix the bug", "pending"),
        ]
        created = [u for u in client.of(ToolCallStart) if "task_create" in u.title]
        assert created and created[0].kind == "think"

    replayed = EditorClient()
    async with editor(soong_env, replayed) as (conn, _process, _stderr):
        await conn.load_session(cwd=str(soong_env.project), session_id=session.session_id, mcp_servers=[])
        plans = replayed.of(AgentPlanUpdate)
        assert plans and [e.content for e in plans[-1].entries] == ["Write the failing test", "Fix the bug"]


async def test_a_configuration_error_is_one_line_and_a_failed_run_is_a_json_rpc_error(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    from tests.fixtures.cli import run_cli

    result = run_cli(["acp", "--path", str(soong_env.project)])  # no config.toml yet
    assert result.exit_code == 1, result
    assert result.stdout == ""  # stdout is the protocol's
    assert result.stderr.startswith("soong-agent: error: config file not found")  # the first-hour message

    use_model(soong_env, scripted_ollama)
    scripted_ollama.handler(lambda request: error(400, {"error": "model 'x' not found"}))
    client = EditorClient()
    async with editor(soong_env, client) as (conn, _process, _stderr):
        session = await conn.new_session(cwd=str(soong_env.project), mcp_servers=[])
        with pytest.raises(RequestError, match="the run failed"):
            await prompt(conn, session.session_id, "hello")
