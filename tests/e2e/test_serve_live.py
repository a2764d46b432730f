"""``soong-agent serve`` live surfaces over real HTTP (docs/serve.md): child-agent events inside the parent
run's SSE stream (replayed and live, ``Last-Event-ID`` resume mid-child), approvals pushed to every client
(``GET /api/approvals/events``), the worker pools view and ``@<worker>`` addressing in orchestrator mode.
A server subprocess per test, the scripted Ollama server as the model, httpx / httpx-sse as clients."""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.e2e.test_serve_api import wait_until
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import (
    RuleModel,
    ServeProcess,
    persisted_tree_events,
    sse_json,
    start_serve,
    use_scripted_ollama,
)

DEBUG_ONLY = {"model_started", "model_completed", "context_built", "model_text_delta", "tool_call_delta"}


def persisted(message: Any) -> bool:
    """Whether an SSE message is a persisted event (httpx-sse repeats the last id on id-less messages)."""
    return sse_json(message)["seq"] is not None


def stream_ids(server: ServeProcess, run_id: str, last_event_id: str | None = None) -> list[tuple[str, str]]:
    """``(SSE id, event_id)`` of every persisted event of the stream."""
    from httpx_sse import connect_sse

    headers = {"Last-Event-ID": last_event_id} if last_event_id is not None else {}
    with (
        server.client() as client,
        connect_sse(client, "GET", f"/api/runs/{run_id}/events", headers=headers) as src,
    ):
        return [(m.id, sse_json(m)["event_id"]) for m in src.iter_sse() if persisted(m)]


class ApprovalWatcher:
    """Reads ``GET /api/approvals/events`` in a thread and records every message."""

    def __init__(self, server: ServeProcess) -> None:
        self.messages: list[tuple[str, dict[str, Any]]] = []
        self._server = server
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        wait_until(lambda: any(name == "approvals" for name, _ in self.messages))

    def _read(self) -> None:
        from httpx_sse import connect_sse

        with (
            self._server.client() as client,
            connect_sse(client, "GET", "/api/approvals/events") as source,
        ):
            for message in source.iter_sse():
                self.messages.append((message.event, json.loads(message.data)))

    def seen(self, name: str, request_id: str | None = None) -> list[dict[str, Any]]:
        return [d for n, d in self.messages if n == name and request_id in (None, d.get("request_id"))]

    def join(self, timeout: float = 15) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()


def test_child_events_in_the_parent_stream_equal_persisted_and_resume_mid_child(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.25))
    soong_env.write_project("readme.md", "hello\n")
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            created = client.post("/api/runs", json={"message": "delegate look around"}).json()
            run_id, session_id = created["run_id"], created["session_id"]
            # live: cut the stream at the child's tool call, resume with its id while the child still runs
            first: list[Any] = []
            for message in server.events(run_id):
                first.append(message)
                if message.event == "tool_started" and sse_json(message).get("parent_run_id") == run_id:
                    break
            cut = first[-1].id
            assert cut is not None and "." in cut, cut  # a descendant's event: <run_seq>.<seq>
            rest = list(server.events_from(run_id, cut))
            live = [m for m in first + rest if persisted(m)]
            assert rest and rest[-1].event == "run_completed"
            assert sse_json(rest[-1])["run_id"] == run_id
            stored = [
                e
                for e in persisted_tree_events(soong_env, session_id, run_id)
                if e["event_type"] not in DEBUG_ONLY
            ]
            children = {e["run_id"] for e in stored} - {run_id}
            assert len(children) == 1, stored
            (child_run,) = children
            assert [sse_json(m)["event_id"] for m in live] == [e["event_id"] for e in stored]
            # child events are tagged with the parent run and the parent's agent-tool call
            call = next(
                sse_json(m)["tool_call_id"]
                for m in live
                if m.event == "tool_started" and sse_json(m)["run_id"] == run_id
            )
            tagged = [sse_json(m) for m in live if sse_json(m)["run_id"] == child_run]
            assert {e["event_type"] for e in tagged} >= {"loop_started", "tool_started", "run_completed"}
            assert all(e["parent_run_id"] == run_id and e["parent_tool_call_id"] == call for e in tagged)
            assert all("parent_run_id" not in sse_json(m) for m in live if sse_json(m)["run_id"] == run_id)
            # ids never decrease: <run_seq> for own events, <last own run_seq>.<seq> for the child's
            keys = [tuple(int(p) for p in [*m.id.split("."), "0"][:2]) for m in live]
            assert keys == sorted(keys)
            # the child's live text deltas came through (transient, no id)
            assert any(m.event == "message_delta" and sse_json(m)["run_id"] == child_run for m in rest)
            # replayed from SQLite after the end: the same events and ids, in the same order
            replay = stream_ids(server, run_id)
            assert replay == [(m.id, sse_json(m)["event_id"]) for m in live]
            # resume mid-child from the replay, by a child id and by an own id
            middle = next(i for i, (sse_id, _) in enumerate(replay) if "." in sse_id and i > 3)
            assert stream_ids(server, run_id, replay[middle][0]) == replay[middle + 1 :]
            own = next(i for i, (sse_id, _) in enumerate(replay) if "." not in sse_id and i > middle)
            assert stream_ids(server, run_id, replay[own][0]) == replay[own + 1 :]
            # the child's own stream still works on its own (its events only, ids are its run_seq)
            child_only = stream_ids(server, child_run)
            assert [eid for _, eid in child_only] == [
                e["event_id"] for e in stored if e["run_id"] == child_run
            ]
    finally:
        assert server.stop() == 0


