"""Runtime halves of the provider cases with the real adapters and the scripted servers: C3 (OpenAI mapping),
C4 (Anthropic mapping), C5/C6 (Ollama streaming and tool call), C8 (mid-stream failure), C9 (stream
cancellation), C10 (adapter close), C12 (secrets, lazy env check); docs/providers.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentCoreError, AgentRuntime, EndReason, RunStatus
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import collect, db_bytes, open_runtime, rows, types
from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    ScriptedRequest,
    advertised_tool_name,
    drop_after,
    hold_open,
    stream,
)

KEY = "sk-test-9a8b7c6d5e4f3a2b1c0d9e8f"


def config(provider: str, base_url: str, **extra: Any) -> dict[str, Any]:
    key_env = "" if provider == "ollama" else "SOONG_TEST_API_KEY"
    return {"model": {"provider": provider, "base_url": base_url, "api_key_env": key_env}, **extra}


def node_rows(env: SoongEnv, sid: str, role: str | None = None) -> list[dict[str, Any]]:
    sql = f'SELECT * FROM "nodes_{sid}"' + (" WHERE role = ?" if role else "") + " ORDER BY node_seq"
    out = []
    for r in rows(env, sql, *([role] if role else [])):
        item = dict(r)
        item["content"] = json.loads(item["content_json"])
        item["metadata"] = json.loads(item["metadata_json"] or "{}")
        out.append(item)
    return out


@pytest.fixture
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    return KEY


# ---- C3: OpenAI ----------------------------------------------------------------------------------------


async def test_openai_mapping_through_the_runtime(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, api_key: str
) -> None:
    """Case C3."""
    args_a = {"path": "src", "recursive": False}
    args_b = {"path": "README.md", "max_lines": 20}
    soong_env.write_project("src/a.py", "print(1)\n")
    soong_env.write_project("README.md", "# readme\n")

    def respond(request: ScriptedRequest) -> Response:
        if request.json["messages"][-1]["role"] == "tool":
            return stream(OpenAIWire.text_stream("Both read."))
        calls = [
            ("call_list", advertised_tool_name(request, "list_dir"), args_a),
            ("call_read", advertised_tool_name(request, "read_file"), args_b),
        ]
        return stream(OpenAIWire.tool_stream(calls, text="Let me look.", fragments=3))

    scripted_openai.handler(respond)
    async with open_runtime(soong_env, config=config("openai", scripted_openai.base_url)) as rt:
        run = await rt.start("inspect the project")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.completed, run.error
    names = types(events)
    assert "model_text_delta" in names
    phases = [e.data["phase"] for e in events if e.event_type == EventType.tool_call_delta]
    assert {"start", "delta", "end"} <= set(phases) and phases.count("start") == 2
    completed = next(e for e in events if e.event_type == EventType.model_completed)
    assert completed.data["stop_reason"] == "tool_use" and completed.data["raw_stop_reason"] == "tool_calls"
    assert completed.data["tool_call_count"] == 2
    assert completed.data["usage"]["input_tokens"] == 10 and completed.data["usage"]["total_tokens"] == 15
    assistant = node_rows(soong_env, run.session_id, "assistant")[0]
    calls = [b for b in assistant["content"] if b["type"] == "tool_call"]
    assert [(c["tool_call_id"], c["name"], c["arguments"]) for c in calls] == [
        ("call_list", "code.list_dir", args_a),
        ("call_read", "code.read_file", args_b),
    ]
    assert all(c["metadata"].get("provider_tool_name") for c in calls)
    assert assistant["metadata"]["usage"]["raw_usage"]["prompt_tokens"] == 10
    first, second = scripted_openai.requests_to("/v1/chat/completions")
    assert first.headers["authorization"] == f"Bearer {KEY}" and first.json["stream"] is True
    assert first.json["messages"][0]["role"] == "system"
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in first.json["tools"]}
    from agent_core.tools.registry import ToolRegistry  # noqa: F401  (schema source: the runtime's registry)

    assert schemas[advertised_tool_name(first, "list_dir")]["properties"]["path"]["type"] == "string"
    replayed = second.json["messages"]
    assistant_msg = next(m for m in replayed if m["role"] == "assistant" and m.get("tool_calls"))
    assert [c["id"] for c in assistant_msg["tool_calls"]] == ["call_list", "call_read"]
    tool_msgs = [m for m in replayed if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_msgs] == ["call_list", "call_read"]
    assert "a.py" in tool_msgs[0]["content"] and "# readme" in tool_msgs[1]["content"]


# ---- C4: Anthropic -------------------------------------------------------------------------------------


async def test_anthropic_mapping_through_the_runtime(
    soong_env: SoongEnv, scripted_anthropic: ScriptedAnthropicServer, api_key: str
) -> None:
    """Case C4."""
    arguments = {"path": "src", "recursive": False}
    soong_env.write_project("src/a.py", "print(1)\n")

    def respond(request: ScriptedRequest) -> Response:
        last = request.json["messages"][-1]
        if isinstance(last["content"], list) and any(b["type"] == "tool_result" for b in last["content"]):
            return stream(AnthropicWire.text_stream("src has a.py"))
        name = advertised_tool_name(request, "list_dir")
        frames = AnthropicWire.tool_stream(
            [("toolu_01A", name, arguments)], text="Looking.", fragments=4, cache_read=7, cache_write=2
        )
        return stream(frames)

    scripted_anthropic.handler(respond)
    async with open_runtime(soong_env, config=config("anthropic", scripted_anthropic.base_url)) as rt:
        run = await rt.start("list src")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.completed, run.error
    completed = next(e for e in events if e.event_type == EventType.model_completed)
    assert completed.data["stop_reason"] == "tool_use"
    usage = completed.data["usage"]
    assert (usage["cache_read_tokens"], usage["cache_write_tokens"]) == (7, 2)
    assistant = node_rows(soong_env, run.session_id, "assistant")[0]
    call = next(b for b in assistant["content"] if b["type"] == "tool_call")
    assert (call["tool_call_id"], call["name"], call["arguments"]) == (
        "toolu_01A",
        "code.list_dir",
        arguments,
    )
    first, second = scripted_anthropic.requests_to("/v1/messages")
    assert first.headers["x-api-key"] == KEY and first.headers["anthropic-version"]
    assert isinstance(first.json["system"], list) and first.json["system"]
    assert all(m["role"] in ("user", "assistant") for m in first.json["messages"])
    assert all("input_schema" in t for t in first.json["tools"])
    result_msg = second.json["messages"][-1]
    assert result_msg["role"] == "user"
    result = next(b for b in result_msg["content"] if b["type"] == "tool_result")
    assert result["tool_use_id"] == "toolu_01A" and "a.py" in json.dumps(result)


# ---- C5, C6: Ollama ----------------------------------------------------------------


async def test_providers30_ollama_streaming_plain_text(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case C5."""
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("The ", "answer ", "is 42."), delay_s=0.01))
    everything = ["code.*", "internal.*", "agent.*"]
    cfg = config("ollama", scripted_ollama.base_url, tools={"disabled": everything})
    async with open_runtime(soong_env, config=cfg) as rt:
        run = await rt.start("what is the answer?")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.completed and run.end_reason == EndReason.completed, run.error
    model_deltas = [str(e.data["text"]) for e in events if e.event_type == EventType.model_text_delta]
    message_deltas = [str(e.data["text"]) for e in events if e.event_type == EventType.message_delta]
    assert "".join(model_deltas) == "".join(message_deltas) == "The answer is 42."
    started = next(e for e in events if e.event_type == EventType.model_started)
    assert started.data["provider"] == "ollama" and started.data["model"] == "test-model"
    assistant = node_rows(soong_env, run.session_id, "assistant")[0]
    assert assistant["content"] == [{"type": "text", "text": "The answer is 42."}]
    assert assistant["metadata"]["provider"] == "ollama"
    (chat,) = scripted_ollama.requests_to("/api/chat")
    assert chat.json["stream"] is True and chat.json["model"] == "test-model" and "tools" not in chat.json
    assert scripted_ollama.requests_to("/api/show") == []  # no tools: no capability pre-flight
    meta = json.loads(rows(soong_env, "SELECT metadata_json FROM runs WHERE run_id = ?", run.run_id)[0][0])
    assert meta["model"]["provider"] == "ollama"


