"""``soong-agent serve`` against another local user and a framing page (issue 31 items 10-13).

A real server subprocess per test, the scripted Ollama server as the model: framing headers, the token
kept out of the process list, out of the model request, SQLite and replay, and out of ``--debug`` logs;
``?token=`` only on ``GET /``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from tests.fixtures.cli import cli_command, cli_env
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import db_bytes
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import RuleModel, ServeProcess, start_serve, use_scripted_ollama

TOKEN = "serve-token-4f1d2a9c7e"


def wait_until(predicate: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def run_command_approved(server: ServeProcess, argv: list[str]) -> tuple[str, str]:
    """Starts a run whose model calls ``code.run_command`` with ``argv``, allows it, waits for the end."""
    with server.client() as client:
        created = client.post("/api/runs", json={"message": "command " + json.dumps(argv)})
        assert created.status_code == 201, created.text
        run_id, session_id = created.json()["run_id"], created.json()["session_id"]
        request = wait_until(lambda: client.get("/api/approvals").json()["approvals"])[0]
        answered = client.post(f"/api/approvals/{request['request_id']}", json={"decision": "allow_once"})
        assert answered.status_code == 200, answered.text
        events = list(server.events(run_id))
        assert events[-1].event == "run_completed"
    return run_id, session_id


def no_token_anywhere(
    server: ServeProcess, env: SoongEnv, ollama: ScriptedOllamaServer, session_id: str
) -> None:
    sent = json.dumps([r.json for r in ollama.requests])
    assert "[REDACTED]" in sent, "the command output never reached the model"
    assert TOKEN not in sent, "the serve token reached the model request"
    assert TOKEN.encode() not in db_bytes(env), "the serve token reached SQLite"
    with server.client() as client:
        replay = client.get(f"/api/sessions/{session_id}", params={"include_sensitive": "true"}).text
    assert TOKEN not in replay, "the serve token reached the replay API"


def test_ui_static_files_and_api_refuse_framing(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case I10."""
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            paths = (
                "/",
                "/static/js/main.js",  # the UI's entry module
                "/static/vendor/purify.min.js",  # a vendored library
                "/static/style.css",
                "/static/index.html",
                "/api/health",
            )
            for path in paths:
                response = client.get(path)
                assert response.status_code == 200, path
                assert response.headers["x-frame-options"] == "DENY", path
                assert "frame-ancestors 'none'" in response.headers["content-security-policy"], path
                assert response.headers["x-content-type-options"] == "nosniff", path
        with server.client(token=None) as anonymous:  # the auth middleware's own answers carry them too
            assert anonymous.get("/api/health").headers["x-frame-options"] == "DENY"
    finally:
        assert server.stop() == 0


def test_token_file_must_be_private(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case I11."""
    use_scripted_ollama(soong_env, scripted_ollama)
    token_file = soong_env.home / "serve.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o644)
    refused = subprocess.run(
        cli_command(
            ["serve", "--path", str(soong_env.project), "--port", "0", "--token-file", str(token_file)]
        ),
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env({"SOONG_AGENT_SERVE_TOKEN": None}),
    )
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "chmod 600" in refused.stderr and "0644" in refused.stderr
    token_file.chmod(0o600)
    server = start_serve(soong_env, args=("--token-file", str(token_file)))
    try:
        assert server.token == TOKEN
        assert TOKEN.encode() not in cmdline(server.pid)
        with server.client() as client:
            assert client.get("/api/health").status_code == 200
    finally:
        assert server.stop() == 0
    assert "warning" not in (server.proc.stderr.read() if server.proc.stderr else "")


def test_token_on_the_command_line_warns_once_and_is_scrubbed(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case I11."""
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env, args=("--token", TOKEN))
    try:
        assert server.token == TOKEN
        shown = cmdline(server.pid)
        assert TOKEN.encode() not in shown, "the token is readable by every local user in /proc/<pid>/cmdline"
        assert b"--token\x00" + b"*" * len(TOKEN) in shown
    finally:
        assert server.stop() == 0
    stderr = server.proc.stderr.read() if server.proc.stderr else ""
    warnings = [line for line in stderr.splitlines() if "--token" in line]
    assert len(warnings) == 1 and "process list" in warnings[0] and "--token-file" in warnings[0]
    assert TOKEN not in stderr


def test_a_command_printing_the_serve_cmdline_leaks_nothing(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case I12: The issue's scenario: the model prints the serve process's command line."""
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.0))
    server = start_serve(soong_env, args=("--token", TOKEN))
    try:
        # the token file is another route to the same value; both must come back redacted
        (soong_env.project / "copy-of-token.txt").write_text(f"token is {TOKEN}\n")
        _, session_id = run_command_approved(
            server, ["cat", "copy-of-token.txt", f"/proc/{server.pid}/environ"]
        )
        no_token_anywhere(server, soong_env, scripted_ollama, session_id)
    finally:
        assert server.stop() == 0


def test_token_file_value_is_redacted_too(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case I12."""
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.0))
    token_file = soong_env.project / "serve.token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    server = start_serve(soong_env, args=("--token-file", str(token_file)))
    try:
        _, session_id = run_command_approved(server, ["cat", "serve.token"])
        no_token_anywhere(server, soong_env, scripted_ollama, session_id)
    finally:
        assert server.stop() == 0


def test_debug_logs_hold_no_token_and_no_conversation(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case I13."""
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.0))
    token_file = soong_env.home / "serve.token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    server = start_serve(soong_env, args=("--debug", "--token-file", str(token_file)))
    phrase = "conversation-content-7d1e93"
    try:
        with httpx.Client(base_url=server.base_url, timeout=30) as browser:
            signed_in = browser.get("/", params={"token": TOKEN}, follow_redirects=False)
            assert signed_in.status_code == 303 and "soong_token" in signed_in.headers["set-cookie"]
            assert browser.get("/api/health").status_code == 200  # then the cookie signs the UI in
        with httpx.Client(base_url=server.base_url, timeout=30) as other:  # ?token= only on GET /
            assert other.get("/api/sessions", params={"token": TOKEN}).status_code == 401
        with server.client() as client:
            created = client.post("/api/runs", json={"message": f"reply {phrase}"})
            run_id = created.json()["run_id"]
        events = list(server.events(run_id))
        assert events[-1].event == "run_completed"
    finally:
        assert server.stop() == 0
    stderr = server.proc.stderr.read() if server.proc.stderr else ""
    assert "GET /?token=[REDACTED]" in stderr, (
        "the access log is expected to show the request, token stripped"
    )
    assert TOKEN not in stderr, "serve --debug logged the token"
    assert phrase not in stderr, "serve --debug logged conversation content (SQL parameters)"


def test_token_in_query_is_refused_on_every_api_route(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case I13."""
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env, extra_env={"SOONG_AGENT_SERVE_TOKEN": TOKEN})
    try:
        assert os.environ.get("SOONG_AGENT_SERVE_TOKEN") != TOKEN
        with httpx.Client(base_url=server.base_url, timeout=30) as anonymous:
            for path in ("/api/health", "/api/sessions", "/api/approvals", "/api/pools"):
                assert anonymous.get(path, params={"token": TOKEN}).status_code == 401, path
            assert (
                anonymous.post("/api/runs", params={"token": TOKEN}, json={"message": "x"}).status_code == 401
            )
    finally:
        assert server.stop() == 0
