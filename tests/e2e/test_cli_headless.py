"""``soong-agent run`` for scripts and CI (issue 37 item 5): ``--output-format json | stream-json``, the
message from stdin, ``--model``, ``--max-turns``, and no prompt (no stdin read) when headless.

The CLI runs as a subprocess against a scripted Ollama server on 127.0.0.1; stdout is parsed line by line.
"""

from __future__ import annotations

import json
from typing import Any

from agent_core import RuntimeEvent
from tests.fixtures.cli import TurnScript, chat_requests, run_cli, tool_messages
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer, ScriptedRequest


def configure(env: SoongEnv, server: ScriptedOllamaServer, **extra: Any) -> None:
    env.write_config(model={"provider": "ollama", "base_url": server.base_url}, **extra)


def list_then_answer(server: ScriptedOllamaServer) -> None:
    def answer(request: ScriptedRequest) -> str:
        (result,) = tool_messages(request)
        entries = json.loads(result["content"])["entries"]
        return "Entries: " + ", ".join(e["path"] for e in entries)

    server.handler(TurnScript(lambda r: [("list_dir", {"path": "."})], answer))


def user_text(request: ScriptedRequest) -> str:
    return [m for m in request.json["messages"] if m["role"] == "user"][-1]["content"]


def test_stream_json_is_one_event_per_line_then_the_result(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_project("alpha.txt", "a")
    configure(soong_env, scripted_ollama)
    list_then_answer(scripted_ollama)
    result = run_cli(
        ["run", "--path", str(soong_env.project), "--output-format", "stream-json", "what is here?"]
    )
    assert result.exit_code == 0, result
    lines = result.stdout.splitlines()
    assert lines and all(line.startswith("{") for line in lines)
    *event_lines, last = lines
    events = [RuntimeEvent.model_validate_json(line) for line in event_lines]  # the public event JSON
    kinds = [e.event_type.value for e in events]
    assert kinds[0] == "run_started" or "loop_started" in kinds
    assert "tool_started" in kinds and "tool_completed" in kinds and "message_delta" in kinds
    assert kinds[-1] == "run_completed"
    assert {e.run_id for e in events} == {events[-1].run_id}
    final = json.loads(last)
    assert final["type"] == "result" and final["status"] == "completed" and final["end_reason"] == "completed"
    assert final["answer"] == "Entries: alpha.txt"
    assert final["run_id"] == events[-1].run_id and final["session_id"] == events[-1].session_id
    assert final["usage"]["input_tokens"] >= 1 and final["turns"] == 2 and final["error"] is None
    assert (
        "".join(e.payload["text"] for e in events if e.event_type.value == "message_delta") == final["answer"]
    )
    assert "Entries" not in result.stderr  # stdout carries everything


def test_json_is_one_object_with_answer_usage_end_reason_and_session(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_project("alpha.txt", "a")
    configure(soong_env, scripted_ollama)
    list_then_answer(scripted_ollama)
    result = run_cli(["run", "--path", str(soong_env.project), "--output-format", "json", "what is here?"])
    assert result.exit_code == 0, result
    (line,) = result.stdout.splitlines()
    value = json.loads(line)
    assert value["answer"] == "Entries: alpha.txt"
    assert value["status"] == "completed" and value["end_reason"] == "completed"
    assert value["session_id"].startswith("sess_") and value["run_id"].startswith("run_")
    assert set(value["usage"]) >= {"input_tokens", "output_tokens", "total_tokens", "cost_usd"}
    assert "[tool] code.list_dir" in result.stderr  # progress stays on stderr


def test_the_message_comes_from_stdin(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    configure(soong_env, scripted_ollama)
    scripted_ollama.handler(
        TurnScript(lambda r: f"you said: {user_text(r)}", lambda r: f"again: {user_text(r)}")
    )
    piped = run_cli(
        ["run", "--path", str(soong_env.project), "--output-format", "json"], stdin="summarise\nthe log\n"
    )
    assert piped.exit_code == 0, piped
    assert json.loads(piped.stdout)["answer"] == "you said: summarise\nthe log\n"
    dash = run_cli(["run", "--path", str(soong_env.project), "-"], stdin="from the dash")
    assert dash.exit_code == 0, dash
    assert dash.stdout == "again: from the dash\n"


def test_an_empty_message_on_stdin_is_a_usage_error(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    configure(soong_env, scripted_ollama)
    result = run_cli(["run", "--path", str(soong_env.project)], stdin="  \n")
    assert result.exit_code == 2 and "empty" in result.stderr
    assert chat_requests(scripted_ollama) == []


def test_headless_runs_never_prompt_or_read_stdin_for_answers(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    configure(soong_env, scripted_ollama)
    scripted_ollama.handler(
        TurnScript(lambda r: [("write_file", {"path": "out.txt", "content": "x"})], lambda r: "tried")
    )
    # a "1" on stdin would allow the write if it were read as an answer: it is the message here
    result = run_cli(["run", "--path", str(soong_env.project), "--output-format", "json"], stdin="1\n")
    assert result.exit_code == 0, result
    assert not (soong_env.project / "out.txt").exists()
    assert "allow once" not in result.stderr  # no prompt was shown
    assert "hint: this run could ask nobody" in result.stderr
    assert json.loads(result.stdout)["answer"] == "tried"
    # the message as an argument: stdin holds "1", which a prompt would read as "allow once"
    scripted_ollama.handler(
        TurnScript(lambda r: [("write_file", {"path": "out.txt", "content": "x"})], lambda r: "tried again")
    )
    args = ["run", "--path", str(soong_env.project), "--output-format", "stream-json", "write it"]
    streamed = run_cli(args, stdin="1\n")
    assert streamed.exit_code == 0, streamed
    assert not (soong_env.project / "out.txt").exists()
    denied = [json.loads(line) for line in streamed.stdout.splitlines() if '"tool_denied"' in line]
    assert denied and "no permission callback" in denied[0]["payload"]["reason"]


def test_model_profile_and_max_turns(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    configure(soong_env, scripted_ollama, model_overrides={"small": {"name": "tiny-model"}})
    scripted_ollama.handler(lambda r: TurnScript(lambda q: [("list_dir", {"path": "."})])(r))
    args = ["run", "--path", str(soong_env.project), "--output-format", "json", "--model", "small"]
    result = run_cli([*args, "--max-turns", "2", "loop forever"])
    assert result.exit_code == 1, result
    value = json.loads(result.stdout)
    assert value["end_reason"] == "max_turns" and value["turns"] == 2
    requests = chat_requests(scripted_ollama)
    assert requests and {r.json["model"] for r in requests} == {"tiny-model"}


def test_a_run_that_cannot_start_still_gives_a_result_object(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    configure(soong_env, scripted_ollama)
    result = run_cli(
        ["run", "--path", str(soong_env.project), "--output-format", "json", "--model", "nope", "hi"]
    )
    assert result.exit_code == 1
    value = json.loads(result.stdout)
    assert value["status"] == "error" and value["error"]["code"] == "config_error"
    assert "model_overrides.nope" in value["error"]["message"]
    assert "soong-agent: error:" in result.stderr