async def test_providers31_ollama_tool_call_round_trip(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Case C6."""
    soong_env.write_project("alpha.txt", "a\n")
    soong_env.write_project("beta/inner.txt", "b\n")
    advertised: list[str] = []

    def respond(request: ScriptedRequest) -> Response:
        if request.json["messages"][-1]["role"] == "tool":
            return stream(OllamaWire.text_stream("There are 2 entries."))
        name = advertised_tool_name(request, "list_dir")
        advertised.append(name)
        return stream([OllamaWire.tool_calls([(name, {"path": "."})]), OllamaWire.done("stop", 20, 8)])

    scripted_ollama.handler(respond)
    async with open_runtime(soong_env, config=config("ollama", scripted_ollama.base_url)) as rt:
        run = await rt.start("what is here?")
        events = await collect(run)
    assert run.status == RunStatus.completed, run.error
    started = next(e for e in events if e.event_type == EventType.tool_started)
    assert started.data["tool_name"] == "code.list_dir"
    assert re.fullmatch(r"call_\w+", started.tool_call_id or "")
    _first, second = scripted_ollama.requests_to("/api/chat")
    assert scripted_ollama.requests_to("/api/show")  # capability pre-flight for a request with tools
    tool_msg = second.json["messages"][-1]
    assert tool_msg["role"] == "tool" and tool_msg["tool_name"] == advertised[0]
    assert "alpha.txt" in tool_msg["content"] and "beta" in tool_msg["content"]
    assert (
        node_rows(soong_env, run.session_id, "assistant")[-1]["content"][0]["text"] == "There are 2 entries."
    )


# ---- C8: mid-stream failure ------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["openai_drop", "anthropic_error_event"])
async def test_mid_stream_failure_writes_failed_partial_node(
    soong_env: SoongEnv, request: pytest.FixtureRequest, api_key: str, variant: str
) -> None:
    """Case C8."""
    if variant == "openai_drop":
        server = request.getfixturevalue("scripted_openai")
        server.enqueue(drop_after([OpenAIWire.role(), OpenAIWire.text("partial te")]))
        cfg = config("openai", server.base_url)
        path = "/v1/chat/completions"
    else:
        server = request.getfixturevalue("scripted_anthropic")
        frames = [
            AnthropicWire.message_start(),
            AnthropicWire.text_start(0),
            AnthropicWire.text_delta(0, "partial te"),
        ]
        server.enqueue(stream([*frames, AnthropicWire.error("overloaded_error", "Overloaded")]))
        cfg = config("anthropic", server.base_url)
        path = "/v1/messages"
    async with open_runtime(soong_env, config=cfg) as rt:
        run = await rt.start("hello")
        events = await collect(run, debug=True)
    assert run.status == RunStatus.failed and run.end_reason == EndReason.failed
    assert len(server.requests_to(path)) == 1  # text was streamed: never retried
    failed = next(e for e in events if e.event_type == EventType.model_failed)
    error = failed.data["error"]
    assert {"type", "code", "message", "retryable"} <= set(error) and error["code"] == "provider_error"
    partial = node_rows(soong_env, run.session_id, "assistant")
    assert len(partial) == 1 and partial[0]["node_id"] == failed.data["partial_node_id"]
    assert partial[0]["metadata"]["partial"] is True and partial[0]["metadata"]["failed"] is True
    assert partial[0]["metadata"]["error"]["type"] == error["type"]
    assert partial[0]["content"] == [{"type": "text", "text": "partial te"}]
    active = rows(soong_env, "SELECT active_node_id FROM sessions WHERE session_id = ?", run.session_id)[0][0]
    assert active == node_rows(soong_env, run.session_id, "user")[0]["node_id"]


# ---- C9: stream cancellation -----------------------------------------------------------------------------


async def test_cancel_closes_the_http_stream(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    """Cases C9, D5."""
    scripted_ollama.enqueue(hold_open([OllamaWire.content("first words ")]))
    cfg = config("ollama", scripted_ollama.base_url, runtime={"cancel_timeout_ms": 1500})
    async with open_runtime(soong_env, config=cfg) as rt:
        run = await rt.start("talk")
        seen = []
        async for event in run.events(debug=True):
            seen.append(event)
            if event.event_type == EventType.message_delta:
                result = await run.cancel()
                assert result.cancelled and not result.timed_out and run.status == RunStatus.cancelled
        assert await scripted_ollama.until_disconnected(1, timeout=1.5)
    assert scripted_ollama.disconnects[0].kind == "hold_open"
    names = types(seen)
    assert names[-3:] == ["aborted_streaming", "loop_aborted", "run_cancelled"]
    assert not [n for n in names[names.index("message_delta") + 1 :] if n.startswith("model_")]
    partial = node_rows(soong_env, run.session_id, "assistant")[0]
    assert partial["metadata"]["aborted"] is True and partial["metadata"]["partial"] is True
    row = rows(soong_env, "SELECT end_reason FROM runs WHERE run_id = ?", run.run_id)[0]
    assert row["end_reason"] == "aborted_streaming"


# ---- C10: adapter close ----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("error::ResourceWarning")
async def test_close_releases_every_connection(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, api_key: str
) -> None:
    """Case C10."""
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("one")), stream(OpenAIWire.text_stream("two")))
    soong_env.write_config(**config("openai", scripted_openai.base_url))
    rt = AgentRuntime(project_dir=soong_env.project)
    async with rt:
        first = await rt.start("one")
        await collect(first)
        await collect(await rt.start("two", session_id=first.session_id))
        assert scripted_openai.connections_total >= 1
    await rt.close()
    await rt.close()
    assert await scripted_openai.until_idle(2.0)
    assert scripted_openai.open_connections == 0


# ---- C12: secrets, lazy env check, debug raw artifacts ------------------------------------


async def test_missing_api_key_env_fails_at_open(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer
) -> None:
    """Case C12: Issue 32: an unset key variable fails the runtime's open, before any session exists."""
    with pytest.raises(AgentCoreError) as info:
        async with open_runtime(soong_env, config=config("openai", scripted_openai.base_url)):
            pass
    error = info.value
    assert error.code == "config_error"
    assert "SOONG_TEST_API_KEY" in error.message and "model.api_key_env" in error.message
    assert "openai" in error.message and str(soong_env.config_path) in error.message
    assert error.details["variable"] == "SOONG_TEST_API_KEY"
    assert scripted_openai.requests == []
    assert not (soong_env.home / "sessions.sqlite").exists()  # nothing was opened or created


async def test_providers27_key_only_in_auth_header_and_raw_debug_artifacts(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, api_key: str
) -> None:
    """Case C12."""
    soong_env.write_project("data.txt", f"leaked {KEY} in a file\n")

    def respond(request: ScriptedRequest) -> Response:
        if request.json["messages"][-1]["role"] == "tool":
            return stream(OpenAIWire.text_stream(f"I saw {KEY[:12]}", f"{KEY[12:]} there"))
        name = advertised_tool_name(request, "read_file")
        return stream(OpenAIWire.tool_stream([("call_1", name, {"path": "data.txt"})]))

    scripted_openai.handler(respond)
    async with open_runtime(soong_env, config=config("openai", scripted_openai.base_url), debug=True) as rt:
        run = await rt.start("read data.txt")
        live = await collect(run, debug=True)
        replay = await rt.replay_session(run.session_id, include_sensitive=True)
        replay_default = await rt.replay_session(run.session_id)
    assert run.status == RunStatus.completed, run.error
    requests = scripted_openai.requests_to("/v1/chat/completions")
    for sent in requests:
        assert sent.headers["authorization"] == f"Bearer {KEY}"
    # the key travels only in the header of the requests, never in what the core persists or streams
    assert KEY.encode() not in db_bytes(soong_env)
    assert all(KEY not in e.model_dump_json() for e in live)
    assert KEY not in replay.model_dump_json() and KEY not in replay_default.model_dump_json()
    files = [p for p in (soong_env.home / "sessions").rglob("*") if p.is_file()]
    assert files and all(KEY.encode() not in p.read_bytes() for p in files)
    raw = [
        (r["artifact_id"], json.loads(r["metadata_json"]), Path(r["path"]))
        for r in rows(soong_env, "SELECT * FROM artifacts")
        if json.loads(r["metadata_json"])["kind"] == "provider_raw"
    ]
    assert len(raw) == 4  # request + response of both model calls
    assert sorted(m.get("direction") for _, m, _ in raw) == ["request", "request", "response", "response"]
    assert {m.get("source") for _, m, _ in raw} == {"openai"}
    assistant = node_rows(soong_env, run.session_id, "assistant")[0]
    assert assistant["metadata"]["raw_request_artifact_id"] in {a for a, _, _ in raw}
    assert assistant["metadata"]["raw_response_artifact_id"] in {a for a, _, _ in raw}
    # raw artifacts never enter a later model request
    later = json.dumps(requests[1].json)
    for artifact_id, _, _path in raw:
        assert artifact_id not in later
    assert '"raw_request"' not in later and "chat.completion.chunk" not in later


async def test_providers27_no_raw_artifacts_without_debug(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, api_key: str
) -> None:
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("plain")))
    async with open_runtime(soong_env, config=config("openai", scripted_openai.base_url)) as rt:
        run = await rt.start("hello")
        await collect(run)
    assert run.status == RunStatus.completed
    assert rows(soong_env, "SELECT count(*) AS n FROM artifacts")[0]["n"] == 0
    metadata = node_rows(soong_env, run.session_id, "assistant")[0]["metadata"]
    assert "raw_request_artifact_id" not in metadata
