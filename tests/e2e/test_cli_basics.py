"""``soong-agent`` CLI end to end (cases area O, A2; docs/configuration.md; docs/testing.md): real
subprocesses (``python -m agent_core.cli`` and the installed console script) against the scripted provider
servers running on their own thread in the test process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.fixtures.cli import chat_requests, cli_command, cli_env, console_script, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    error,
    stream,
)

SESSION_RE = re.compile(r"^session_id: (sess_\w+)$", re.MULTILINE)


def use_ollama(env: SoongEnv, server: ScriptedOllamaServer, **overrides: object) -> None:
    env.write_config(model={"provider": "ollama", "base_url": server.base_url}, **overrides)


def session_id_of(stderr: str) -> str:
    found = SESSION_RE.findall(stderr)
    assert len(found) == 1, stderr
    return str(found[0])


def home_and_project_files(env: SoongEnv) -> list[str]:
    return sorted(str(p.relative_to(env.home.parent)) for p in env.home.parent.rglob("*"))


# -- A2: help, usage errors, console script ---------------------------------------------------------


def test_help_lists_run_and_options_without_init_or_json(soong_env: SoongEnv) -> None:
    """Case A2."""
    top = run_cli(["--help"])
    assert top.exit_code == 0, top
    assert "run" in top.stdout and "usage: soong-agent" in top.stdout
    sub = run_cli(["run", "--help"])
    assert sub.exit_code == 0, sub
    for option in ("--path", "--orchestrator", "--session-id", "message"):
        assert option in sub.stdout, option
    for text in (top.stdout, sub.stdout):
        assert "init" not in text
        assert "--json" not in text
    assert not soong_env.config_path.exists()


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["run"], id="missing-message"),
        pytest.param(["run", "   "], id="empty-message"),
        pytest.param(["init"], id="init"),
        pytest.param(["run", "--json", "x"], id="json"),
        pytest.param([], id="no-command"),
        pytest.param(["chat", "x"], id="chat"),
    ],
)
def test_usage_errors_exit_2(soong_env: SoongEnv, args: list[str]) -> None:
    """Case A2."""
    result = run_cli(args)
    assert result.exit_code == 2, result
    assert result.stdout == ""
    assert "usage: soong-agent" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(soong_env.home.iterdir()) == []  # usage errors never touch the home


def test_console_script_exists_and_behaves_the_same(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case A2."""
    script = console_script()
    assert script is not None, "the soong-agent console script is not installed next to the interpreter"
    assert Path(script).parent == Path(sys.executable).parent
    for args in (["--help"], ["run", "--help"], ["init"], ["run", "--json", "x"]):
        via_script = run_cli(args, script=script)
        via_module = run_cli(args)
        assert via_script.exit_code == via_module.exit_code, args
        assert via_script.stdout == via_module.stdout, args
    use_ollama(soong_env, scripted_ollama)
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("Hello from ", "the script")))
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "hi"], script=script)
    assert result.exit_code == 0, result
    assert result.stdout == "Hello from the script\n"


