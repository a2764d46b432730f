"""MCP in ``soong-agent chat`` through a pseudo-terminal (issue 38 item 4): the server's prompts are slash
commands, ``@server:uri`` attaches a resource, and an elicitation request is a small typed form. The
server is written with the official SDK (FastMCP, stdio); the model is the scripted Ollama server."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.chat_pty import ChatTerminal
from tests.fixtures.cli import TurnScript, chat_requests, tool_messages
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer

SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_full_server.py"


def last_user(request: object) -> str:
    body = getattr(request, "json", None) or {}
    users = [m for m in body.get("messages", []) if m["role"] == "user"]
    return str(users[-1].get("content") or "") if users else ""


@pytest.fixture
def term(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> Iterator[ChatTerminal]:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    entry = {"command": sys.executable, "args": [str(SERVER)], "startup_timeout_ms": 60000}
    soong_env.write_home("mcp.json", json.dumps({"mcpServers": {"full": entry}}))
    terminal = ChatTerminal(["--path", str(soong_env.project)])
    terminal.wait_prompt()
    yield terminal
    terminal.close()


def test_prompts_are_slash_commands_and_mentions_attach_resources(
    term: ChatTerminal, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(TurnScript(lambda r: "reviewed", lambda r: "read it"))
    term.say("/mcp", timeout=60)
    assert "/mcp:full:review <path> [focus]  review a file" in term.text()

    term.say("/mcp:full:review app.py focus=style", timeout=60)
    assert "reviewed" in term.text()
    assert last_user(chat_requests(scripted_ollama)[-1]) == "Review app.py for style."

    term.say("/mcp resources full")
    assert "@full:notes://readme" in term.text() and "@full:notes://item/{name} (template)" in term.text()

    term.say("what is in @full:notes://missing ?")
    assert "error: cannot attach @full:notes://missing" in term.text()
    assert len(chat_requests(scripted_ollama)) == 1  # nothing was sent

    term.say("summarize @full:notes://readme please")
    assert "attached @full:notes://readme" in term.text() and "read it" in term.text()
    sent = last_user(chat_requests(scripted_ollama)[-1])
    assert "summarize @full:notes://readme please" in sent
    assert (
        '<resource server="full" uri="notes://readme">\n# Notes\nhello from a resource\n</resource>' in sent
    )


def test_elicitation_is_a_typed_form(term: ChatTerminal, scripted_ollama: ScriptedOllamaServer) -> None:
    script = TurnScript(lambda r: [("ask_name", {})], lambda r: "thanks")
    scripted_ollama.handler(script)
    term.send_line("who am I?")
    term.wait(lambda: term.at_prompt("Answer [1/2/3]: "), what="the tool's permission prompt", timeout=60)
    term.send_line("1")
    term.wait_text("MCP server full asks: Who are you?")
    term.wait(lambda: term.at_prompt("  name (string, required): "), what="the name field")
    term.send_line("Ada")
    term.wait(lambda: term.at_prompt("  age (integer, required): "), what="the age field")
    term.send_line("abc")
    term.wait_text("expected an integer")
    term.send_line("36")
    term.wait_text("thanks", timeout=30)
    results = tool_messages(chat_requests(scripted_ollama)[-1])
    assert any("accept: Ada is 36" in str(m.get("content")) for m in results), results
