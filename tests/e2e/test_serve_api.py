"""``soong-agent serve`` over real HTTP (docs/serve.md): a server subprocess per test, the scripted Ollama
server as the model, httpx / httpx-sse as the clients."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import (
    RuleModel,
    ServeProcess,
    persisted_events,
    sse_json,
    start_serve,
    use_scripted_ollama,
)

DEBUG_ONLY = {"model_started", "model_completed", "context_built", "model_text_delta", "tool_call_delta"}


def wait_until(predicate: Any, timeout: float = 15.0, interval: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("condition not met in time")


def pending(client: httpx.Client) -> list[dict[str, Any]]:
    return client.get("/api/approvals").json()["approvals"]  # type: ignore[no-any-return]


def raw_stream(server: ServeProcess, run_id: str, query: str = "") -> str:
    with (
        server.client() as client,
        client.stream("GET", f"/api/runs/{run_id}/events{query}") as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return "".join(response.iter_text())


def test_run_stream_equals_persisted_events_then_resume_and_debug(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.2))
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            assert client.get("/api/health").json()["status"] == "ok"
            created = client.post("/api/runs", json={"message": "hello there"})
            assert created.status_code == 201, created.text
            run_id, session_id = created.json()["run_id"], created.json()["session_id"]
            messages = list(server.events(run_id))
            stored = persisted_events(soong_env, session_id, run_id)
            visible = [e for e in stored if e["event_type"] not in DEBUG_ONLY]
            with_id = [sse_json(m) for m in messages if sse_json(m)["seq"] is not None]
            assert [(e["run_seq"], e["event_id"]) for e in with_id] == [
                (e["run_seq"], e["event_id"]) for e in visible
            ]
            assert [m.event for m in messages if sse_json(m)["seq"] is not None] == [
                e["event_type"] for e in visible
            ]
            assert messages[-1].event == "run_completed"
            text = "".join(sse_json(m)["payload"]["text"] for m in messages if m.event == "message_delta")
            assert text == "Echo: hello there"
            # wire format: persisted events carry "id: <run_seq>", deltas none
            raw = raw_stream(server, run_id)
            blocks = [b for b in raw.replace("\r\n", "\n").split("\n\n") if b.strip()]
            for block in blocks:
                lines = dict(line.split(": ", 1) for line in block.split("\n") if ": " in line)
                if lines.get("event") in ("message_delta",):
                    raise AssertionError("a finished run's replay holds no transient events")
                assert lines["id"] == str(sse_json(type("M", (), {"data": lines["data"]}))["run_seq"])
            # resume after the 2nd persisted event
            second = visible[1]["run_seq"]
            resumed = list(server.events(run_id, last_event_id=second))
            assert [sse_json(m)["run_seq"] for m in resumed] == [e["run_seq"] for e in visible[2:]]
            # debug adds the debug events, all persisted ones in order
            debug = [sse_json(m) for m in server.events(run_id, debug=True)]
            assert [e["run_seq"] for e in debug] == [e["run_seq"] for e in stored]
            assert {"model_started", "model_completed"} <= {e["event_type"] for e in debug}
            # errors are {"error": ErrorPayload}
            missing = client.get("/api/runs/run_nope/events")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "validation_error"
            bad = client.get(f"/api/runs/{run_id}/events", headers={"Last-Event-ID": "x"})
            assert bad.status_code == 400
            invalid = client.post("/api/runs", json={"message": ""})
            assert invalid.status_code == 400 and "message" in invalid.json()["error"]["message"]
            extra = client.post("/api/runs", json={"message": "x", "bogus": 1})
            assert extra.status_code == 400
            unknown = client.post("/api/runs", json={"message": "x", "session_id": "sess_nope"})
            assert unknown.status_code == 404
            sessions = client.get("/api/sessions").json()["sessions"]
            assert [s["session_id"] for s in sessions] == [session_id]
            assert sessions[0]["title"] == "hello there" and sessions[0]["status"] == "completed"
    finally:
        assert server.stop() == 0


def test_live_stream_and_cancel_from_a_second_client(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as first, server.client() as second:
            run_id = first.post("/api/runs", json={"message": "slow 60"}).json()["run_id"]
            seen: list[Any] = []
            done = threading.Event()

            def read() -> None:
                for message in server.events(run_id):
                    seen.append(message)
                done.set()

            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            wait_until(lambda: sum(m.event == "message_delta" for m in seen) >= 3)
            result = second.post(f"/api/runs/{run_id}/cancel")
            assert result.status_code == 200
            assert result.json()["status"] == "cancelled" and result.json()["cancelled"] is True
            assert done.wait(15), "the stream ends after the terminal event"
            assert seen[-1].event == "run_cancelled"
            again = second.post(f"/api/runs/{run_id}/cancel").json()
            assert again["already_terminal"] is True
            assert second.post("/api/runs/run_nope/cancel").status_code == 404
    finally:
        assert server.stop() == 0


def test_approve_and_deny_from_a_second_client_first_answer_wins(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as starter, server.client() as approver:
            run_id = starter.post("/api/runs", json={"message": "write ok.txt hello"}).json()["run_id"]
            request = wait_until(lambda: pending(approver))[0]
            assert request["run_id"] == run_id and request["tool_name"] == "code.write_file"
            assert request["status"] == "pending" and request["created_at"]
            assert "+hello" in request["metadata"].get("diff", "+hello")
            assert not (soong_env.project / "ok.txt").exists()
            url = f"/api/approvals/{request['request_id']}"
            answered = approver.post(url, json={"decision": "allow_once"})
            assert answered.status_code == 200 and answered.json()["status"] == "answered"
            twice = starter.post(url, json={"decision": "deny"})
            assert twice.status_code == 409 and twice.json()["error"]["details"]["status"] == "answered"
            assert [m.event for m in server.events(run_id)][-1] == "run_completed"
            assert (soong_env.project / "ok.txt").read_text() == "hello"
            assert approver.post("/api/approvals/perm_nope", json={"decision": "deny"}).status_code == 404
            assert approver.post(url, json={"decision": "maybe"}).status_code == 400

            run_id = starter.post("/api/runs", json={"message": "write no.txt nope"}).json()["run_id"]
            request = wait_until(lambda: pending(approver))[0]
            url = f"/api/approvals/{request['request_id']}"
            assert approver.post(url, json={"decision": "deny"}).status_code == 200
            assert starter.post(url, json={"decision": "allow_once"}).status_code == 409
            events = [m.event for m in server.events(run_id)]
            assert "tool_denied" in events and events[-1] == "run_completed"
            assert not (soong_env.project / "no.txt").exists()
            answered_rows = approver.get("/api/approvals", params={"status": "answered"}).json()["approvals"]
            assert [r["answer"] for r in answered_rows] == ["allow_once", "deny"]
    finally:
        assert server.stop() == 0


def test_token_auth_cookie_and_cross_origin(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env, args=("--token", "s3cret-token"))
    try:
        assert server.token == "s3cret-token"
        assert server.stdout_line == f"serving {server.base_url}/?token=s3cret-token\n"
        for client in (server.client(token=None), server.client(token="wrong")):
            with client:
                for method, path, body in [
                    ("GET", "/api/sessions", None),
                    ("POST", "/api/runs", {"message": "hello"}),
                    ("GET", "/api/approvals", None),
                ]:
                    response = client.request(method, path, json=body)
                    assert response.status_code == 401, (method, path)
                    assert response.json()["error"]["code"] == "permission_denied"
        assert scripted_ollama.requests_to("/api/chat") == []  # nothing ran
        with server.client(token=None) as anonymous:
            # ?token= is accepted on GET / only (issue 31): never on the API
            assert anonymous.get("/api/sessions", params={"token": "s3cret-token"}).status_code == 401
            first = anonymous.get("/", params={"token": "s3cret-token"})
            assert first.status_code == 303 and first.headers["location"] == "/"
            cookie = first.headers["set-cookie"]
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            assert anonymous.get("/api/sessions").status_code == 200  # the cookie now authenticates
            page = anonymous.get("/")
            assert page.status_code == 200 and "<html" in page.text.lower()
        with server.client() as client:
            assert client.get("/api/sessions").json() == {"sessions": []}
            cross = client.post(
                "/api/runs", json={"message": "hi"}, headers={"Origin": "http://evil.example"}
            )
            assert cross.status_code == 403 and "access-control-allow-origin" not in cross.headers
            same = client.get("/api/health", headers={"Origin": server.base_url})
            assert same.status_code == 200 and "access-control-allow-origin" not in same.headers
            assert client.options("/api/runs", headers={"Origin": "http://evil.example"}).status_code == 403
            assert client.get("/api/sessions").json() == {"sessions": []}
    finally:
        assert server.stop() == 0


def test_non_loopback_bind_without_explicit_token_is_refused(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    result = run_cli(["serve", "--path", str(soong_env.project), "--host", "192.0.2.1", "--port", "0"])
    assert result.exit_code == 2, result
    assert result.stdout == ""
    assert "refusing to bind non-loopback host" in result.stderr and "Traceback" not in result.stderr


def test_branch_fork_tasks_and_delete(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            first = client.post("/api/runs", json={"message": "first question"}).json()
            session_id = first["session_id"]
            list(server.events(first["run_id"]))
            second = client.post("/api/runs", json={"message": "second question", "session_id": session_id})
            assert second.json()["session_id"] == session_id
            list(server.events(second.json()["run_id"]))
            replay = client.get(f"/api/sessions/{session_id}").json()
            users = [n for n in replay["nodes"] if n["role"] == "user"]
            assert [u["content"][0]["text"] for u in users] == ["first question", "second question"]
            assert len(replay["runs"]) == 2 and replay["events"]
            # branch: make the first user message the active leaf, then continue from there
            switched = client.post(
                f"/api/sessions/{session_id}/active", json={"node_id": users[0]["node_id"]}
            )
            assert switched.status_code == 200 and switched.json()["node_id"] == users[0]["node_id"]
            third = client.post("/api/runs", json={"message": "branch question", "session_id": session_id})
            list(server.events(third.json()["run_id"]))
            nodes = client.get(f"/api/sessions/{session_id}").json()["nodes"]
            branch_user = next(
                n for n in nodes if n["role"] == "user" and n["content"][0]["text"] == "branch question"
            )
            first_reply = next(
                n for n in nodes if n["parent_id"] == users[0]["node_id"] and n["role"] == "assistant"
            )
            assert (
                branch_user["parent_id"] == first_reply["node_id"]
                or branch_user["parent_id"] == users[0]["node_id"]
            )
            assert (
                client.post(f"/api/sessions/{session_id}/active", json={"node_id": "node_nope"}).status_code
                == 404
            )
            # fork from the second user message
            forked = client.post(f"/api/sessions/{session_id}/fork", json={"node_id": users[1]["node_id"]})
            assert forked.status_code == 201, forked.text
            fork_id = forked.json()["session_id"]
            fork_nodes = client.get(f"/api/sessions/{fork_id}").json()["nodes"]
            assert [n["content"][0]["text"] for n in fork_nodes if n["role"] == "user"] == [
                "first question",
                "second question",
            ]
            summaries = {s["session_id"]: s for s in client.get("/api/sessions").json()["sessions"]}
            assert summaries[fork_id]["parent_session_id"] == session_id
            tasks = client.get(f"/api/sessions/{session_id}/tasks")
            assert tasks.status_code == 200 and tasks.json() == {"session_id": session_id, "tasks": []}
            # delete
            deleted = client.delete(f"/api/sessions/{fork_id}")
            assert deleted.status_code == 200 and deleted.json()["deleted"] is True
            assert client.get(f"/api/sessions/{fork_id}").status_code == 404
            assert client.delete(f"/api/sessions/{fork_id}").status_code == 404
            assert client.get("/api/sessions/bad-id!").status_code == 404
            assert fork_id not in {s["session_id"] for s in client.get("/api/sessions").json()["sessions"]}
    finally:
        assert server.stop() == 0


def test_restart_with_a_pending_approval_lists_it_expired_and_runs_nothing(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            created = client.post("/api/runs", json={"message": "write late.txt never"}).json()
            request = wait_until(lambda: pending(client))[0]
    finally:
        assert server.stop() == 0
    assert not (soong_env.project / "late.txt").exists()
    restarted = start_serve(soong_env)
    try:
        with restarted.client() as client:
            assert pending(client) == []
            expired = client.get("/api/approvals", params={"status": "expired"}).json()["approvals"]
            assert [r["request_id"] for r in expired] == [request["request_id"]]
            assert expired[0]["answer"] is None
            late = client.post(f"/api/approvals/{request['request_id']}", json={"decision": "allow_once"})
            assert late.status_code == 409 and late.json()["error"]["details"]["status"] == "expired"
            run = next(r for r in client.get(f"/api/sessions/{created['session_id']}").json()["runs"])
            assert run["status"] in ("aborted", "cancelled")
            events = [m.event for m in restarted.events(created["run_id"])]
            assert "tool_started" not in events and "tool_completed" not in events
        assert not (soong_env.project / "late.txt").exists()
    finally:
        assert restarted.stop() == 0


def test_openapi_document_describes_every_route(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        with server.client(token=None) as client:
            doc = client.get("/openapi.json").json()
        assert doc["openapi"].startswith("3.1")
        routes = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
        assert routes == {
            ("GET", "/api/health"),
            ("GET", "/api/sessions"),
            ("POST", "/api/runs"),
            ("GET", "/api/runs/{run_id}/events"),
            ("POST", "/api/runs/{run_id}/cancel"),
            ("GET", "/api/approvals"),
            ("GET", "/api/approvals/events"),
            ("POST", "/api/approvals/{request_id}"),
            ("GET", "/api/questions"),
            ("GET", "/api/questions/events"),
            ("POST", "/api/questions/{request_id}"),
            ("GET", "/api/pools"),
            ("GET", "/api/sessions/{session_id}"),
            ("POST", "/api/sessions/{session_id}/active"),
            ("POST", "/api/sessions/{session_id}/fork"),
            ("POST", "/api/sessions/{session_id}/rewind"),
            ("DELETE", "/api/sessions/{session_id}"),
            ("GET", "/api/sessions/{session_id}/tasks"),
            ("GET", "/api/sessions/{session_id}/team"),
            ("GET", "/api/sessions/{session_id}/trace"),
            ("GET", "/api/config"),
            ("GET", "/api/artifacts/{artifact_id}"),  # issue 34: the conversation's images
        }
    finally:
        assert server.stop() == 0


def test_team_route_lists_teammates_with_state_and_inbox(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    soong_env.write_config(
        model={"provider": "ollama", "base_url": scripted_ollama.base_url, "context_window": 65536},
        agents={"max_teammates_per_session": 2},
    )
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            created = client.post("/api/runs", json={"message": "spawn alice hello"}).json()
            session_id = created["session_id"]
            list(server.events(created["run_id"]))
            assert client.get(f"/api/sessions/{session_id}/team").json()["session_id"] == session_id

            def idle_alice() -> Any:
                team = client.get(f"/api/sessions/{session_id}/team").json()["teammates"]
                return team if team and team[0]["state"] == "idle" else None

            (alice,) = wait_until(idle_alice)
            assert (alice["name"], alice["inbox_depth"], alice["resident"]) == ("alice", 0, True)
            assert alice["lead_session_id"] == session_id
            mate = client.get(f"/api/sessions/{alice['session_id']}/team")  # a teammate sees its team
            assert mate.status_code == 200 and [m["name"] for m in mate.json()["teammates"]] == ["alice"]
            listed = {s["session_id"] for s in client.get("/api/sessions").json()["sessions"]}
            assert alice["session_id"] in listed
            assert client.get("/api/sessions/sess_missing/team").status_code == 404
    finally:
        assert server.stop() == 0


async def test_artifact_route_serves_the_conversation_images(soong_env: SoongEnv) -> None:
    """Issue 34: the web UI shows a message's image through GET /api/artifacts/{id} (with the token; 404
    for an unknown id)."""
    from agent_core import UserMessage
    from tests.fixtures.real_models import png
    from tests.fixtures.runtime import collect, open_runtime
    from tests.fixtures.scripted_servers import OllamaWire, stream

    image = png(6, 4)
    with ScriptedOllamaServer(capabilities=("completion", "tools", "vision")) as model:
        model.enqueue(stream(OllamaWire.text_stream("A tiny image.")))
        config = {
            "model": {"provider": "ollama", "base_url": model.base_url, "input_modalities": ["text", "image"]}
        }
        async with open_runtime(soong_env, config=config) as rt:
            run = await rt.start(UserMessage.with_files("what is it?", image))
            await collect(run)
            await run.wait()
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            nodes = client.get(f"/api/sessions/{run.session_id}").json()["nodes"]
            (block,) = [b for n in nodes for b in n["content"] if b["type"] == "image"]
            served = client.get(f"/api/artifacts/{block['artifact_id']}")
            assert served.status_code == 200 and served.content == image
            assert served.headers["content-type"] == "image/png"
            assert client.get("/api/artifacts/artifact_nope").status_code == 404
        with server.client(token=None) as anonymous:
            assert anonymous.get(f"/api/artifacts/{block['artifact_id']}").status_code == 401
    finally:
        assert server.stop() == 0