def test_cli_import_is_lazy() -> None:
    """Case A2: Cold start: importing the CLI (and parsing --help) loads neither the runtime nor
    pydantic/httpx."""
    code = (
        "import sys, agent_core.cli as c\n"
        "try:\n    c.build_parser().parse_args(['run', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('agent_core', 'pydantic', 'httpx', 'aiosqlite', 'yaml', 'mcp')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # _interrupts: the Ctrl-C handling installed before anything else (issue 32; stdlib only)
    assert (
        done.stdout.strip().splitlines()[-1]
        == "['agent_core', 'agent_core.cli', 'agent_core.cli._interrupts']"
    )


# -- O1 and startup failures -------------------------------------------------------------------------


def test_missing_config_exits_1_naming_the_path(soong_env: SoongEnv) -> None:
    """Case O1."""
    result = run_cli(["run", "--plain", "hi"], cwd=soong_env.project)
    assert result.exit_code == 1, result
    assert result.stdout == ""
    first, *rest = result.stderr.strip().splitlines()
    assert str(soong_env.config_path) in first
    assert "config" in first and "not found" in first
    # issue 32: the line names the packaged template, and the minimal config follows it (and parses)
    from agent_core._asset_loader import CONFIG_TEMPLATE_ID, packaged_location

    template = packaged_location(CONFIG_TEMPLATE_ID)
    assert template in first and Path(template).is_file()
    assert rest[0] == "minimal config.toml:" and "    [model]" in rest
    minimal = tomllib.loads("\n".join(line.removeprefix("    ") for line in rest[1:]))
    assert minimal["model"]["provider"] == "ollama" and minimal["model"]["name"]
    assert "Traceback" not in result.stderr
    assert not soong_env.config_path.exists()
    assert list(soong_env.home.iterdir()) == []
    assert list(soong_env.project.iterdir()) == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param("[model\nprovider = 'ollama'\n", "invalid TOML", id="toml-syntax"),
        pytest.param(None, "unknown key", id="unknown-key"),
    ],
)
def test_invalid_config_exits_1_with_the_path(soong_env: SoongEnv, raw: str | None, expected: str) -> None:
    """Case O1."""
    if raw is None:
        soong_env.write_config(model={"provider": "ollama", "bogus_key": 1})
    else:
        soong_env.write_config(raw=raw)
    before = soong_env.config_path.read_bytes()
    result = run_cli(["run", "--path", str(soong_env.project), "hi"])
    assert result.exit_code == 1, result
    assert str(soong_env.config_path) in result.stderr and expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert soong_env.config_path.read_bytes() == before
    assert sorted(p.name for p in soong_env.home.iterdir()) == ["config.toml"]
    assert list(soong_env.project.iterdir()) == []


def test_missing_path_is_a_startup_failure(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case O1."""
    soong_env.write_config(model={"provider": "ollama", "base_url": "http://127.0.0.1:9"})
    missing = tmp_path / "no-such-project"
    result = run_cli(["run", "--path", str(missing), "hi"])
    assert result.exit_code == 1, result
    assert str(missing) in result.stderr
    assert not missing.exists()
    assert not (soong_env.home / "sessions.sqlite").exists()


def test_unknown_session_id_fails_readably(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O1."""
    use_ollama(soong_env, scripted_ollama)
    for session_id, expected in (
        ("sess_20990101_000000_abcdefabcdef", "unknown session"),
        ("../x", "invalid id"),
    ):
        result = run_cli(["run", "--path", str(soong_env.project), "--session-id", session_id, "hi"])
        assert result.exit_code == 1, result
        assert expected in result.stderr and "Traceback" not in result.stderr
    assert chat_requests(scripted_ollama) == []


# -- O2, O3: project resolution ------------------------------------------------------------------------


def test_path_directory_streams_text_and_uses_user_config(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O2."""
    use_ollama(soong_env, scripted_ollama)
    # a project-level config naming another model/server is ignored (docs/configuration.md#home-and-project)
    soong_env.write_project(
        ".soong-agent/config.toml", '[model]\nprovider = "openai"\nbase_url = "http://127.0.0.1:9/v1"\n'
    )
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("Hello", ", ", "project!")))
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "hello"], cwd=soong_env.home)
    assert result.exit_code == 0, result
    assert result.stdout == "Hello, project!\n"
    session_id = session_id_of(result.stderr)
    (session,) = rows(soong_env, "SELECT cwd FROM sessions WHERE session_id = ?", session_id)
    assert session["cwd"] == str(soong_env.project.resolve())
    (request,) = chat_requests(scripted_ollama)
    assert request.json["model"] == "test-model"
    assert request.json["messages"][-1] == {"role": "user", "content": "hello"}


def test_default_path_is_cwd(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case O2."""
    use_ollama(soong_env, scripted_ollama)
    (soong_env.project / "pkg").mkdir()
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("ok")))
    result = run_cli(["run", "hello"], cwd=soong_env.project / "pkg")
    assert result.exit_code == 0, result
    (session,) = rows(soong_env, "SELECT cwd FROM sessions")
    assert session["cwd"] == str((soong_env.project / "pkg").resolve())


