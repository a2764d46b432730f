"""A full orchestrated run against the scripted OpenAI server (real adapter, real HTTP over loopback):
the Orchestrator builds a 4-step DAG with dependencies, dispatches two workers in parallel, completes the
Task; after a runtime restart the Task reads back through ``replay_session`` and ``agent.task_get``."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.fixtures.env import SoongEnv
from tests.fixtures.orchestrator import events, finish, pools, wal_types, worker
from tests.fixtures.runtime import open_runtime, rows
from tests.fixtures.scripted_servers import (
    OpenAIWire,
    Response,
    ScriptedOpenAIServer,
    ScriptedRequest,
    advertised_tool_name,
    stream,
)

KEY_ENV = "SOONG_TEST_API_KEY"
STEPS = [
    {"step_id": "design", "title": "Design", "summary": "Design the change", "depends_on_step_ids": []},
    {"step_id": "api", "title": "API", "summary": "Build the API", "depends_on_step_ids": ["design"]},
    {"step_id": "ui", "title": "UI", "summary": "Build the UI", "depends_on_step_ids": ["design"]},
    {"step_id": "release", "title": "Release", "summary": "Ship it", "depends_on_step_ids": ["api", "ui"]},
]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _call(req: ScriptedRequest, call_id: str, tool: str, args: dict[str, Any]) -> Response:
    name = advertised_tool_name(req, tool)
    return stream(OpenAIWire.tool_stream([(call_id, name, args)]))


def _calls(req: ScriptedRequest, *calls: tuple[str, str, dict[str, Any]]) -> Response:
    made = [(call_id, advertised_tool_name(req, tool), args) for call_id, tool, args in calls]
    return stream(OpenAIWire.tool_stream(made))


class Script:
    """Answers by conversation: the Orchestrator (by turn) or a worker job (by the step in its dispatch)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.worker_log: list[tuple[str, int]] = []

    def __call__(self, req: ScriptedRequest) -> Response:
        messages = req.json["messages"]
        users = [_text(m) for m in messages if m["role"] == "user"]
        turn = sum(1 for m in messages if m["role"] == "assistant")
        dispatch = next((u for u in users if u.startswith("<worker_dispatch>")), None)
        if dispatch is not None:
            step_id = dispatch.split("job:")[1].split()[0]
            with self.lock:
                self.worker_log.append((step_id, turn))
            return self.worker(req, step_id, turn)
        return self.orchestrator(req, turn)

    def orchestrator(self, req: ScriptedRequest, turn: int) -> Response:
        if turn == 0:
            args = {
                "task_id": "ship",
                "wal_name": "ship-feature",
                "title": "Ship",
                "summary": "Ship it",
                "steps": STEPS,
            }
            return _call(req, "o_create", "task_create", args)
        if turn == 1:
            return _call(req, "o_d1", "dispatch_worker", self.dispatch("w1", "design"))
        if turn == 2:
            return _calls(
                req,
                ("o_d2", "dispatch_worker", self.dispatch("w1", "api")),
                ("o_d3", "dispatch_worker", self.dispatch("w2", "ui")),
            )
        if turn == 3:
            return _call(req, "o_d4", "dispatch_worker", self.dispatch(None, "release"))
        if turn == 4:
            return _call(req, "o_done", "task_complete", {"task_id": "ship", "result_summary": "shipped"})
        return stream(OpenAIWire.text_stream("The feature ", "shipped."))

    @staticmethod
    def dispatch(worker_id: str | None, step_id: str) -> dict[str, Any]:
        args: dict[str, Any] = {
            "task_id": "ship",
            "instruction": f"job:{step_id} do it",
            "allowed_step_ids": [step_id],
        }
        if worker_id is not None:
            args["worker_agent_id"] = worker_id
        return args

    @staticmethod
    def worker(req: ScriptedRequest, step_id: str, turn: int) -> Response:
        if turn == 0:
            return _call(req, f"{step_id}_claim", "task_claim_step", {"task_id": "ship", "step_id": step_id})
        if turn == 1:
            args = {
                "task_id": "ship",
                "step_id": step_id,
                "status": "completed",
                "result_summary": f"{step_id} ok",
            }
            return _call(req, f"{step_id}_done", "task_update_step", args)
        summary = json.dumps({"status": "completed", "summary": f"finished {step_id}"})
        return stream(OpenAIWire.text_stream(summary))