def test_approvals_are_pushed_to_every_client(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.2))
    server = start_serve(soong_env)
    try:
        watcher, other = ApprovalWatcher(server), ApprovalWatcher(server)
        assert watcher.seen("approvals")[0] == {"approvals": []}
        with server.client() as starter, server.client() as approver:
            run_id = starter.post("/api/runs", json={"message": "write ok.txt hello"}).json()["run_id"]
            (request,) = wait_until(lambda: watcher.seen("approval_pending"))
            assert request["run_id"] == run_id and request["tool_name"] == "code.write_file"
            assert request["status"] == "pending" and "+hello" in request["metadata"]["diff"]
            wait_until(lambda: other.seen("approval_pending", request["request_id"]))
            url = f"/api/approvals/{request['request_id']}"
            assert approver.post(url, json={"decision": "allow_once"}).status_code == 200
            for client_view in (watcher, other):  # both clients learn it was answered: the card goes away
                (answered,) = wait_until(
                    lambda w=client_view: w.seen("approval_answered", request["request_id"])
                )
                assert answered["status"] == "answered" and answered["answer"] == "allow_once"
            wait_until(lambda: (soong_env.project / "ok.txt").exists())
            # a request whose run is cancelled is pushed as expired (nobody has to poll for it)
            second = starter.post("/api/runs", json={"message": "write no.txt never"}).json()["run_id"]
            (pending_two,) = wait_until(
                lambda: [r for r in watcher.seen("approval_pending") if r["run_id"] == second]
            )
            assert starter.post(f"/api/runs/{second}/cancel").status_code == 200
            (expired,) = wait_until(lambda: watcher.seen("approval_expired", pending_two["request_id"]))
            assert expired["status"] == "expired" and expired["answer"] is None
            assert not (soong_env.project / "no.txt").exists()
            # a client connecting now gets the current snapshot: nothing pending
            late = ApprovalWatcher(server)
            assert late.seen("approvals")[-1] == {"approvals": []}
    finally:
        assert server.stop() == 0  # open approval streams end with the server (no hang)
    assert watcher.join() and other.join() and late.join()


