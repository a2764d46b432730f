"""CLI runs end to end (cases O4, O9, exit status 130 after Ctrl-C; docs/configuration.md):
a tool-call round trip, orchestrator mode and SIGINT while a model stream or a permission prompt is open.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.cli import (
    TurnScript,
    chat_requests,
    cli_command,
    cli_env,
    run_cli,
    start_cli,
    tool_messages,
)
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.scripted_servers import (
    OllamaWire,
    OpenAIWire,
    ScriptedOllamaServer,
    ScriptedRequest,
    advertised_tool_name,
    error,
    hold_open,
    stream,
)


def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def finish(proc: subprocess.Popen[str], timeout: float = 20.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out, err


# -- O9: tool-call round trip ---------------------------------------------------------------------------


def test_list_dir_round_trip(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    """Case O9."""
    soong_env.write_project("alpha.txt", "a")
    soong_env.write_project("beta/gamma.py", "g")
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})

    def answer(request: ScriptedRequest) -> str:
        (result,) = tool_messages(request)
        entries = json.loads(result["content"])["entries"]
        return "Entries: " + ", ".join(e["path"] for e in entries)

    scripted_ollama.handler(TurnScript(lambda r: [("list_dir", {"path": "."})], answer))
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "what is here?"])
    assert result.exit_code == 0, result
    assert result.stdout == "Entries: alpha.txt, beta\n"
    assert '[tool] code.list_dir {"path":"."}' in result.stderr
    assert "[tool] code.list_dir done" in result.stderr
    first, second = chat_requests(scripted_ollama)
    assert any("list_dir" in t["function"]["name"] for t in first.json["tools"])
    (tool_message,) = tool_messages(second)
    assert tool_message["tool_name"] == advertised_tool_name(first, "list_dir")


# -- O4: orchestrator mode ------------------------------------------------------------------------------


class OrchestratorScript:
    """Drives the Orchestrator (routing on the advertised ``dispatch_worker`` tool) through
    ``task_create`` → ``dispatch_worker`` → ``task_complete`` and the worker (routing on
    ``task_claim_step``) through claim → complete.
    """

    def __init__(self) -> None:
        self.orchestrator_turns = 0
        self.worker_turns = 0
        self.task_tools_seen = False

    def __call__(self, request: ScriptedRequest) -> Any:
        names = [t["function"]["name"] for t in (request.json or {}).get("tools", [])]

        def call(fragment: str, args: dict[str, Any]) -> Any:
            name = advertised_tool_name(request, fragment)
            return stream([OllamaWire.tool_calls([(name, args)]), OllamaWire.done("stop")])

        if any("dispatch_worker" in n for n in names):
            self.task_tools_seen = True
            turn, self.orchestrator_turns = self.orchestrator_turns, self.orchestrator_turns + 1
            if turn == 0:
                step = {"step_id": "s1", "title": "Write", "summary": "write it", "depends_on_step_ids": []}
                return call(
                    "task_create",
                    {
                        "task_id": "t1",
                        "wal_name": "work",
                        "title": "Work",
                        "summary": "do work",
                        "steps": [step],
                    },
                )
            if turn == 1:
                return call("dispatch_worker", {"task_id": "t1", "instruction": "claim and finish step s1"})
            if turn == 2:
                return call("task_complete", {"task_id": "t1", "result_summary": "all steps done"})
            return stream(OllamaWire.text_stream("Orchestration finished."))
        if any("task_claim_step" in n for n in names):
            turn, self.worker_turns = self.worker_turns, self.worker_turns + 1
            if turn == 0:
                return call("task_claim_step", {"task_id": "t1", "step_id": "s1"})
            if turn == 1:
                return call(
                    "task_update_step",
                    {"task_id": "t1", "step_id": "s1", "status": "completed", "result_summary": "done"},
                )
            return stream(OllamaWire.text_stream("Step s1 completed."))
        raise AssertionError(f"unexpected model request with tools {names}")


def test_orchestrator_mode(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    # the orchestrator's prompt with every default tool outgrew the baseline's 8192-token window
    """Case O4."""
    soong_env.write_config(
        model={"provider": "ollama", "base_url": scripted_ollama.base_url, "context_window": 200_000}
    )
    script = OrchestratorScript()
    scripted_ollama.handler(script)
    result = run_cli(["run", "--orchestrator", "--path", str(soong_env.project), "--plain", "do work"])
    assert result.exit_code == 0, result
    assert result.stdout.endswith("Orchestration finished.\n")
    session_id = result.stderr.rsplit("session_id: ", 1)[1].strip()
    (root,) = rows(
        soong_env,
        "SELECT a.agent_type, s.metadata_json FROM sessions s JOIN agents a ON a.agent_id = s.root_agent_id "
        "WHERE s.session_id = ?",
        session_id,
    )
    assert root["agent_type"] == "orchestrator"
    assert json.loads(root["metadata_json"])["mode"] == "orchestrator"
    (run,) = rows(
        soong_env,
        "SELECT status, metadata_json FROM runs WHERE agent_id IN "
        "(SELECT root_agent_id FROM sessions WHERE session_id = ?)",
        session_id,
    )
    assert run["status"] == "completed"
    assert json.loads(run["metadata_json"])["agent_type"] == "orchestrator"
    first = chat_requests(scripted_ollama)[0]
    assert "orchestrator" in json.dumps(first.json["messages"][0]).lower()
    assert script.task_tools_seen, "the Orchestrator was not offered agent.dispatch_worker"
    wal_files = list((soong_env.project / ".soong-agent" / "tasks" / session_id).glob("*.wal.jsonl"))
    assert len(wal_files) == 1, wal_files
    kinds = [json.loads(line)["event_type"] for line in wal_files[0].read_text().splitlines()]
    for kind in ("task_created", "task_step_claimed", "task_step_completed", "task_completed"):
        assert kind in kinds, (kind, kinds)
    assert script.orchestrator_turns == 4 and script.worker_turns == 3
    assert "[tool] agent.dispatch_worker done" in result.stderr
    assert "[agent] dispatched worker w1 on task t1" in result.stderr
    (task_row,) = [json.loads(line) for line in wal_files[0].read_text().splitlines()][-1:]
    assert task_row["event_type"] == "task_completed"


# -- exit status 130 after Ctrl-C -----------------------------------------------------------------------


def test_sigint_during_stream_cancels_and_exits_130(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O12."""
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.enqueue(hold_open([OllamaWire.content("partial answer ")]))
    proc = start_cli(["run", "--path", str(soong_env.project), "tell me a long story"])
    try:
        wait_until(lambda: bool(scripted_ollama.requests_to("/api/chat")))
        time.sleep(0.3)  # let the first frame reach the CLI
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code, out, err = finish(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 130, (out, err)
    assert time.monotonic() - started < 5
    assert out.startswith("partial answer")
    assert "[run] cancelled" in err and "Traceback" not in err
    assert scripted_ollama.wait_for_disconnects(1, timeout=5)
    (run,) = rows(soong_env, "SELECT status FROM runs")
    assert run["status"] == "cancelled"


def test_sigint_during_permission_prompt_exits_130(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, tmp_path: Path
) -> None:
    """Case O12."""
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.handler(TurnScript(lambda r: [("write_file", {"path": "x.txt", "content": "x"})]))
    log = tmp_path / "stderr.log"
    with log.open("w") as err_file:
        proc = subprocess.Popen(
            cli_command(["run", "--path", str(soong_env.project), "write x"]),
            stdin=subprocess.PIPE,  # kept open: the prompt waits for an answer
            stdout=subprocess.PIPE,
            stderr=err_file,
            text=True,
            env=cli_env(),
        )
        try:
            wait_until(lambda: "Answer [1/2/3]" in log.read_text())
            proc.send_signal(signal.SIGINT)
            started = time.monotonic()
            proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
    assert proc.returncode == 130
    assert time.monotonic() - started < 10
    assert not (soong_env.project / "x.txt").exists()
    (run,) = rows(soong_env, "SELECT status FROM runs")
    assert run["status"] == "cancelled"


def test_orchestrator_without_worker_pools_fails_at_startup(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case O4."""
    soong_env.write_config(
        model={"provider": "ollama", "base_url": scripted_ollama.base_url}, agents={"worker_pools": []}
    )
    result = run_cli(["run", "--orchestrator", "--path", str(soong_env.project), "do work"])
    assert result.exit_code == 1, result
    assert "worker" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert chat_requests(scripted_ollama) == []


# -- max_tokens continuations on an OpenAI-compatible server (llama.cpp) -------------------------------


@pytest.mark.parametrize("provider", ["ollama", "openai"])
def test_cli_max_tokens_continuation_sends_one_trailing_assistant_message(
    soong_env: SoongEnv, request: pytest.FixtureRequest, provider: str
) -> None:
    """A continuation chain is sent as ONE assistant message: llama.cpp servers reject a request that
    ends with two assistant messages ("Cannot have 2 or more assistant messages at the end of the list")."""
    server = request.getfixturevalue(f"scripted_{provider}")
    soong_env.write_config(model={"provider": provider, "base_url": server.base_url})

    def text(turn_text: str, *, truncated: bool) -> Any:
        if provider == "ollama":
            return stream(OllamaWire.text_stream(turn_text, done_reason="length" if truncated else "stop"))
        return stream(OpenAIWire.text_stream(turn_text, finish_reason="length" if truncated else "stop"))

    def reply(scripted: ScriptedRequest) -> Any:
        roles = [m["role"] for m in scripted.json["messages"]]
        if roles[-2:] == ["assistant", "assistant"]:
            return error(400, {"error": "Cannot have 2 or more assistant messages at the end of the list."})
        turn = len(chat_requests(server))
        return text(f"part{turn} ", truncated=True) if turn < 3 else text("end.", truncated=False)

    server.handler(reply)
    result = run_cli(["run", "--path", str(soong_env.project), "write a long text"])
    assert result.exit_code == 0, result
    assert result.stdout == "part1 part2 end.\n"  # one continued answer
    last = chat_requests(server)[-1].json["messages"]
    assert [m["role"] for m in last[-2:]] == ["user", "assistant"]
    assert last[-1]["content"] == "part1 part2 "
    (run,) = rows(soong_env, "SELECT status, turn_count FROM runs")
    assert (run["status"], run["turn_count"]) == ("completed", 3)
