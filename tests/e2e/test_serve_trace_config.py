"""``soong-agent serve``'s views for the web UI over real HTTP (issue 39): a session's trace built from its
stored events (a child run nested under its tool call, a retried model call, per-call usage and cost), and
the resolved configuration with every secret masked."""

from __future__ import annotations

from typing import Any

from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import start_serve, use_scripted_ollama

PRICED_MODEL = {
    "price_input_per_mtok": 2.0,
    "price_output_per_mtok": 10.0,
    "retry": {"initial_backoff_ms": 10},
}


def finish(server: Any, client: Any, message: str, session_id: str | None = None) -> dict[str, Any]:
    body = {"message": message, **({"session_id": session_id} if session_id else {})}
    created = client.post("/api/runs", json=body)
    assert created.status_code == 201, created.text
    assert [m.event for m in server.events(created.json()["run_id"])][-1] == "run_completed"
    return created.json()  # type: ignore[no-any-return]


def test_trace_nests_the_child_run_under_its_call_and_marks_the_retry(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    soong_env.write_config(
        model={
            "provider": "ollama",
            "base_url": scripted_ollama.base_url,
            "context_window": 65536,
            **PRICED_MODEL,
        }
    )
    soong_env.write_project("readme.md", "hello\n")
    server = start_serve(soong_env)
    try:
        with server.client() as client:
            first = finish(server, client, "delegate look around")
            sid = first["session_id"]
            finish(server, client, "flaky second try", sid)
            trace = client.get(f"/api/sessions/{sid}/trace")
            assert trace.status_code == 200, trace.text
            assert client.get("/api/sessions/sess_nope/trace").status_code == 404
    finally:
        assert server.stop() == 0
    data = trace.json()
    assert data["runs"][0]["run_id"] == first["run_id"]
    root, second = data["runs"]
    kinds = [(s["kind"], s.get("tool_name") or s.get("model")) for s in root["spans"]]
    assert kinds == [("model", "test-model"), ("tool", "agent.create_sub_agent"), ("model", "test-model")]
    call = root["spans"][1]
    assert call["status"] == "completed" and call["duration_ms"] is not None
    (child,) = call["children"]
    assert child["parent_run_id"] == root["run_id"] and child["parent_tool_call_id"] == call["tool_call_id"]
    assert [s.get("tool_name") or s["kind"] for s in child["spans"]] == ["model", "code.list_dir", "model"]
    assert child["status"] == "completed" and root["children"] == []
    # every span lies inside its run, on the stored events' clock
    for span in root["spans"]:
        assert root["start"] <= span["start"] <= span["end"] <= root["end"]
    # usage per model call, priced with the configured prices; the run's total is the stored record
    first_call = root["spans"][0]["usage"]
    assert first_call["input_tokens"] > 0 and first_call["output_tokens"] > 0
    expected = (first_call["uncached_input_tokens"] * 2.0 + first_call["output_tokens"] * 10.0) / 1e6
    assert abs(first_call["cost_usd"] - expected) < 1e-9
    calls = [s for s in root["spans"] if s["kind"] == "model"]
    assert abs(sum(s["usage"]["cost_usd"] for s in calls) - root["usage"]["cost_usd"]) < 1e-9
    # the retried call: its retry count, the refused attempt's status, a retry mark on its run
    (model,) = [s for s in second["spans"] if s["kind"] == "model"]
    assert model["retries"] == 1 and model["retry_errors"][0]["status_code"] == 429
    assert [m["kind"] for m in second["marks"]] == ["retry"]
    assert root["marks"] == []
    assert data["usage"]["cost_usd"] is not None and data["end"] is not None


def test_config_view_masks_every_secret_and_names_the_model(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    secret = "sk-test-0123456789abcdef"
    soong_env.write_config(
        model={
            "provider": "ollama",
            "base_url": scripted_ollama.base_url.replace("http://", "http://bob:pw-in-url-123@"),
            "api_key_env": "SCRIPTED_LLM",
            "context_window": 65536,
        },
        model_overrides={"alt": {"base_url": f"http://alt.invalid/v1?key={secret}"}},
    )
    server = start_serve(soong_env, extra_env={"SCRIPTED_LLM": secret})
    try:
        with server.client() as client:
            response = client.get("/api/config")
            assert response.status_code == 200, response.text
            assert server.client(token=None).get("/api/config").status_code == 401
    finally:
        assert server.stop() == 0
    text = response.text
    data = response.json()
    assert secret not in text and "pw-in-url-123" not in text and server.token not in text
    assert data["project"] == str(soong_env.project)
    assert data["model"]["provider"] == "ollama" and data["model"]["name"] == "test-model"
    assert "bob:[REDACTED]@" in data["model"]["base_url"]
    assert data["settings"]["model"]["api_key_env"] == "SCRIPTED_LLM"  # the name stays
    assert {"key": "model.api_key_env", "name": "SCRIPTED_LLM", "set": True} in data["environment"]
    assert data["settings"]["model_overrides"]["alt"]["base_url"] == "http://alt.invalid/v1?key=[REDACTED]"
    assert data["settings"]["context"]["reserve_output_tokens"] > 0  # token counts are not secrets
