"""``soong-agent serve`` and issue 37 over real HTTP: a question of ``internal.ask_user``
persisted and pushed (``/api/questions/events``), answered through the API (first answer wins), expired —
never answered — by a restart; a run started with ``permission_mode``."""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import httpx

from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import start_serve, use_scripted_ollama


def wait_until(predicate: Any, timeout: float = 15.0, state: Any = None) -> Any:
    """``predicate()`` once true; on timeout an error showing ``state()`` (what the server holds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"condition not met in time; state: {state() if state else None}")


def run_state(client: httpx.Client, created: dict[str, Any]) -> Any:
    """The run's session as the API shows it (its runs' statuses and nodes), for a failed wait."""
    return client.get(f"/api/sessions/{created.get('session_id')}").json()


def questions(client: httpx.Client, status: str = "pending") -> list[dict[str, Any]]:
    return client.get("/api/questions", params={"status": status}).json()["questions"]  # type: ignore[no-any-return]


def first_push(server: Any) -> tuple[str, dict[str, Any]]:
    """The first event of ``/api/questions/events`` (the snapshot)."""
    with server.client() as client, client.stream("GET", "/api/questions/events") as response:
        assert response.status_code == 200
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: ") :]
            elif line.startswith("data: "):
                return event, json.loads(line[len("data: ") :])
    raise AssertionError("no event")


def test_question_answered_through_the_api(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            created = client.post("/api/runs", json={"message": "ask Which colour? | red | blue"}).json()
            (question,) = wait_until(
                lambda: questions(client), state=lambda: (created, run_state(client, created))
            )
            assert question["question"] == "Which colour?" and question["options"] == ["red", "blue"]
            assert question["session_id"] == created["session_id"] and question["status"] == "pending"
            event, snapshot = first_push(server)
            assert event == "questions" and [q["request_id"] for q in snapshot["questions"]] == [
                question["request_id"]
            ]
            bad = client.post(f"/api/questions/{question['request_id']}", json={"answer": ""})
            assert bad.status_code == 400
            answered = client.post(
                f"/api/questions/{question['request_id']}", json={"answer": "blue, please"}
            )
            assert answered.status_code == 200, answered.text
            assert answered.json() == {
                "request_id": question["request_id"],
                "status": "answered",
                "answer": "blue, please",
            }
            again = client.post(f"/api/questions/{question['request_id']}", json={"answer": "red"})
            assert again.status_code == 409 and again.json()["error"]["details"]["status"] == "answered"
            assert client.post("/api/questions/ask_nope", json={"answer": "x"}).status_code == 404
            events = [m.event for m in server.events(created["run_id"])]
            assert events[-1] == "run_completed"
            stored = questions(client, "answered")
            assert [(q["request_id"], q["answer"]) for q in stored] == [
                (question["request_id"], "blue, please")
            ]
            replay = client.get(f"/api/sessions/{created['session_id']}").json()
            final = [n for n in replay["nodes"] if n["role"] == "assistant"][-1]
            assert "blue, please" in json.dumps(final["content"])
    finally:
        assert server.stop() == 0


def test_restart_expires_a_pending_question_and_never_answers_it(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            created = client.post("/api/runs", json={"message": "ask Proceed? | yes | no"}).json()
            (question,) = wait_until(lambda: questions(client))
    finally:  # killed: nothing expires the question on the way out
        server.stop(signal.SIGKILL)
    restarted = start_serve(soong_env)
    try:
        with restarted.client() as client:
            assert questions(client) == []
            (expired,) = questions(client, "expired")
            assert expired["request_id"] == question["request_id"] and expired["answer"] is None
            late = client.post(f"/api/questions/{question['request_id']}", json={"answer": "yes"})
            assert late.status_code == 409 and late.json()["error"]["details"]["status"] == "expired"
            # the session goes on: the next run recovers the killed one, whose question stays unanswered
            again = client.post(
                "/api/runs", json={"message": "hello again", "session_id": created["session_id"]}
            ).json()
            assert [m.event for m in restarted.events(again["run_id"])][-1] == "run_completed"
            runs = client.get(f"/api/sessions/{created['session_id']}").json()["runs"]
            assert runs[0]["status"] in ("aborted", "failed", "cancelled")
            assert [q["request_id"] for q in questions(client, "answered")] == []
    finally:
        assert restarted.stop() == 0


def test_run_with_a_permission_mode(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            created = client.post(
                "/api/runs", json={"message": "write edited.txt hello", "permission_mode": "accept_edits"}
            )
            assert created.status_code == 201, created.text
            list(server.events(created.json()["run_id"]))
            assert (soong_env.project / "edited.txt").read_text() == "hello"
            assert client.get("/api/approvals", params={"status": "all"}).json()["approvals"] == []
            runs = client.get(f"/api/sessions/{created.json()['session_id']}").json()["runs"]
            assert [r["permission_mode"] for r in runs] == ["accept_edits"]
            bypass = client.post("/api/runs", json={"message": "hi", "permission_mode": "bypass"})
            assert bypass.status_code == 409 and "sandbox" in bypass.json()["error"]["message"]
            unknown = client.post("/api/runs", json={"message": "hi", "permission_mode": "yolo"})
            assert unknown.status_code == 400
    finally:
        assert server.stop() == 0


def test_rewind_through_the_api(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            body = {"message": "write a.txt one", "permission_mode": "accept_edits"}
            first = client.post("/api/runs", json=body).json()
            list(server.events(first["run_id"]))
            sid = first["session_id"]
            start = next(n for n in client.get(f"/api/sessions/{sid}").json()["nodes"] if n["role"] == "user")
            second = client.post(
                "/api/runs", json={**body, "message": "write b.txt two", "session_id": sid}
            ).json()
            list(server.events(second["run_id"]))
            (soong_env.project / "b.txt").write_text("by hand")
            refused = client.post(f"/api/sessions/{sid}/rewind", json={"node_id": start["node_id"]})
            assert refused.status_code == 409
            error = refused.json()["error"]
            assert error["code"] == "path_conflict"
            assert error["details"]["conflicts"][0]["path"] == str(soong_env.project / "b.txt")
            assert (soong_env.project / "a.txt").exists()
            (soong_env.project / "b.txt").write_text("two")
            done = client.post(f"/api/sessions/{sid}/rewind", json={"node_id": start["node_id"]})
            assert done.status_code == 200, done.text
            result = done.json()
            assert sorted(result["removed"]) == sorted(str(soong_env.project / p) for p in ("a.txt", "b.txt"))
            assert result["active_node_id"] == start["node_id"]
            assert not (soong_env.project / "a.txt").exists()
            assert client.get(f"/api/sessions/{sid}").json()["active_node_id"] == start["node_id"]
            unknown = client.post(f"/api/sessions/{sid}/rewind", json={"node_id": "node_nope"})
            assert unknown.status_code == 404
    finally:
        assert server.stop() == 0