def test_path_file_uses_parent_and_never_reads_it(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O3."""
    use_ollama(soong_env, scripted_ollama)
    marker = "CONTENT_MARKER_7f3a9c"
    source = soong_env.write_project("src/a.py", f"print('{marker}')\n")
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("seen")))
    result = run_cli(["run", "--path", str(source), "--plain", "hello"])
    assert result.exit_code == 0, result
    (session,) = rows(soong_env, "SELECT cwd FROM sessions")
    assert session["cwd"] == str(soong_env.project / "src")
    assert scripted_ollama.requests, "the model was never called"
    for request in scripted_ollama.requests:
        assert marker.encode() not in request.body
    assert "src/a.py" not in result.stderr  # no tool touched it either


# -- providers: the same CLI against each wire protocol -------------------------------------------------


def test_cli_against_openai_and_anthropic_servers(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, scripted_anthropic: ScriptedAnthropicServer
) -> None:
    """Case O2."""
    key_env = {"SOONG_TEST_API_KEY": "sk-test-secret-value-123"}
    soong_env.write_config(
        model={
            "provider": "openai",
            "base_url": scripted_openai.base_url,
            "api_key_env": "SOONG_TEST_API_KEY",
        }
    )
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("Open", "AI says hi")))
    result = run_cli(["run", "--path", str(soong_env.project), "hi"], env=key_env)
    assert result.exit_code == 0, result
    assert result.stdout == "OpenAI says hi\n"
    assert scripted_openai.requests[0].headers["authorization"] == "Bearer sk-test-secret-value-123"

    soong_env.write_config(
        model={
            "provider": "anthropic",
            "base_url": scripted_anthropic.base_url,
            "api_key_env": "SOONG_TEST_API_KEY",
        }
    )
    scripted_anthropic.enqueue(stream(AnthropicWire.text_stream("Claude ", "says hi")))
    result = run_cli(["run", "--path", str(soong_env.project), "hi"], env=key_env)
    assert result.exit_code == 0, result
    assert result.stdout == "Claude says hi\n"
    assert scripted_anthropic.requests[0].headers["x-api-key"] == "sk-test-secret-value-123"
    db = soong_env.home / "sessions.sqlite"
    assert b"sk-test-secret-value-123" not in db.read_bytes()


# -- O11: continuing a session -------------------------------------------------------------------------


def test_session_id_continues_the_session(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case O11."""
    use_ollama(soong_env, scripted_ollama)
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("The answer is 42.")))
    first = run_cli(["run", "--path", str(soong_env.project), "What is the answer?"])
    assert first.exit_code == 0, first
    session_id = session_id_of(first.stderr)

    scripted_ollama.enqueue(stream(OllamaWire.text_stream("You asked about 42.")))
    second = run_cli(["run", "--path", str(soong_env.project), "--session-id", session_id, "next"])
    assert second.exit_code == 0, second
    assert second.stdout == "You asked about 42.\n"
    assert session_id_of(second.stderr) == session_id
    messages = chat_requests(scripted_ollama)[1].json["messages"]
    conversation = [(m["role"], m["content"]) for m in messages if m["role"] != "system"]
    assert conversation == [
        ("user", "What is the answer?"),
        ("assistant", "The answer is 42."),
        ("user", "next"),
    ]
    runs = rows(soong_env, "SELECT session_id, status FROM runs ORDER BY created_at")
    assert [(r["session_id"], r["status"]) for r in runs] == [(session_id, "completed")] * 2
    assert len(rows(soong_env, "SELECT 1 FROM sessions")) == 1


# -- O12: failures, exit status, no model server ------------------------------------------------------


