"""Provider-chosen tool-call ids reach SQLite columns (issue 14 item 4): an id equal to the API key, or one
with control characters, is replaced before it is persisted or emitted; the call still pairs with its
result."""

from __future__ import annotations

import json

import pytest

from agent_core import RunStatus
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import collect, db_bytes, open_runtime, rows
from tests.fixtures.scripted_servers import OpenAIWire, ScriptedOpenAIServer, stream

SECRET = "sk-test-71aa0c9e5d3b2f8e4c6a1b0d"


@pytest.mark.parametrize(
    "bad_id", [SECRET, "call\x1b[2Jx", "call_\u202eevil"], ids=["api-key", "esc", "bidi"]
)
async def test_provider_tool_call_id_is_never_persisted_raw(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch, bad_id: str
) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    soong_env.write_project("a.txt", "hello\n")
    scripted_openai.enqueue(stream(OpenAIWire.tool_stream([(bad_id, "code.read_file", {"path": "a.txt"})])))
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("done")))
    config = {
        "model": {
            "provider": "openai",
            "base_url": scripted_openai.base_url,
            "api_key_env": "SOONG_TEST_API_KEY",
        }
    }
    async with open_runtime(soong_env, config=config) as rt:
        run = await rt.start("read a.txt")
        live = await collect(run)
    assert run.status == RunStatus.completed, run.error
    assert bad_id.encode() not in db_bytes(soong_env)
    assert bad_id not in json.dumps([e.model_dump(mode="json") for e in live], ensure_ascii=False)
    ids = {r["tool_call_id"] for r in rows(soong_env, f"SELECT tool_call_id FROM events_{run.session_id}")}
    ids.discard(None)
    assert ids and all(i.startswith("call_") for i in ids), ids
    second = scripted_openai.requests[1].json
    sent = json.dumps(second)
    assert bad_id not in sent
    assistant = [m for m in second["messages"] if m.get("tool_calls")]
    tool = [m for m in second["messages"] if m.get("role") == "tool"]
    assert assistant[0]["tool_calls"][0]["id"] == tool[0]["tool_call_id"]
