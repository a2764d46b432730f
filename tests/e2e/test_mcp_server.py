"""``soong-agent mcp-server`` driven by the official ``mcp`` client (issue 38 item 2): over stdio (the client
spawns ``python -m agent_core.cli mcp-server``) and over streamable HTTP (a server subprocess on 127.0.0.1
with a bearer token). The model is the scripted Ollama server (:mod:`tests.fixtures.adapter_model`)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError

from tests.fixtures.adapter_model import AdapterModel
from tests.fixtures.cli import cli_command, cli_env
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer

TOKEN = "mcp-test-token-0123456789"


def use_model(soong_env: SoongEnv, server: ScriptedOllamaServer) -> AdapterModel:
    soong_env.write_config(model={"provider": "ollama", "base_url": server.base_url, "context_window": 65536})
    model = AdapterModel()
    server.handler(model)
    server.allow_unconsumed = True
    return model


class Asker:
    """An elicitation callback answering every permission request with ``action`` / ``decision``."""

    def __init__(self, action: str = "accept", decision: str = "allow_once") -> None:
        self.action, self.decision = action, decision
        self.asked: list[types.ElicitRequestParams] = []
        self.answer: dict[str, str] = {}

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params)
        if self.action != "accept":
            return types.ElicitResult(action=self.action)  # type: ignore[arg-type]
        if "answer" in params.requestedSchema["properties"]:  # an internal.ask_user question
            return types.ElicitResult(action="accept", content=dict(self.answer))
        return types.ElicitResult(action="accept", content={"decision": self.decision})


@asynccontextmanager
async def stdio_session(soong_env: SoongEnv, asker: Asker | None = None) -> AsyncIterator[ClientSession]:
    command = cli_command(["mcp-server", "--path", str(soong_env.project)])
    params = StdioServerParameters(command=command[0], args=command[1:], env=cli_env())
    with (soong_env.home.parent / "mcp-stderr.txt").open("w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, elicitation_callback=asker) as session:
                await session.initialize()
                yield session


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert result.structuredContent is not None, result
    return result.structuredContent


async def test_stdio_run_streams_progress_and_sessions_and_transcripts_are_readable(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    soong_env.write_project("notes.txt", "hello disk\n")
    progress: list[tuple[float, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, message))

    async with stdio_session(soong_env) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"run", "list_sessions", "get_session"}
        assert tools["run"].inputSchema["required"] == ["message"]

        first = await session.call_tool("run", {"message": "hello there"}, progress_callback=on_progress)
        data = structured(first)
        assert not first.isError and data["answer"] == "Echo: hello there" and data["status"] == "completed"
        assert first.content[0].text == "Echo: hello there"  # type: ignore[union-attr]
        assert "".join(m or "" for _, m in progress) == "Echo: hello there"
        assert [v for v, _ in progress] == sorted(v for v, _ in progress)

        session_id = data["session_id"]
        progress.clear()
        second = structured(
            await session.call_tool(
                "run", {"message": "read notes.txt", "session_id": session_id}, progress_callback=on_progress
            )
        )
        assert second["session_id"] == session_id and "hello disk" in second["answer"]
        assert any(m and m.startswith("[tool] code.read_file ") and "notes.txt" in m for _, m in progress)

        listed = structured(await session.call_tool("list_sessions", {}))["sessions"]
        assert [s["session_id"] for s in listed] == [session_id]
        assert listed[0]["title"] == "hello there" and listed[0]["run_count"] == 2

        got = structured(await session.call_tool("get_session", {"session_id": session_id}))
        roles = [(m["role"], m["text"][:11]) for m in got["messages"]]
        assert roles[:3] == [("user", "hello there"), ("assistant", "Echo: hello"), ("user", "read notes.")]
        assert got["messages"][3]["tool_calls"][0]["name"] == "code.read_file"
        assert got["messages"][3]["tool_calls"][0]["status"] == "completed"

        resources = (await session.list_resources()).resources
        assert [str(r.uri) for r in resources] == [f"soong-agent://sessions/{session_id}"]
        templates = (await session.list_resource_templates()).resourceTemplates
        assert templates[0].uriTemplate == "soong-agent://sessions/{session_id}"
        body = (await session.read_resource(resources[0].uri)).contents[0]
        assert body.mimeType == "text/markdown"
        assert "## User\n\nhello there" in body.text and "code.read_file" in body.text  # type: ignore[union-attr]

        missing = await session.call_tool("get_session", {"session_id": "sess_nope"})
        assert missing.isError and "unknown session" in missing.content[0].text  # type: ignore[union-attr]
        unknown = await session.call_tool("run", {"message": "x", "session_id": "sess_nope"})
        assert unknown.isError


async def test_permission_requests_are_elicited_and_without_elicitation_denied(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    asker = Asker("accept", "allow_once")
    async with stdio_session(soong_env, asker) as session:
        done = structured(await session.call_tool("run", {"message": "write a.txt hello"}))
        assert done["status"] == "completed"
        assert (soong_env.project / "a.txt").read_text(encoding="utf-8") == "hello"
        asked = asker.asked[0]
        assert "code.write_file" in asked.message and "+hello" in asked.message  # the change preview
        assert asked.requestedSchema["properties"]["decision"]["enum"] == [
            "allow_once",
            "allow_for_session",
            "deny",
        ]

        asker.action = "decline"
        structured(await session.call_tool("run", {"message": "write b.txt nope"}))
        assert not (soong_env.project / "b.txt").exists()
        asker.action, asker.decision = "accept", "deny"
        structured(await session.call_tool("run", {"message": "write c.txt nope"}))
        assert not (soong_env.project / "c.txt").exists()
        assert len(asker.asked) == 3

    async with stdio_session(soong_env, None) as session:  # a client without elicitation
        done = structured(await session.call_tool("run", {"message": "write d.txt nope"}))
        assert done["status"] == "completed"
        assert not (soong_env.project / "d.txt").exists()
        assert "does not support elicitation" in done["answer"]  # the model saw the denial's reason


async def test_questions_of_the_model_are_elicited_and_without_elicitation_the_model_is_told(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    asker = Asker("accept")
    async with stdio_session(soong_env, asker) as session:
        asker.answer = {"choice": "PostgreSQL"}
        done = structured(
            await session.call_tool("run", {"message": "ask Which database? | SQLite | PostgreSQL"})
        )
        assert (
            done["status"] == "completed" and "PostgreSQL" in done["answer"]
        )  # the tool result the model saw
        asked = asker.asked[-1]
        assert "Which database?" in asked.message
        assert asked.requestedSchema["properties"]["choice"]["enum"] == ["SQLite", "PostgreSQL"]

        asker.answer = {"choice": "SQLite", "answer": "neither: use DuckDB"}  # typed words win
        done = structured(
            await session.call_tool("run", {"message": "ask Which database? | SQLite | PostgreSQL"})
        )
        assert "neither: use DuckDB" in done["answer"]

        asker.answer = {}
        done = structured(await session.call_tool("run", {"message": "ask Your name?"}))
        assert asker.asked[-1].requestedSchema["required"] == ["answer"]  # no options: free text
        assert "the user gave no answer" in done["answer"]

        asker.action = "decline"
        done = structured(await session.call_tool("run", {"message": "ask Proceed? | yes | no"}))
        assert "the user gave no answer" in done["answer"] and "decline" in done["answer"]

    async with stdio_session(soong_env, None) as session:  # a client without elicitation
        done = structured(await session.call_tool("run", {"message": "ask Proceed? | yes | no"}))
        assert done["status"] == "completed" and "does not support elicitation" in done["answer"]


@pytest.fixture
def http_server(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> Any:
    use_model(soong_env, scripted_ollama)
    process = subprocess.Popen(
        cli_command(["mcp-server", "--http", "--port", "0", "--path", str(soong_env.project)]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env({"SOONG_AGENT_MCP_TOKEN": TOKEN}),
    )
    try:
        line = process.stdout.readline() if process.stdout else ""
        assert line.startswith("serving http://127.0.0.1:"), (
            line,
            process.stderr.read() if process.stderr else "",
        )
        assert TOKEN not in line  # a token the user chose is not printed
        yield line.split()[1]
    finally:
        process.terminate()
        assert process.wait(timeout=20) == 0


async def test_streamable_http_needs_the_token_and_runs_with_elicitation(
    http_server: str, soong_env: SoongEnv
) -> None:
    url = http_server
    assert url.endswith("/mcp")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient() as client:
        for bad in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            response = await client.post(url, json=init, headers={**headers, **bad})
            assert response.status_code == 401, bad
        rebinding = await client.post(
            url, json=init, headers={**headers, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example"}
        )
        assert rebinding.status_code in (400, 403, 421)

    asker = Asker("accept", "allow_for_session")
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    authorized = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
    async with authorized, streamable_http_client(url, http_client=authorized) as (read, write, _):
        async with ClientSession(read, write, elicitation_callback=asker) as session:
            await session.initialize()
            first = structured(
                await session.call_tool("run", {"message": "write h.txt one"}, progress_callback=on_progress)
            )
            assert first["status"] == "completed" and len(asker.asked) == 1
            second = structured(
                await session.call_tool(
                    "run", {"message": "write h.txt two", "session_id": first["session_id"]}
                )
            )
            assert second["status"] == "completed"
            assert len(asker.asked) == 1  # allow_for_session: not asked again in that session
            assert (soong_env.project / "h.txt").read_text(encoding="utf-8") == "two"
            assert any(m and m.startswith("[tool] code.write_file ") and "h.txt" in m for m in progress)


def test_http_token_rules_are_those_of_serve(soong_env: SoongEnv, tmp_path: Path) -> None:
    from tests.fixtures.cli import run_cli

    loose = tmp_path / "token"
    loose.write_text("abc\n", encoding="utf-8")
    os.chmod(loose, 0o644)
    result = run_cli(["mcp-server", "--http", "--token-file", str(loose), "--path", str(soong_env.project)])
    assert result.exit_code == 2 and "chmod 600" in result.stderr, result
    result = run_cli(["mcp-server", "--http", "--token", "abc"])  # no token option: this names a file
    assert result.exit_code == 2 and "cannot read --token-file abc" in result.stderr, result


async def test_cancelling_the_run_request_cancels_the_run(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_model(soong_env, scripted_ollama)
    started = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        started.set()

    async with stdio_session(soong_env) as session:
        async with anyio.create_task_group() as group:

            async def call() -> None:
                with pytest.raises(McpError, match="cancelled"):
                    await session.call_tool("run", {"message": "slow 100"}, progress_callback=on_progress)

            group.start_soon(call)
            with anyio.fail_after(30):
                await started.wait()
            # the client's requests are numbered from 0: initialize was 0, this tools/call is 1
            cancel = types.CancelledNotification(params=types.CancelledNotificationParams(requestId=1))
            await session.send_notification(types.ClientNotification(cancel))
            with anyio.fail_after(30):
                while True:
                    listed = structured(await session.call_tool("list_sessions", {}))["sessions"]
                    if listed and listed[0]["status"] == "cancelled":
                        break
                    await anyio.sleep(0.1)
