"""``soong-agent schedule add|list|remove`` and ``soong-agent scheduler`` end to end
(docs/jobs-and-schedules.md#schedules, issue 22): the CLI against a scripted Ollama server; downtime is
simulated by moving a stored due time into the past (no real waits)."""

from __future__ import annotations

import signal
import sqlite3
import time

from tests.fixtures.cli import TurnScript, chat_requests, run_cli, start_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer


def _make_due(env: SoongEnv, schedule_id: str) -> None:
    conn = sqlite3.connect(env.home / "sessions.sqlite")
    with conn:
        n = conn.execute(
            "UPDATE schedules SET next_due_at = '2020-01-01T00:00:00.000000Z' WHERE schedule_id = ?",
            (schedule_id,),
        ).rowcount
    conn.close()
    assert n == 1


def _add(env: SoongEnv, *args: str) -> str:
    result = run_cli(["schedule", "add", "--path", str(env.project), *args])
    assert result.exit_code == 0, result
    schedule_id = result.stdout.strip()
    assert schedule_id.startswith("sched_"), result
    return schedule_id


def test_schedule_add_list_remove(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    first = _add(soong_env, "--cron", "*/5 * * * *", "check the build")
    second = _add(soong_env, "--cron", "0 9 * * 1-5", "morning \x1b[31msummary")
    listing = run_cli(["schedule", "list", "--path", str(soong_env.project)])
    assert listing.exit_code == 0, listing
    lines = listing.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == [first, second]
    assert "*/5 * * * *" in lines[0] and "check the build" in lines[0] and "session=(new session)" in lines[0]
    assert "\x1b" not in listing.stdout and "\\x1b[31msummary" in lines[1]  # escaped, never raw
    removed = run_cli(["schedule", "remove", "--path", str(soong_env.project), first])
    assert removed.exit_code == 0, removed
    again = run_cli(["schedule", "remove", "--path", str(soong_env.project), first])
    assert again.exit_code == 1 and f"unknown schedule '{first}'" in again.stderr
    assert "Traceback" not in again.stderr
    bad = run_cli(["schedule", "add", "--path", str(soong_env.project), "--cron", "nope", "x"])
    assert bad.exit_code == 1 and "invalid cron expression" in bad.stderr and "Traceback" not in bad.stderr


def test_scheduler_once_runs_the_missed_schedule_once(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.handler(TurnScript(lambda r: "build is green"))
    schedule_id = _add(soong_env, "--cron", "*/5 * * * *", "check the build")
    _make_due(soong_env, schedule_id)  # missed many occurrences while nothing ran
    result = run_cli(["scheduler", "--once", "--path", str(soong_env.project)])
    assert result.exit_code == 0, result
    assert f"[schedule] {schedule_id}: fired" in result.stderr
    assert "completed" in result.stderr
    (request,) = chat_requests(scripted_ollama)
    last = request.json["messages"][-1]["content"]  # the firing arrives through the inbox (issue 36)
    assert last.startswith("<inbox>") and 'kind="schedule"' in last and "check the build" in last
    # nothing is due any more: a second --once fires nothing
    again = run_cli(["scheduler", "--once", "--path", str(soong_env.project)])
    assert again.exit_code == 0 and "fired" not in again.stderr
    assert len(chat_requests(scripted_ollama)) == 1


def test_scheduler_foreground_catch_up_then_ctrl_c(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.handler(TurnScript(lambda r: "caught up"))
    schedule_id = _add(soong_env, "--cron", "0 0 1 1 *", "yearly report")
    _make_due(soong_env, schedule_id)
    proc = start_cli(["scheduler", "--path", str(soong_env.project)])
    try:
        deadline = time.monotonic() + 20
        while len(chat_requests(scripted_ollama)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        assert proc.poll() is None, "the scheduler must keep running after the catch-up"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert f"[schedule] {schedule_id}: fired" in err and "scheduler: stopped" in err
    assert len(chat_requests(scripted_ollama)) == 1


def test_serve_runs_the_due_schedule(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    from tests.fixtures.serve import start_serve

    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.handler(TurnScript(lambda r: "served"))
    schedule_id = _add(soong_env, "--cron", "0 0 1 1 *", "from serve")
    _make_due(soong_env, schedule_id)
    server = start_serve(soong_env)
    try:
        deadline = time.monotonic() + 20
        while len(chat_requests(scripted_ollama)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        (request,) = chat_requests(scripted_ollama)
        last = request.json["messages"][-1]["content"]
        assert last.startswith("<inbox>") and 'kind="schedule"' in last and "from serve" in last
        with server.client() as client:
            sessions = client.get("/api/sessions")
            assert sessions.status_code == 200, sessions.text
    finally:
        assert server.stop() == 0
    listing = run_cli(["schedule", "list", "--path", str(soong_env.project)])
    assert "last_error" not in listing.stdout and listing.stdout.startswith(schedule_id)
