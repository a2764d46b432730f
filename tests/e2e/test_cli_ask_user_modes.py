"""``internal.ask_user`` and permission modes on the command line (issue 37 items 2, 3), against the scripted
Ollama server: the question answered inline in ``chat`` and in ``run`` on a real pseudo-terminal (pexpect),
an option picked by its number or answered in the user's own words; ``run`` without a terminal tells the
model nobody can answer; ``chat /mode plan`` then approving the plan; ``run --permission-mode``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pexpect
import pytest

from tests.fixtures.chat_pty import ChatTerminal
from tests.fixtures.cli import TurnScript, chat_requests, cli_env, run_cli, tool_messages
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer

ASK = ("ask_user", {"question": "Which database?\nPick one.", "options": ["SQLite", "PostgreSQL"]})


def answered(request: Any) -> str:
    """The final text: what the ask_user call returned (its tool message)."""
    (message,) = tool_messages(request)
    return f"the tool said: {message['content']}"


def tool_names(request: Any) -> set[str]:
    return {t["function"]["name"] for t in (request.json or {}).get("tools", [])}


@pytest.fixture
def configured(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> SoongEnv:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    return soong_env


@pytest.fixture
def terminals() -> Iterator[list[ChatTerminal]]:
    started: list[ChatTerminal] = []
    yield started
    for term in started:
        term.close()


def test_chat_question_answered_inline_by_option_number(
    configured: SoongEnv, scripted_ollama: ScriptedOllamaServer, terminals: list[ChatTerminal]
) -> None:
    scripted_ollama.handler(TurnScript(lambda r: [ASK], answered))
    term = ChatTerminal(["--path", str(configured.project)])
    terminals.append(term)
    term.wait_prompt()
    term.send_line("set up the service")
    term.wait(lambda: term.at_prompt("Your answer: "), what="the question prompt")
    screen = term.text()
    assert "Question from the agent:" in screen and "Which database?" in screen and "Pick one." in screen
    assert "[1] SQLite" in screen and "[2] PostgreSQL" in screen
    before = term.prompts()
    term.send_line("2")
    term.wait_prompt(after=before)
    assert "the tool said:" in term.text() and "PostgreSQL" in term.text()
    term.send_line("/exit")
    assert term.finish() == 0
    first, second = chat_requests(scripted_ollama)
    assert any("ask_user" in name for name in tool_names(first))
    (result,) = tool_messages(second)
    assert json.loads(result["content"]) == {"answer": "PostgreSQL"}


def test_run_question_answered_in_own_words_on_a_terminal(
    configured: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(TurnScript(lambda r: [ASK], answered))
    child = pexpect.spawn(
        sys.executable,
        ["-m", "agent_core.cli", "run", "--path", str(configured.project), "set up the service"],
        env=cli_env(),
        timeout=30,
        encoding="utf-8",
    )
    try:
        child.expect("Which database\\?")
        child.expect("\\[2\\] PostgreSQL")
        child.expect("Your answer: ")
        child.sendline("")  # an empty line asks again
        child.expect("Your answer: ")
        child.sendline("DuckDB, it is embedded")
        child.expect("the tool said:")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0
    (result,) = tool_messages(chat_requests(scripted_ollama)[1])
    assert json.loads(result["content"]) == {"answer": "DuckDB, it is embedded"}


def test_run_without_a_terminal_tells_the_model_nobody_can_answer(
    configured: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    scripted_ollama.handler(TurnScript(lambda r: [ASK], answered))
    result = run_cli(["run", "--path", str(configured.project), "set up the service"], stdin="PostgreSQL\n")
    assert result.exit_code == 0, result
    assert "Your answer" not in result.stderr  # nothing was read from the piped stdin
    (message,) = tool_messages(chat_requests(scripted_ollama)[1])
    assert "tool_not_available" in message["content"] and "decide yourself" in message["content"]


def test_run_permission_mode_dont_ask_denies_without_reading_stdin(
    configured: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    write = ("write_file", {"path": "a.txt", "content": "x"})
    scripted_ollama.handler(TurnScript(lambda r: [write], lambda r: "gave up"))
    result = run_cli(
        ["run", "--permission-mode", "dont_ask", "--path", str(configured.project), "write it"], stdin="1\n"
    )
    assert result.exit_code == 0, result
    assert "Permission requested" not in result.stderr
    assert "denied (permission)" in result.stderr and "dont_ask" in result.stderr
    assert not (configured.project / "a.txt").exists()
    bad = run_cli(["run", "--permission-mode", "yolo", "--path", str(configured.project), "x"])
    assert bad.exit_code == 2 and "invalid choice" in bad.stderr
    bypass = run_cli(["run", "--permission-mode", "bypass", "--path", str(configured.project), "x"])
    assert bypass.exit_code == 1 and 'sandbox = "bwrap"' in bypass.stderr


def test_chat_mode_plan_then_approving_the_plan_carries_it_out(
    configured: SoongEnv, scripted_ollama: ScriptedOllamaServer, terminals: list[ChatTerminal]
) -> None:
    write = ("write_file", {"path": "plan_done.txt", "content": "done\n"})
    scripted_ollama.handler(
        TurnScript(
            lambda r: "Plan:\n1. write plan_done.txt",
            lambda r: [write],
            lambda r: "Carried out.",
        )
    )
    term = ChatTerminal(["--path", str(configured.project)])
    terminals.append(term)
    term.wait_prompt()
    term.say("/mode plan")
    assert "permission mode plan" in term.text()
    term.send_line("plan the change")
    term.wait(
        lambda: term.at_prompt(
            "Carry out this plan? [y] yes (default mode)  [a] yes, accept edits  [n] keep planning: "
        ),
        what="plan approval",
    )
    assert "write plan_done.txt" in term.text()
    before = term.prompts()
    term.send_line("a")  # accept edits: the write runs without a permission prompt
    term.wait_prompt(after=before)
    assert "Carried out." in term.text() and "Answer [1/2/3]" not in term.text()
    assert (configured.project / "plan_done.txt").read_text() == "done\n"
    term.say("/permissions")
    assert "permission mode: accept_edits" in term.text()
    term.send_line("/exit")
    assert term.finish() == 0
    plan_request, carry_request, _ = chat_requests(scripted_ollama)
    assert not any("write_file" in n or "run_command" in n for n in tool_names(plan_request))
    assert any("write_file" in n for n in tool_names(carry_request))
    contents = [m["content"] for m in carry_request.json["messages"] if m["role"] == "user"]
    assert [c for c in contents if not c.startswith("<system_update")][-1] == "Carry out the plan."
    # the switch reaches the model as an update of the permission_mode block (the system prompt is kept)
    assert 'system_update block="permission_mode"' in contents[-1] and 'mode="accept_edits"' in contents[-1]
    system = " ".join(m["content"] for m in plan_request.json["messages"] if m["role"] == "system")
    assert 'permission_mode mode="plan"' in system


def test_chat_rewind_lists_points_and_puts_files_and_conversation_back(
    configured: SoongEnv, scripted_ollama: ScriptedOllamaServer, terminals: list[ChatTerminal]
) -> None:
    scripted_ollama.handler(
        TurnScript(
            lambda r: [("write_file", {"path": "one.txt", "content": "1"})],
            lambda r: "wrote one",
            lambda r: [("write_file", {"path": "two.txt", "content": "2"})],
            lambda r: "wrote two",
            lambda r: "after the rewind",
        )
    )
    term = ChatTerminal(["--path", str(configured.project), "--permission-mode", "accept_edits"])
    terminals.append(term)
    term.wait_prompt()
    term.say("make one")
    term.say("make two")
    assert (configured.project / "two.txt").exists()
    term.say("/rewind")
    listing = term.text()
    assert "Rewind points" in listing and "wrote one" in listing
    line = next(line for line in term.lines() if "agent: wrote one" in line)
    assert "[1 tool call with file checkpoints after]" in line
    tail = line.split()[0]
    term.say(f"/rewind {tail}")
    assert "rewound: 0 file(s) restored, 1 removed" in term.text()
    assert f"removed  {configured.project / 'two.txt'}" in term.text()
    assert not (configured.project / "two.txt").exists() and (configured.project / "one.txt").exists()
    term.say("and now?")
    assert "after the rewind" in term.text()
    (configured.project / "one.txt").write_text("changed by hand")
    first_user = next(line for line in term.lines() if "you: make one" in line)
    term.say(f"/rewind {first_user.split()[0]}")
    assert (
        "rewind refused, nothing was changed" in term.text()
        and "changed since by someone else" in term.text()
    )
    assert (configured.project / "one.txt").read_text() == "changed by hand"
    term.say("/rewind nope")
    assert "no node 'nope' in this session" in term.text()
    term.send_line("/exit")
    assert term.finish() == 0
    last = chat_requests(scripted_ollama)[-1]
    assert not any("make two" in str(m.get("content")) for m in last.json["messages"])
