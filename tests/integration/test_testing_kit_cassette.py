"""Cassettes around a real adapter (docs/testing.md#testing-your-agents): record the OpenAI adapter against
the scripted server, then replay the same session with the same configuration and no server at all."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from agent_core import AgentRuntime, ProviderRegistry, RunStatus
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.testing import OpenAIWire, ScriptedOpenAIServer, record, replay, stream
from tests.fixtures.env import SoongEnv

KEY = "sk-test-99aa88bb77cc66dd55ee44ff"


class Capital(BaseModel):
    country: str
    capital: str


async def test_record_a_real_adapter_then_replay_without_the_server(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    path = tmp_path / "capital.json"
    with ScriptedOpenAIServer() as server:
        server.enqueue(stream(OpenAIWire.text_stream('{"country": "Peru", ', '"capital": "Lima"}')))
        soong_env.write_config(
            model={"provider": "openai", "base_url": server.base_url, "api_key_env": "SOONG_TEST_API_KEY"}
        )
        cassette = record(path, OpenAIAdapter, provider_key="openai")
        registry = ProviderRegistry({"openai": cassette.factory})
        async with AgentRuntime(project_dir=soong_env.project, provider_registry=registry) as rt:
            run = await rt.start("Capital of Peru?", output_schema=Capital)
            assert await run.output() == Capital(country="Peru", capital="Lima")
        server.verify()
    assert len(cassette.interactions) == 1
    assert cassette.interactions[0]["request"]["options"]["provider_options"]["openai"]["response_format"]

    # the server is gone: only the cassette answers
    replaying = replay(path)
    registry = ProviderRegistry({"openai": replaying.factory})
    async with AgentRuntime(project_dir=soong_env.project, provider_registry=registry) as rt:
        again = await rt.start("Capital of Peru?", output_schema=Capital)
        assert await again.output() == Capital(country="Peru", capital="Lima")
    replaying.verify()
    assert again.status == RunStatus.completed

    registry = ProviderRegistry({"openai": replay(path).factory})
    async with AgentRuntime(project_dir=soong_env.project, provider_registry=registry) as rt:
        changed = await rt.start("Capital of Chile?", output_schema=Capital)
        await changed.wait()
    assert changed.status == RunStatus.failed
    assert changed.error is not None and "+  Capital of Chile?" in changed.error.message
