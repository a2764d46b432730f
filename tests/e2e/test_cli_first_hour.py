"""Issue 32, the first hour at the terminal (pexpect + pyte, and piped): the model status line of ``run`` and
``chat``, permission answers in ``chat``, chat polish and credentials checked at
startup. The scripted Ollama server is the model; a slow first token is an empty frame first.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.chat_pty import ChatTerminal, plain
from tests.fixtures.cli import TurnScript, chat_requests, cli_env, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.scripted_servers import OllamaWire, ScriptedOllamaServer, hold_open, stream

RATE = re.compile(
    r"\[model\] \d+ tokens at [\d.]+ tokens/s \(first token after [\d.]+ s, [\d,]+ prompt tokens\)"
)


def slow_first_token(text: str, wait_s: float) -> Any:
    """A reply whose first token comes after ``wait_s`` (the model reading a long prompt)."""
    return stream([OllamaWire.content(""), OllamaWire.content(text), OllamaWire.done("stop")], wait_s)


def reply(text: str) -> Any:
    return lambda request: text


def user_texts(server: ScriptedOllamaServer) -> list[str]:
    return [
        str(m.get("content"))
        for r in chat_requests(server)
        for m in (r.json or {}).get("messages", [])
        if m.get("role") == "user"
    ]


@pytest.fixture
def terminals(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> Iterator[list[ChatTerminal]]:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    started: list[ChatTerminal] = []
    yield started
    for term in started:
        term.close()


def chat(started: list[ChatTerminal], env: SoongEnv, *args: str) -> ChatTerminal:
    term = ChatTerminal(["--path", str(env.project), *args])
    started.append(term)
    term.wait_prompt()
    return term


# -- visibly alive -------------------------------------------------------------------------------


def test_run_on_a_terminal_shows_a_spinner_until_the_first_token_then_the_rate(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.enqueue(slow_first_token("Waited well.", 1.5))
    term = ChatTerminal(["--path", str(soong_env.project), "hello"], command="run")
    terminals.append(term)
    term.wait(lambda: b"waiting 1." in term.raw, what="the seconds waited counting up")
    shown = plain(term.raw)
    assert re.search(r"[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] test-model · [\d,]+ prompt tokens · waiting 0\.\d s", shown), shown
    assert term.finish() == 0
    screen = term.text()
    assert "waiting" not in screen  # the spinner line is erased, not left behind
    assert "Waited well." in screen and RATE.search(screen), screen


def test_run_without_a_terminal_writes_one_status_line_and_the_rate(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.enqueue(slow_first_token("Waited well.", 0.3))
    result = run_cli(["run", "--path", str(soong_env.project), "hello"])
    assert result.exit_code == 0, result
    assert result.stdout == "Waited well.\n"
    lines = result.stderr.splitlines()
    waiting = [line for line in lines if line.startswith("[model] waiting for")]
    assert len(waiting) == 1 and re.fullmatch(
        r"\[model\] waiting for test-model \([\d,]+ prompt tokens\)", waiting[0]
    )
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    assert any(RATE.fullmatch(line) for line in lines), result
    assert lines.index(waiting[0]) < next(i for i, line in enumerate(lines) if RATE.fullmatch(line))


def test_chat_shows_the_spinner_and_the_rate_after_the_answer(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.enqueue(slow_first_token("Waited well.", 1.2))
    term = chat(terminals, soong_env)
    before = term.prompts()
    term.send_line("hello")
    term.wait(lambda: b"waiting 1." in term.raw, what="the spinner")
    term.wait_prompt(after=before)
    screen = term.text()
    assert "waiting" not in screen and "Waited well." in screen and RATE.search(screen), screen
    term.send_line("/exit")
    assert term.finish() == 0


# -- permission answers in chat ------------------------------------------------------------------


def write_then(text: str) -> TurnScript:
    return TurnScript(lambda r: [("write_file", {"path": "x.txt", "content": "x\n"})], reply(text))


def at_answer(term: ChatTerminal) -> None:
    term.wait(lambda: term.at_prompt("Answer [1/2/3]: "), what="the permission prompt")


def test_yes_allows_once_and_an_unrecognised_answer_re_prompts_with_the_choices(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(write_then("Written."))
    term = chat(terminals, soong_env)
    term.send_line("write x")
    at_answer(term)
    term.send_line("maybe")
    term.wait_text("'maybe' is not an answer: type 1 (allow once), 2 (allow for session) or 3 (deny)")
    assert "y/yes = allow once" in term.text() and "(2 more tries)" in term.text()
    at_answer(term)
    before = term.prompts()
    term.send_line("yes")
    term.wait_prompt(after=before)
    assert "-> allow once" in term.text() and "Written." in term.text()
    assert (soong_env.project / "x.txt").read_text() == "x\n"
    assert "maybe" not in user_texts(scripted_ollama) and "yes" not in user_texts(scripted_ollama)
    term.send_line("/exit")
    assert term.finish() == 0


def test_three_unrecognised_answers_deny_and_no_answer_becomes_a_message(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(TurnScript(*write_then("Not written.").turns, reply("You said 2.")))
    term = chat(terminals, soong_env)
    term.send_line("write x")
    for answer in ("sure", "ok", "please"):
        at_answer(term)
        term.send_line(answer)
    term.wait_text(
        "-> deny (unrecognised answer 'please'; valid answers: 1/allow once, 2/allow for session, 3/deny)"
    )
    term.wait_text("Not written.")
    term.wait_prompt()
    assert not (soong_env.project / "x.txt").exists()
    term.say("2")  # meant for the closed prompt: held back, not sent
    assert "not sent: '2' looks like an answer to the permission prompt" in term.text()
    assert len(chat_requests(scripted_ollama)) == 2
    term.say("2")  # typed again: it is a message
    assert "You said 2." in term.text()
    assert user_texts(scripted_ollama)[-1] == "2"
    assert not {"sure", "ok", "please"} & set(user_texts(scripted_ollama))
    term.send_line("/exit")
    assert term.finish() == 0


def test_a_slash_command_typed_at_the_answer_prompt_runs_after_the_reply(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(write_then("Written."))
    term = chat(terminals, soong_env)
    term.send_line("write x")
    at_answer(term)
    term.send_line("/usage")
    term.wait_text("(/usage runs when this reply ends)")
    at_answer(term)  # it did not count as an answer
    before = term.prompts()
    term.send_line("1")
    term.wait_prompt(after=before)
    screen = term.text()
    assert screen.index("Written.") < screen.index("1 run(s); tokens:")
    term.send_line("/exit")
    assert term.finish() == 0


# -- chat polish ---------------------------------------------------------------------------------


def test_banner_and_a_cancelled_reply_once_on_screen_and_kept_in_history(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.enqueue(hold_open([OllamaWire.content("The story begins\n\nand goes on and on ")]))
    term = chat(terminals, soong_env)
    banner = term.lines()[0]
    assert banner == (
        f"soong-agent chat · test-model (ollama) · {soong_env.project} · new session · "
        "/help for commands, Ctrl-D to leave"
    )
    term.send_line("tell me a long story")
    term.wait_text("and goes on and on")
    before = term.prompts()
    term.ctrl_c()
    term.wait_prompt(after=before)
    assert term.count("and goes on and on") == 1 and term.count("The story begins") == 1, term.text()
    assert "[cancelled]" in term.text()
    term.say("/history")
    history = term.text().split("> /history", 1)[1]
    assert "you: tell me a long story" in history
    assert "assistant: The story begins and goes on and on  [cancelled]" in history
    term.send_line("/exit")
    assert term.finish() == 0


def test_a_command_typed_while_a_reply_streams_runs_after_it(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    words = [f"w{i} " for i in range(12)]
    scripted_ollama.enqueue(stream(OllamaWire.text_stream(*words), 0.15))
    term = chat(terminals, soong_env)
    term.send_line("tell me")
    term.wait_text("w1")
    term.send_line("/usage")  # typed while the reply streams: not echoed into it, run after it
    term.wait_text("1 run(s); tokens:")
    screen = term.text()
    assert screen.count("w11") == 1 and "/usage" not in screen.split("> tell me", 1)[1].split("w11")[0]
    assert screen.index("w11") < screen.index("1 run(s); tokens:")
    term.send_line("/exit")
    assert term.finish() == 0


def test_branch_and_fork_take_a_unique_start_or_end_of_a_node_id(
    terminals: list[ChatTerminal], soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(TurnScript(reply("one"), reply("two"), reply("branched")))
    term = chat(terminals, soong_env)
    term.say("q1")
    term.say("q2")
    (session,) = rows(soong_env, "SELECT session_id FROM sessions")
    nodes = rows(soong_env, f'SELECT node_id, role FROM "nodes_{session[0]}" ORDER BY node_seq')
    first_answer = next(n["node_id"] for n in nodes if n["role"] == "assistant")
    term.say("/branch node_")
    assert re.search(r"error: 'node_' is the start of \d+ node ids", term.text())
    term.say(f"/branch {first_answer[-8:]}")  # the random tail
    assert f"active leaf is now {first_answer}" in term.text()
    term.say("q3")
    assert [m for m in user_texts(scripted_ollama)][-2:] == ["q1", "q3"]
    term.say(f"/fork {first_answer[:-3]}")  # a unique start
    assert f"forked {session[0]} at {first_answer} into session" in term.text()
    term.send_line("/exit")
    assert term.finish() == 0


def test_a_missing_config_stops_chat_before_the_prompt_with_the_error_once(soong_env: SoongEnv) -> None:
    term = ChatTerminal(["--path", str(soong_env.project)])
    try:
        assert term.finish() == 1
    finally:
        term.close()
    text = plain(term.raw)
    assert "> " not in text  # no prompt was shown
    assert text.count("config file not found") == 1 and "minimal config.toml:" in text
    piped = subprocess.run(
        [sys.executable, "-m", "agent_core.cli", "chat", "--path", str(soong_env.project)],
        input="hello\n",
        capture_output=True,
        text=True,
        env=cli_env(),
        timeout=60,
        check=False,
    )
    assert piped.returncode == 1 and piped.stdout == ""
    assert piped.stderr.count("config file not found") == 1 and "> " not in piped.stderr


# -- credentials at startup ----------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "chat", "serve"])
def test_an_unset_api_key_variable_fails_startup_naming_it(
    command: str, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(
        model={
            "provider": "openai",
            "base_url": scripted_ollama.base_url,
            "api_key_env": "SOONG_FIRST_HOUR_KEY",
        }
    )
    args = {"run": ["run", "hello"], "chat": ["chat"], "serve": ["serve", "--port", "0"]}[command]
    result = run_cli(
        [*args, "--path", str(soong_env.project)], stdin="hello\n", env={"SOONG_FIRST_HOUR_KEY": ""}
    )
    assert result.exit_code == 1, result
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(
        "soong-agent: error: environment variable SOONG_FIRST_HOUR_KEY is not set or empty"
    )
    assert "model.api_key_env" in line and str(soong_env.config_path) in line
    assert result.stdout == ""
    assert not (soong_env.home / "sessions.sqlite").exists()  # no session, nothing opened
    assert chat_requests(scripted_ollama) == []
