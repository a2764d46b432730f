"""Ctrl-C at any moment (issue 32 item 6): SIGINT sent to the ``soong-agent`` script's ``run``, ``chat``,
``serve`` and ``scheduler`` at a spread of delays from 0 to 1.5 s after the process started — during the imports, while the runtime opens,
during a run and while it shuts down. Every time: status 130 (or, for ``chat`` past its startup, the
reply cancelled and a normal exit), at most one ``interrupted`` line, never a traceback, and the session
store intact with every run in a terminal status. ``worker`` is covered in tests/engine/test_worker_cli.py
(it needs the Temporal dev server). The full spread is ``slow``; the default suite sends three delays.

One window is the interpreter's own: from ``exec`` until ``agent_core.cli`` installed its handler (Python's
startup, ``site``, ``agent_core/__init__``'s ``logging`` import, loading ``cli._interrupts``; tens of
milliseconds) Python's default handler is
in force and no code of the project has run, so a SIGINT there is either the signal's default action (the
process is killed: status -2, no output) or Python's own ``KeyboardInterrupt``. :func:`interpreter_startup`
recognises that case, allowed only in the first :data:`STARTUP_WINDOW_S`.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.chat_pty import ChatTerminal, plain
from tests.fixtures.cli import cli_command, cli_env, console_script
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import OllamaWire, ScriptedOllamaServer, stream

SPREAD = (0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0, 1.25, 1.5)
QUICK = (0.3, 1.0)
TERMINAL = {"completed", "failed", "cancelled", "aborted"}
STARTUP_WINDOW_S = 0.15
BANNER = "/help for commands, Ctrl-D to leave"


def interpreter_startup(status: int, err: str) -> bool:
    """SIGINT reached the process before any project code ran (see the module docstring)."""
    if status == -signal.SIGINT and not err:
        return True
    lines = err.strip().splitlines()
    if lines[-1:] != ["KeyboardInterrupt"] or status not in (-signal.SIGINT, 1, 130):
        return False
    # project frames: none, or only the package's first import (the one installing the handler)
    ours = [line for line in lines if "agent_core/cli" in line]
    return all("agent_core/cli/__init__.py" in line for line in ours) and (
        not ours or "from agent_core.cli import _interrupts" in err
    )


def slow_reply(request: object) -> object:
    return stream(OllamaWire.text_stream(*[f"word{i} " for i in range(60)]), 0.05)


def configure(env: SoongEnv, server: ScriptedOllamaServer) -> None:
    env.write_config(model={"provider": "ollama", "base_url": server.base_url})
    server.handler(slow_reply)


def command(kind: str, env: SoongEnv) -> list[str]:
    path = ["--path", str(env.project)]
    return {
        "run": ["run", *path, "tell me a long story"],
        "chat": ["chat", *path],
        "serve": ["serve", *path, "--port", "0"],
        "scheduler": ["scheduler", *path],
    }[kind]


def interrupt_at(env: SoongEnv, kind: str, delay: float) -> tuple[int, str, str]:
    """Starts the command, sends SIGINT after ``delay`` s, returns (status, stdout, stderr)."""
    proc = subprocess.Popen(
        cli_command(command(kind, env), script=console_script()),
        stdin=subprocess.PIPE if kind == "chat" else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    stdin, proc.stdin = proc.stdin, None  # written here, never by communicate()
    if stdin is not None:  # one message, and stdin stays open (the chat waits at its prompt)
        stdin.write("tell me a long story\n")
        stdin.flush()
    try:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        if stdin is not None:  # past its startup a chat goes on: end of input leaves it
            time.sleep(0.3)
            with contextlib.suppress(BrokenPipeError):
                stdin.close()
        out, err = proc.communicate(timeout=45)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    return proc.returncode, out, err


def check_store(env: SoongEnv) -> None:
    """No half-written state: the database is intact and every run has a terminal status."""
    path = env.home / "sessions.sqlite"
    if not path.exists():
        return
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "runs" in tables:
            statuses = [r[0] for r in conn.execute("SELECT status FROM runs")]
            assert set(statuses) <= TERMINAL, statuses
    finally:
        conn.close()


def check(kind: str, delay: float, status: int, out: str, err: str) -> None:
    where = f"{kind} at {delay:.2f} s: status {status}\n--- stdout ---\n{out}\n--- stderr ---\n{err}"
    if interpreter_startup(status, err):
        assert delay < STARTUP_WINDOW_S and not out, where
        return
    assert "Traceback" not in err and "Event loop is closed" not in err, where
    assert "Error" not in err.replace("error:", ""), where
    assert err.count("interrupted") <= 1, where
    if kind == "chat" and status == 0:  # the chat was past its startup: the reply was cancelled
        return
    assert status == 130, where
    if "soong-agent: interrupted" in err:
        assert err.strip().splitlines()[-1] == "soong-agent: interrupted", where


def spread(env: SoongEnv, server: ScriptedOllamaServer, kind: str, delays: tuple[float, ...]) -> None:
    configure(env, server)
    if kind == "scheduler":
        env.write_config(model={"provider": "ollama", "base_url": server.base_url})
    for delay in delays:
        status, out, err = interrupt_at(env, kind, delay)
        check(kind, delay, status, out, err)
        check_store(env)


@pytest.mark.parametrize("kind", ["run", "chat", "serve", "scheduler"])
def test_ctrl_c_at_three_moments(
    kind: str, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    spread(soong_env, scripted_ollama, kind, QUICK)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["run", "chat", "serve", "scheduler"])
def test_ctrl_c_at_a_spread_of_moments(
    kind: str, soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    spread(soong_env, scripted_ollama, kind, SPREAD)


def test_ctrl_c_while_a_run_streams_is_one_cancel_line_and_130(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    configure(soong_env, scripted_ollama)
    proc = subprocess.Popen(
        cli_command(command("run", soong_env)),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    assert proc.stdout is not None
    first = proc.stdout.read(5)  # the reply streams
    assert first == "word0"
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert err.count("[run] cancelling") == 1 and "[run] cancelled" in err
    assert "Traceback" not in err and "soong-agent: interrupted" not in err  # the run's line says it
    check_store(soong_env)


def test_chat_on_a_terminal_interrupted_during_startup(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """pexpect: Ctrl-C while the chat starts (before its prompt) is one line and status 130."""
    configure(soong_env, scripted_ollama)
    seen: list[tuple[float, int, str]] = []
    for delay in (0.1, 0.2, 0.35):
        term = ChatTerminal(["--path", str(soong_env.project)])
        try:
            time.sleep(delay)
            term.child.kill(signal.SIGINT)
            deadline = time.monotonic() + 20
            while not term.eof and BANNER not in plain(term.raw) and time.monotonic() < deadline:
                term.pump(0.1)
            if BANNER in plain(term.raw):  # it reached its prompt first: there Ctrl-C is a key, not a signal
                # the Ctrl-C may still come first at the prompt (its note, then a new prompt); a Ctrl-D sent
                # before a prompt holds the terminal would be the line discipline's end of file, not a key
                term.wait_prompt()
                term.ctrl_d()
                assert term.finish() == 0, plain(term.raw)
                continue
            status = term.finish()
        finally:
            term.close()
        text = plain(term.raw)
        seen.append((delay, status, text))
        if interpreter_startup(status, text.replace("\r", "")):
            assert delay < STARTUP_WINDOW_S, text
            continue
        assert "Traceback" not in text, text
        assert status == 130, text
        assert text.strip().splitlines()[-1] == "soong-agent: interrupted", text
    assert seen, "the chat reached its prompt before every Ctrl-C"
    check_store(soong_env)


def test_interrupt_module_is_only_installed_by_the_program(tmp_path: Path) -> None:
    """Importing the CLI package (a test, an embedding application) leaves SIGINT alone."""
    code = (  # compared with what the child inherited (a shell's background job starts with SIGINT ignored)
        "import signal\n"
        "before = signal.getsignal(signal.SIGINT)\n"
        "import agent_core.cli\n"
        "print(signal.getsignal(signal.SIGINT) is before)\n"
    )
    done = subprocess.run(
        [*cli_command([])[:1], "-c", code], capture_output=True, text=True, env=cli_env(), check=True
    )
    assert done.stdout.strip() == "True"
