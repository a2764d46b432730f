"""CLI permission prompts answered on stdin (docs/cli.md#run, docs/cli.md,
cases O5–O7): the answer mapping, the prompt content, allow once / allow for session / deny end to end
through ``code.write_file`` against the scripted Ollama server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_core.cli._prompt import describe_request, parse_permission_answer
from agent_core.cli._terminal import StdinLines as _StdinLines
from agent_core.types.enums import PermissionDecisionKind
from agent_core.types.permissions import PermissionRequest
from tests.fixtures.cli import TurnScript, chat_requests, run_cli, tool_messages
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer

PROMPT = "Permission requested by"


def write(path: str, content: str, overwrite: bool = False) -> tuple[str, dict[str, object]]:
    args: dict[str, object] = {"path": path, "content": content}
    if overwrite:
        args["overwrite"] = True
    return ("write_file", args)


def setup(env: SoongEnv, server: ScriptedOllamaServer, script: TurnScript) -> None:
    env.write_config(model={"provider": "ollama", "base_url": server.base_url})
    server.handler(script)


# -- the answer mapping -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("1", "allow_once"),
        ("allow once", "allow_once"),
        ("2", "allow_for_session"),
        ("Allow For Session", "allow_for_session"),
        ("3", "deny"),
        ("deny", "deny"),
        ("foo", "deny"),
        (None, "deny"),  # EOF
        ("  1 \n", "allow_once"),
        ("ALLOW   ONCE\r\n", "allow_once"),
        ("", "deny"),
        ("4", "deny"),
        ("yes", "deny"),
        ("allow", "deny"),
    ],
)
def test_answer_mapping(answer: str | None, decision: str) -> None:
    """Cases H7, O5, O6, O7."""
    assert parse_permission_answer(answer) == decision


def request(**overrides: object) -> PermissionRequest:
    fields: dict[str, object] = {
        "request_id": "perm_1",
        "session_id": "sess_1",
        "agent_id": "agent_child",
        "run_id": "run_child",
        "parent_agent_id": "agent_parent",
        "parent_run_id": "run_parent",
        "agent_role": "worker",
        "tool_name": "code.run_command",
        "permission": "write",
        "tags": ["code", "dangerous"],
        "args_summary": '{"argv":["make"]}',
        "target_scope": "/usr/bin/make @ /p",
        "cwd": "/p",
        "env_summary": {"PATH": "<set>"},
        "dangerous": True,
        "suggested_decision": PermissionDecisionKind.allow_once,
    }
    fields.update(overrides)
    return PermissionRequest.model_validate(fields)


def test_prompt_shows_everything_needed_to_decide() -> None:
    """Case O5."""
    text = describe_request(request())
    for expected in (
        "worker agent agent_child (run run_child)",
        "code.run_command",
        "permission: write",
        "dangerous: yes",
        "code, dangerous",
        '{"argv":["make"]}',
        "/usr/bin/make @ /p",
        "cwd:        /p",
        "agent agent_parent, run run_parent",
        "[1] allow once   [2] allow for session   [3] deny",
    ):
        assert expected in text, expected
    plain = describe_request(request(parent_agent_id=None, parent_run_id=None, dangerous=False, metadata={}))
    assert "dangerous: no" in plain and "parent:" not in plain
    no_scope = describe_request(request(target_scope=None, metadata={"allow_for_session_available": False}))
    assert "2 acts as allow once" in no_scope


# -- the stdin reader ------------------------------------------------------------------------------------


async def test_stdin_reader_queues_lines_eof_and_timeout() -> None:
    """Cases H7, O7."""
    read_fd, write_fd = os.pipe()
    reader = os.fdopen(read_fd, "r")
    try:
        lines = _StdinLines(reader)
        os.write(write_fd, b"1\nallow for session\n")
        assert await lines.readline(5) == (True, "1")
        assert await lines.readline(5) == (True, "allow for session")
        started = time.monotonic()
        assert await lines.readline(0.2) == (False, None)  # timeout → no answer
        assert time.monotonic() - started < 2
        os.write(write_fd, b"3")  # a last line without newline, then EOF
        os.close(write_fd)
        write_fd = -1
        assert await lines.readline(5) == (True, "3")
        assert await lines.readline(5) == (True, None)
        assert await lines.readline(5) == (True, None)  # EOF is final
    finally:
        if write_fd >= 0:
            os.close(write_fd)
        reader.close()


async def test_unavailable_stdin_is_end_of_input() -> None:
    """Case O7."""
    assert await _StdinLines(None).readline(1) == (True, None)
    assert parse_permission_answer(None) == "deny"


# -- end to end through code.write_file ---------------------------------------------------------------


def test_allow_once_prompts_for_each_write(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O5."""
    script = TurnScript(
        lambda r: [write("notes.txt", "one")],
        lambda r: [write("notes.txt", "two", overwrite=True)],
        lambda r: "Both writes done.",
    )
    setup(soong_env, scripted_ollama, script)
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "write notes"], stdin="1\n1\n")
    assert result.exit_code == 0, result
    assert result.stderr.count(PROMPT) == 2
    assert result.stderr.count("-> allow once") == 2
    assert (soong_env.project / "notes.txt").read_text() == "two"
    assert result.stdout == "Both writes done.\n"
    assert "[tool] code.write_file done" in result.stderr


