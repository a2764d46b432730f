"""``soong-agent channels`` and the channels inside ``soong-agent serve`` as processes (issue 38 item 3): a
Telegram channel against the scripted Bot API server, the model on the scripted Ollama server. Ctrl-C ends
the command with 130, configuration problems with one line, the token never reaches the output, and
inside serve a channel's permission question is a durable approval too (answered from the chat)."""

from __future__ import annotations

import json
import select
import signal
import subprocess
import time
from typing import Any

from agent_core.testing import OllamaWire, advertised_tool_name, stream
from tests.e2e.test_serve_api import wait_until
from tests.fixtures.chat_platforms import FakeTelegram
from tests.fixtures.cli import cli_command, cli_env, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import start_serve

TOKEN = "555:AAchannels-e2e-token-abcdefghijkl"


def reply_rules(request: Any) -> Any:
    """``please write`` in the last user message → a write_file call; after a tool result → Done; else pong."""
    messages = (request.json or {}).get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        result = str(messages[-1].get("content"))
        return stream(OllamaWire.text_stream(f"Heard {result}" if '"answer"' in result else "Done writing"))
    last = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    if "please ask" in last:
        name = advertised_tool_name(request, "ask_user")
        call = OllamaWire.tool_calls([(name, {"question": "Which color?", "options": ["red", "blue"]})])
        return stream([call, OllamaWire.done("stop")])
    if "please write" in last:
        name = advertised_tool_name(request, "write_file")
        call = OllamaWire.tool_calls([(name, {"path": "from-chat.txt", "content": "chat\n"})])
        return stream([call, OllamaWire.done("stop")])
    return stream(OllamaWire.text_stream("pong"))


def configure(env: SoongEnv, ollama: ScriptedOllamaServer, fake: FakeTelegram, **channel: Any) -> None:
    entry = {
        "kind": "telegram",
        "token_env": "TG_TOKEN",
        "allowed_users": ["42"],
        "base_url": fake.base_url,
        "poll_timeout_s": 1,
        **channel,
    }
    env.write_config(
        model={"provider": "ollama", "base_url": ollama.base_url, "context_window": 65536}, channels=[entry]
    )
    ollama.handler(reply_rules)
    ollama.allow_unconsumed = True


def read_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def test_channels_answers_until_ctrl_c(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    with FakeTelegram(TOKEN) as fake:
        configure(soong_env, scripted_ollama, fake)
        proc = subprocess.Popen(
            cli_command(["channels", "--path", str(soong_env.project)]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env({"TG_TOKEN": TOKEN}),
        )
        try:
            line = read_line(proc)
            assert line == f"channel telegram (telegram) on {soong_env.project}\n", proc.stderr
            fake.message(42, 7, "hello from a stranger")
            fake.message(42, 42, "hi there")
            wait_until(lambda: [m for m in fake.sent("sendMessage") if m["text"] == "pong"], timeout=30)
            time.sleep(0.3)
            assert len(fake.sent("sendMessage")) == 1  # the stranger got nothing
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert proc.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "soong-agent: interrupted"
    assert TOKEN not in stderr
    stored = json.loads((soong_env.home / "channels" / "telegram.json").read_text())
    assert list(stored["sessions"]) == ["42"]


def test_channels_configuration_problems_are_one_line(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    none = run_cli(["channels", "--path", str(soong_env.project)])
    assert none.exit_code == 1 and "no [[channels]]" in none.stderr and len(none.stderr.splitlines()) == 1

    with FakeTelegram(TOKEN) as fake:
        configure(soong_env, scripted_ollama, fake, allowed_users=[])
        strangers = run_cli(["channels", "--path", str(soong_env.project)], env={"TG_TOKEN": TOKEN})
        assert strangers.exit_code == 1, strangers
        assert "allowed_chats or allowed_users is required" in strangers.stderr
        assert "channels[0]" in strangers.stderr and "Traceback" not in strangers.stderr

        configure(soong_env, scripted_ollama, fake)
        missing = run_cli(["channels", "--path", str(soong_env.project)], env={"TG_TOKEN": None})
        assert missing.exit_code == 1, missing
        assert "'TG_TOKEN'" in missing.stderr and "channels[0].token_env" in missing.stderr

        bad = run_cli(["channels", "--path", str(soong_env.project)], env={"TG_TOKEN": "1:wrong-token-value"})
        assert bad.exit_code == 1, bad
        assert "channel telegram stopped: telegram getMe: Unauthorized" in bad.stderr
        assert "wrong-token-value" not in bad.stderr + bad.stdout


def test_serve_runs_the_projects_channels_with_durable_approvals(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    with FakeTelegram(TOKEN) as fake:
        configure(soong_env, scripted_ollama, fake)
        server = start_serve(soong_env, extra_env={"TG_TOKEN": TOKEN})
        try:
            wait_until(lambda: fake.sent("getUpdates"), timeout=30)
            fake.message(42, 42, "please write from-chat.txt")
            question = wait_until(
                lambda: [m for m in fake.sent("sendMessage") if "reply_markup" in m], timeout=30
            )
            with server.client() as client:
                pending = client.get("/api/approvals").json()["approvals"]
                assert [a["tool_name"] for a in pending] == ["code.write_file"]
                data = question[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
                fake.press(42, 42, 1, data)
                wait_until(
                    lambda: [m for m in fake.sent("sendMessage") if m["text"] == "Done writing"], timeout=30
                )
                answered = client.get("/api/approvals", params={"status": "answered"}).json()["approvals"]
                assert [a["request_id"] for a in answered] == [pending[0]["request_id"]]

                # the model's question: a durable question of the API and a chat message; a reply answers
                fake.message(42, 42, "please ask me")
                wait_until(
                    lambda: [m for m in fake.sent("sendMessage") if m["text"].startswith("The agent asks")]
                )
                asked = client.get("/api/questions").json()["questions"]
                assert [q["question"] for q in asked] == ["Which color?"]
                fake.message(42, 42, "green, actually")
                heard = wait_until(
                    lambda: [m for m in fake.sent("sendMessage") if m["text"].startswith("Heard")], timeout=30
                )
                assert "green, actually" in heard[0]["text"]
                done = client.get("/api/questions", params={"status": "answered"}).json()["questions"]
                assert [q["request_id"] for q in done] == [asked[0]["request_id"]]
            assert (soong_env.project / "from-chat.txt").read_text() == "chat\n"
        finally:
            code = server.stop()
        assert code == 0