def test_worker_pools_view_and_at_worker_message_reaching_the_worker(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama, RuleModel(frame_delay_s=0.2))
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            pools = client.get("/api/pools").json()
            assert pools["session_id"] is None and pools["queued_runs"] == []
            (pool,) = pools["pools"]
            assert pool["pool_id"] == "default" and pool["valid"] and pool["default"]
            assert [(w["worker_agent_id"], w["status"]) for w in pool["workers"]] == [("w1", "idle")]
            created = client.post("/api/runs", json={"message": "@w1 fix the bug", "mode": "orchestrator"})
            assert created.status_code == 201, created.text
            body = created.json()
            run_id, session_id = body["run_id"], body["session_id"]
            assert body["addressed_workers"] == [{"worker_pool_id": "default", "worker_agent_id": "w1"}]
            # a second message to the busy session (mode omitted: the session's) queues behind the first
            queued = client.post(
                "/api/runs", json={"message": "@default/w1 then this", "session_id": session_id}
            ).json()
            mismatch = client.post(
                "/api/runs", json={"message": "x", "session_id": session_id, "mode": "normal"}
            )
            assert mismatch.status_code == 409
            assert mismatch.json()["error"]["details"]["session_mode"] == "orchestrator"
            view = client.get("/api/pools", params={"session_id": session_id}).json()
            assert view["session_id"] == session_id
            assert [(q["run_id"], q["addressed_workers"]) for q in view["queued_runs"]] == [
                (queued["run_id"], [{"worker_pool_id": "default", "worker_agent_id": "w1"}])
            ]
            # while the worker runs, the view shows it busy with its run (busy without a run id while the
            # dispatch is still admitting it)
            busy = wait_until(
                lambda: [
                    w
                    for w in client.get("/api/pools", params={"session_id": session_id}).json()["pools"][0][
                        "workers"
                    ]
                    if w["status"] == "busy" and w["current_run_id"]
                ]
            )
            assert busy[0]["worker_agent_id"] == "w1" and busy[0]["current_run_id"].startswith("run_")
            messages = [sse_json(m) for m in server.events(run_id)]
            dispatched = next(e for e in messages if e["event_type"] == "worker_dispatched")
            assert dispatched["payload"]["worker_agent_id"] == "w1"
            assert dispatched["payload"]["selection_reason"] == "explicit"
            worker_run = dispatched["payload"]["child_run_id"]
            assert busy[0]["current_run_id"] == worker_run
            worker_text = [
                e["payload"]["text"]
                for e in messages
                if e["run_id"] == worker_run and e["event_type"] == "message_completed"
            ]
            assert worker_text == ["Worker did: @w1 fix the bug"]  # the message reached the addressed worker
            assert all(e["parent_run_id"] == run_id for e in messages if e["run_id"] == worker_run)
            assert messages[-1]["event_type"] == "run_completed" and messages[-1]["run_id"] == run_id
            final = [e for e in messages if e["event_type"] == "message_completed" and e["run_id"] == run_id]
            assert final[-1]["payload"]["text"] == "Orchestrated: Worker did: @w1 fix the bug"
            # the stored user message keeps the typed text; metadata records the addressing
            replay = client.get(f"/api/sessions/{session_id}").json()
            user = next(n for n in replay["nodes"] if n["role"] == "user" and n["node_type"] == "message")
            assert user["content"][0] == {"type": "text", "text": "@w1 fix the bug"}
            assert user["metadata"]["addressed_workers"] == [
                {"worker_pool_id": "default", "worker_agent_id": "w1"}
            ]
            sessions = client.get("/api/sessions").json()["sessions"]
            assert sessions[0]["title"] == "@w1 fix the bug"
            list(server.events(queued["run_id"]))
            idle = client.get("/api/pools", params={"session_id": session_id}).json()
            assert [w["status"] for w in idle["pools"][0]["workers"]] == ["idle"] and idle[
                "queued_runs"
            ] == []
            # a mention of no worker is plain text; an unknown session is 404
            plain = client.post(
                "/api/runs", json={"message": "mail me@host or @nobody", "mode": "orchestrator"}
            )
            assert plain.json()["addressed_workers"] == []
            texts = [sse_json(m)["payload"].get("text") for m in server.events(plain.json()["run_id"])]
            assert "Echo: mail me@host or @nobody" in texts
            assert client.get("/api/pools", params={"session_id": "sess_nope"}).status_code == 404
    finally:
        assert server.stop() == 0