def test_allow_once_spelled_out(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case O5."""
    script = TurnScript(lambda r: [write("a.txt", "A")], lambda r: "written")
    setup(soong_env, scripted_ollama, script)
    result = run_cli(["run", "--path", str(soong_env.project), "write"], stdin="  Allow Once \n")
    assert result.exit_code == 0, result
    assert result.stderr.count(PROMPT) == 1
    assert (soong_env.project / "a.txt").read_text() == "A"


@pytest.mark.parametrize("answer", ["2\n", "Allow For Session\n"])
def test_allow_for_session_prompts_once_per_invocation(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, answer: str
) -> None:
    """Case O6."""
    script = TurnScript(
        lambda r: [write("notes.txt", "one")],
        lambda r: [write("notes.txt", "two", overwrite=True)],
        lambda r: [write("notes.txt", "three", overwrite=True)],
        lambda r: "first invocation done",
        lambda r: [write("notes.txt", "four", overwrite=True)],
        lambda r: "second invocation done",
    )
    setup(soong_env, scripted_ollama, script)
    first = run_cli(["run", "--path", str(soong_env.project), "write notes"], stdin=answer)
    assert first.exit_code == 0, first
    assert first.stderr.count(PROMPT) == 1
    assert first.stderr.count("-> allow for session") == 1
    assert first.stderr.count("[tool] code.write_file done") == 3
    assert (soong_env.project / "notes.txt").read_text() == "three"
    session_id = first.stderr.rsplit("session_id: ", 1)[1].strip()

    # a new invocation (same session) forgets the grant: it prompts again; EOF → deny
    second = run_cli(
        ["run", "--path", str(soong_env.project), "--session-id", session_id, "again"], stdin=None
    )
    assert second.exit_code == 0, second
    assert second.stderr.count(PROMPT) == 1
    assert "-> deny (end of input)" in second.stderr
    assert "[tool] code.write_file denied" in second.stderr
    assert (soong_env.project / "notes.txt").read_text() == "three"


@pytest.mark.parametrize(
    ("stdin", "why"),
    [
        pytest.param("3\n", "", id="3"),
        pytest.param("deny\n", "", id="deny"),
        pytest.param(
            "x\n",
            "unrecognised answer 'x'; valid answers: 1/allow once, 2/allow for session, 3/deny",
            id="invalid",
        ),
        pytest.param(None, "end of input", id="eof"),
    ],
)
def test_deny_stops_the_turn_and_the_run_continues(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, stdin: str | None, why: str
) -> None:
    """Case O7."""
    script = TurnScript(
        lambda r: [
            write("denied.txt", "nope"),
            ("run_command", {"argv": ["touch", "side-effect.txt"]}),
            write("later.txt", "nope"),
        ],
        lambda r: "Understood, nothing was written.",
    )
    setup(soong_env, scripted_ollama, script)
    result = run_cli(["run", "--path", str(soong_env.project), "write"], stdin=stdin)
    assert result.exit_code == 0, result
    assert result.stderr.count(PROMPT) == 1  # the calls after the denial never ask
    assert f"-> deny ({why})" in result.stderr if why else "-> deny\n" in result.stderr
    assert "[tool] code.write_file denied (permission)" in result.stderr
    assert list(soong_env.project.iterdir()) == []  # no file, no command side effect
    assert result.stdout == "Understood, nothing was written.\n"
    results = tool_messages(chat_requests(scripted_ollama)[1])
    assert [m["content"].split("]")[0] for m in results] == [
        "[error permission_denied",
        "[error cancelled",
        "[error cancelled",
    ]


def test_write_outside_project_suggests_deny(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, tmp_path: Path
) -> None:
    """Case O7."""
    outside = tmp_path / "outside.txt"
    script = TurnScript(lambda r: [write(str(outside), "x")], lambda r: "ok")
    setup(soong_env, scripted_ollama, script)
    result = run_cli(["run", "--path", str(soong_env.project), "write"], stdin="3\n")
    assert result.exit_code == 0, result
    assert "suggested:  deny" in result.stderr
    assert f"target:     {outside}" in result.stderr
    assert not outside.exists()


def test_no_prompt_for_readonly_tools(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case O5."""
    soong_env.write_project("readme.md", "hello\n")
    script = TurnScript(lambda r: [("read_file", {"path": "readme.md"})], lambda r: "read it")
    setup(soong_env, scripted_ollama, script)
    result = run_cli(["run", "--path", str(soong_env.project), "read"], stdin=None)
    assert result.exit_code == 0, result
    assert PROMPT not in result.stderr
    assert '"content":"hello"' in tool_messages(chat_requests(scripted_ollama)[1])[0]["content"]


def test_pending_prompt_does_not_block_exit() -> None:
    """Case O7: A reader thread still blocked on stdin never keeps the process alive (daemon, fd-level
    read)."""
    code = (
        "import asyncio, sys\n"
        "from agent_core.cli._terminal import StdinLines as _StdinLines\n"
        "async def main():\n"
        "    print(await _StdinLines(sys.stdin).readline(0.1))\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.wait(timeout=10)  # stdin stays open: no EOF ever arrives
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdin.close()
        proc.stdout.close()
    assert proc.returncode == 0 and out.strip() == "(False, None)"


def test_grant_covers_only_the_same_scope(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case O6."""
    script = TurnScript(
        lambda r: [write("a.txt", "A")],
        lambda r: [write("b.txt", "B")],
        lambda r: "done",
    )
    setup(soong_env, scripted_ollama, script)
    result = run_cli(["run", "--path", str(soong_env.project), "write"], stdin="2\n1\n")
    assert result.exit_code == 0, result
    assert result.stderr.count(PROMPT) == 2  # b.txt is another scope: it asks again
    assert sorted(p.name for p in soong_env.project.iterdir()) == ["a.txt", "b.txt"]