class ReadBack:
    def __call__(self, req: ScriptedRequest) -> Response:
        last = req.json["messages"][-1]
        if last["role"] == "user" and "What happened?" in _text(last):
            return _call(req, "rb_get", "task_get", {"task_id": "ship", "include_terminal_steps": True})
        return stream(OpenAIWire.text_stream("read back"))


def _tool_result(req: ScriptedRequest, call_id: str) -> dict[str, Any]:
    for message in req.json["messages"]:
        if message["role"] == "tool" and message.get("tool_call_id") == call_id:
            text = _text(message)
            return dict(json.loads(text[text.index("{") :]))
    raise AssertionError(f"no tool message for {call_id}")


async def test_orchestrated_run_over_scripted_openai(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-scripted-test-key")
    script = Script()
    scripted_openai.handler(script)
    model = {
        "provider": "openai",
        "base_url": scripted_openai.base_url,
        "api_key_env": KEY_ENV,
        "context_window": 200_000,
    }
    config = {"model": model, **pools(("default", [worker("w1"), worker("w2")]))}
    async with open_runtime(soong_env, config=config) as rt:
        run = await rt.start("Ship the feature", mode="orchestrator")
        assert (await finish(run, 30)).value == "completed"
    session_id = run.session_id
    assert wal_types(soong_env, session_id, "ship-feature") == [
        "task_created",
        "task_step_ready",
        "task_running",
        "task_step_claimed",
        "task_step_completed",
        "task_step_ready",
        "task_step_ready",
        "task_step_claimed",
        "task_step_claimed",
        "task_step_completed",
        "task_step_completed",
        "task_step_ready",
        "task_step_claimed",
        "task_step_completed",
        "task_completed",
    ]
    # api and ui ran in parallel: both workers asked the model before either finished
    order = [entry for entry in script.worker_log if entry[0] in ("api", "ui")]
    firsts = [i for i, entry in enumerate(order) if entry[1] == 0]
    lasts = [i for i, entry in enumerate(order) if entry[1] == 2]
    assert max(firsts) < min(lasts)
    dispatched = events(soong_env, session_id, "worker_dispatched")
    assert [(e["payload"]["worker_agent_id"], e["payload"]["selection_reason"]) for e in dispatched] == [
        ("w1", "explicit"),
        ("w1", "explicit"),
        ("w2", "explicit"),
        ("w1", "fallback_first_idle"),
    ]
    orchestrator_requests = [
        r for r in scripted_openai.requests if "<worker_dispatch>" not in json.dumps(r.json)
    ]
    final = orchestrator_requests[-1]
    for call_id, step_id in (("o_d1", "design"), ("o_d2", "api"), ("o_d3", "ui"), ("o_d4", "release")):
        result = _tool_result(final, call_id)
        assert result["claimed_step_id"] == step_id and result["step_status"] == "completed"
        assert result["step_result_summary"] == f"{step_id} ok" and result["no_step_claimed"] is False
    workers = rows(
        soong_env, "SELECT agent_id FROM agents WHERE session_id = ? AND agent_type = 'sub'", session_id
    )
    assert len(workers) == 2

    # restart: the terminal Task reads back from its WAL
    read_back = ReadBack()
    scripted_openai.handler(read_back)
    async with open_runtime(soong_env, config=config) as rt:
        replay = await rt.replay_session(session_id)
        (view,) = replay.tasks
        assert view.task_id == "ship" and view.status == "completed" and view.error is None
        assert view.task is not None and view.task["read_only"] is True
        assert {s["step_id"]: s["status"] for s in view.task["steps"]} == {
            "design": "completed",
            "api": "completed",
            "ui": "completed",
            "release": "completed",
        }
        assert [e["event_type"] for e in view.wal_events][-1] == "task_completed"
        assert {c.child_run_id for c in replay.children} >= {e["payload"]["child_run_id"] for e in dispatched}
        again = await rt.start("What happened?", session_id=session_id, mode="orchestrator")
        assert (await finish(again, 30)).value == "completed"
    got = _tool_result(scripted_openai.requests[-1], "rb_get")
    assert got["read_only"] is True and got["status"] == "completed"
    assert [(s["step_id"], s["result_summary"]) for s in got["steps"]] == [
        ("design", "design ok"),
        ("api", "api ok"),
        ("ui", "ui ok"),
        ("release", "release ok"),
    ]
    assert "sk-scripted-test-key" not in (soong_env.project / ".soong-agent" / "tasks").joinpath(
        session_id, "ship-feature.wal.jsonl"
    ).read_text(encoding="utf-8")
