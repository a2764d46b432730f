"""``soong-agent chat`` with teammates (issue 36 item 4): a teammate's activity is shown indented under its
name, ``/team`` lists it with its state and unread inbox entries; piped, against the scripted Ollama
server."""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import Any

from tests.fixtures.cli import cli_env
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import OllamaWire, ScriptedOllamaServer, advertised_tool_name, stream


class Team:
    """The lead spawns alice, then waits until alice answered; alice greets (her text has escapes)."""

    def __init__(self) -> None:
        self.alice_answered = threading.Event()
        self.lead_turns = 0

    def __call__(self, request: Any) -> Any:
        system = " ".join(m.get("content") or "" for m in request.json["messages"] if m["role"] == "system")
        if 'You are "alice"' in system:
            self.alice_answered.set()
            return stream(OllamaWire.text_stream("hi from alice \x1b[2J"))
        self.lead_turns += 1
        if self.lead_turns == 1:
            name = advertised_tool_name(request, "team_spawn")
            call = (name, {"name": "alice", "task": "say hi"})
            return stream([OllamaWire.tool_calls([call]), OllamaWire.done("stop")])
        assert self.alice_answered.wait(20)
        return stream(OllamaWire.text_stream("alice is on it"))


def test_chat_shows_a_teammate_under_its_name_and_lists_the_team(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(
        model={"provider": "ollama", "base_url": scripted_ollama.base_url},
        agents={"max_teammates_per_session": 2},
    )
    scripted_ollama.handler(Team())
    script = "/team\nstart alice\n/team\n"
    completed = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "chat", "--path", str(soong_env.project)],
        input=script,
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert "no session yet: teammates belong to a session" in out
    assert "[teammate alice started (resident)]" in out
    lines = out.splitlines()
    header = lines.index("[alice]")
    assert "    hi from alice \\x1b[2J" in lines[header + 1 :], out  # indented under its name, escaped
    assert "\x1b[2J" not in out
    assert "alice is on it" in out
    listing = next(line for line in lines if line.startswith("  alice "))
    assert ("idle" in listing or "working" in listing) and "resident" in listing and "unread" in listing