def test_provider_401_exits_1_with_one_readable_line(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O12."""
    use_ollama(soong_env, scripted_ollama)
    scripted_ollama.enqueue(error(401, {"error": "unauthorized: bad key"}))
    result = run_cli(["run", "--path", str(soong_env.project), "hi"])
    assert result.exit_code == 1, result
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    failure = [line for line in lines if "provider_auth_failed" in line]
    assert len(failure) == 1 and "401" in failure[0], result
    assert lines[-1].startswith("session_id: ")
    for line in lines:  # never a JSON event stream
        with pytest.raises(ValueError):
            json.loads(line)
    (run,) = rows(soong_env, "SELECT status, end_reason FROM runs")
    assert (run["status"], run["end_reason"]) == ("failed", "failed")


def test_closed_port_is_a_provider_error_and_no_server_is_started(
    soong_env: SoongEnv, tmp_path: Path
) -> None:
    # fake model-server executables first on PATH record any attempt to start them
    """Case O12."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    spawned = tmp_path / "spawned.log"
    for name in ("ollama", "llama-server", "llama-cpp-server"):
        exe = bindir / name
        exe.write_text(f"#!/bin/sh\necho {name} \"$@\" >> '{spawned}'\n")
        exe.chmod(0o755)
    soong_env.write_config(model={"provider": "ollama", "base_url": "http://127.0.0.1:9"})
    path = f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"
    result = run_cli(["run", "--path", str(soong_env.project), "hi"], env={"PATH": path})
    assert result.exit_code == 1, result
    assert "provider_error" in result.stderr and "Traceback" not in result.stderr
    assert not spawned.exists()


# -- O10: isolation of CLI runs ---------------------------------------------------------------------------


def test_cli_run_stays_inside_its_temp_dirs(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, tmp_path: Path
) -> None:
    """Case O10."""
    from tests.conftest import REAL_HOME, _snapshot

    real_agent_home = REAL_HOME / ".soong-agent"
    fake_agent_home = Path(os.environ["HOME"]) / ".soong-agent"
    before, fake_before = _snapshot(real_agent_home), _snapshot(fake_agent_home)
    assert Path(os.environ["HOME"]).resolve() != REAL_HOME
    assert soong_env.home.is_relative_to(tmp_path) and soong_env.project.is_relative_to(tmp_path)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    use_ollama(soong_env, scripted_ollama)
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("isolated")))
    result = run_cli(["run", "--path", str(soong_env.project), "hi"], cwd=cwd)
    assert result.exit_code == 0, result
    assert _snapshot(real_agent_home) == before
    assert list(cwd.iterdir()) == []  # nothing written to the working directory
    assert (soong_env.home / "sessions.sqlite").exists()
    assert _snapshot(fake_agent_home) == fake_before  # SOONG_AGENT_HOME wins over ~/.soong-agent


def test_closed_stdout_pipe_is_not_an_error(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O12: ``soong-agent run ... | head -c1``: the reader goes away; the run still completes quietly."""
    use_ollama(soong_env, scripted_ollama)
    scripted_ollama.enqueue(stream(OllamaWire.text_stream(*(["many words "] * 2000)), delay_s=0.0005))
    proc = subprocess.Popen(
        cli_command(["run", "--path", str(soong_env.project), "hi"]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env({"PYTHONUNBUFFERED": None}),  # a real pipe: block-buffered stdout
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(1)
    proc.stdout.close()  # like `head -c1` exiting
    err = proc.stderr.read().decode()
    assert proc.wait(30) == 0, err
    assert "BrokenPipe" not in err and "Exception ignored" not in err and "Traceback" not in err
    assert "session_id: " in err


def test_logging_is_one_concise_stderr_handler_at_warning() -> None:
    """Case O12."""
    code = (
        "import logging\n"
        "from agent_core.cli import _configure_logging\n"
        "_configure_logging(False)\n"
        "log = logging.getLogger('agent_core._runtime')\n"
        "log.info('hidden'); log.warning('shown %s', 1)\n"
        "logging.getLogger('httpx').info('hidden too')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == ""
    assert done.stderr == "soong-agent: WARNING: agent_core._runtime: shown 1\n"


@pytest.mark.parametrize("name", ["hooks.json", "mcp.json"])
def test_invalid_home_file_is_a_readable_startup_error(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, name: str
) -> None:
    """Case O1."""
    use_ollama(soong_env, scripted_ollama)
    broken = soong_env.home / name
    broken.write_text("{not json", encoding="utf-8")
    result = run_cli(["run", "--path", str(soong_env.project), "hi"])
    assert result.exit_code == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("soong-agent: error: "), result
    assert str(broken) in lines[0] and "internal error" not in lines[0]
    assert chat_requests(scripted_ollama) == []
