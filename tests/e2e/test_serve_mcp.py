"""MCP server requests in ``soong-agent serve`` (issue 38 item 4): an MCP server's elicitation and sampling
requests are pending approvals of the HTTP API like a tool's permission question; the elicitation answer's
``content`` reaches the server, a decline declines. The server is written with the official SDK (FastMCP,
stdio); the model is the scripted Ollama server."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.cli import TurnScript, chat_requests, tool_messages
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import start_serve

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_full_server.py"


def next_approval(client: httpx.Client, seen: set[str], timeout: float = 60.0) -> dict[str, Any]:
    """The first pending approval not in ``seen`` (added to it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for approval in client.get("/api/approvals").json()["approvals"]:
            if approval["request_id"] not in seen:
                seen.add(approval["request_id"])
                return approval  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("no new approval in time")


def wait_status(client: httpx.Client, session_id: str, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sessions = client.get("/api/sessions").json()["sessions"]
        status = next((s["status"] for s in sessions if s["session_id"] == session_id), None)
        if status in ("completed", "failed", "cancelled"):
            return str(status)
        time.sleep(0.05)
    raise AssertionError("the run did not end in time")


def test_elicitation_and_sampling_are_approvals_of_the_api(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    entry = {"command": sys.executable, "args": [str(SERVER)], "startup_timeout_ms": 60000}
    soong_env.write_home("mcp.json", json.dumps({"mcpServers": {"full": entry}}))
    scripted_ollama.handler(
        TurnScript(
            lambda r: [("ask_name", {})],
            lambda r: "thanks",
            lambda r: [("ask_name", {})],
            lambda r: "declined",
            lambda r: [("summarize", {"text": "a long text"})],
            lambda r: "A SUMMARY",  # the server's sampling request, on the session's model
            lambda r: "summarized",
        )
    )
    server = start_serve(soong_env)
    seen: set[str] = set()
    try:
        with server.client() as client:
            created = client.post("/api/runs", json={"message": "who am I?"})
            assert created.status_code == 201, created.text
            session_id = created.json()["session_id"]
            tool = next_approval(client, seen)
            assert tool["tool_name"] == "mcp.full.ask_name"
            assert client.post(
                f"/api/approvals/{tool['request_id']}", json={"decision": "allow_once"}
            ).is_success

            asked = next_approval(client, seen)
            assert asked["tool_name"] == "mcp.full.elicitation"
            assert asked["metadata"]["mcp_request"] == "elicitation"
            assert asked["metadata"]["message"] == "Who are you?"
            assert set(asked["metadata"]["requested_schema"]["properties"]) == {"name", "age"}
            bad = client.post(
                f"/api/approvals/{asked['request_id']}", json={"decision": "allow_once", "x": 1}
            )
            assert bad.status_code == 400  # the body is checked: nothing answered
            answered = client.post(
                f"/api/approvals/{asked['request_id']}",
                json={"decision": "allow_once", "content": {"name": "Ada", "age": 36}},
            )
            assert answered.is_success, answered.text
            assert wait_status(client, session_id) == "completed"
            results = tool_messages(chat_requests(scripted_ollama)[-1])
            assert any("accept: Ada is 36" in str(m.get("content")) for m in results), results

            again = client.post("/api/runs", json={"message": "again", "session_id": session_id})
            assert again.status_code == 201, again.text
            tool = next_approval(client, seen)
            client.post(f"/api/approvals/{tool['request_id']}", json={"decision": "allow_once"})
            asked = next_approval(client, seen)
            assert asked["metadata"]["mcp_request"] == "elicitation"
            client.post(f"/api/approvals/{asked['request_id']}", json={"decision": "deny"})
            assert wait_status(client, session_id) == "completed"
            results = tool_messages(chat_requests(scripted_ollama)[-1])
            assert str(results[-1].get("content")).startswith("decline\n"), results

            third = client.post("/api/runs", json={"message": "summarize", "session_id": session_id})
            assert third.status_code == 201, third.text
            tool = next_approval(client, seen)
            assert tool["tool_name"] == "mcp.full.summarize"
            client.post(f"/api/approvals/{tool['request_id']}", json={"decision": "allow_once"})
            sampling = next_approval(client, seen)
            assert sampling["tool_name"] == "mcp.full.sampling"
            assert sampling["metadata"]["mcp_request"] == "sampling"
            assert "a long text" in sampling["args_summary"]
            client.post(f"/api/approvals/{sampling['request_id']}", json={"decision": "allow_once"})
            assert wait_status(client, session_id) == "completed"
            results = tool_messages(chat_requests(scripted_ollama)[-1])
            assert str(results[-1].get("content")).startswith("summary: A SUMMARY"), results
    finally:
        assert server.stop() == 0
