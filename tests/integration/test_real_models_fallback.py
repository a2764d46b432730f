"""Fallback models (issue 34 item 6): after the retries of a retriable error, or for a capability the model
lacks, the same request goes to the next ``[model] fallback_profiles`` profile; the switch is a
``model_fallback`` event and the run's usage is also given per model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_core import RunStatus, UserMessage
from agent_core.testing import Response, ScriptedRequest, error, stream
from tests.fixtures.env import SoongEnv
from tests.fixtures.orchestrator import events
from tests.fixtures.real_models import (
    KEY_ENV,
    KEY_VALUE,
    bodies,
    finished,
    last_is_tool_result,
    model_config,
    png,
    server_for,
    serving,
    text_answer,
    tool_answer,
)
from tests.fixtures.runtime import open_runtime, rows


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)


def overloaded(_: ScriptedRequest) -> Response:
    return error(529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})


async def test_an_overloaded_model_hands_the_same_request_to_the_fallback(soong_env: SoongEnv) -> None:
    """Case C17: retries exhausted on an overloaded model → the fallback profile gets the request."""
    soong_env.write_project("a.txt", "alpha\n")
    primary, backup = server_for("anthropic"), server_for("openai")
    with serving(primary), serving(backup):

        def first_then_down(request: ScriptedRequest) -> Response:
            if last_is_tool_result("anthropic", request):
                return overloaded(request)
            return stream(tool_answer("anthropic", request, "read_file", {"path": "a.txt"}, 1))

        primary.handler(first_then_down)
        backup.handler(lambda r: stream(text_answer("openai", "Read it.")))
        model = model_config(
            "anthropic",
            primary,
            fallback_profiles=["backup"],
            price_input_per_mtok=3.0,
            price_output_per_mtok=15.0,
        )
        backup_model = model_config("openai", backup, name="gpt-backup", price_input_per_mtok=1.0)
        config = {"model": model, "model_overrides": {"backup": backup_model}}
        async with open_runtime(soong_env, config=config) as rt:
            run = await finished(await rt.start("read a.txt"))
    # the tool-result request: 3 attempts (the retries) on the primary, then the same conversation on the backup
    assert len(bodies(primary)) == 1 + 3
    (moved,) = bodies(backup)
    assert moved["model"] == "gpt-backup"
    assert [m["role"] for m in moved["messages"]] == ["system", "user", "assistant", "tool"]
    (event,) = events(soong_env, run.session_id, "model_fallback")
    payload = event["payload"]
    assert (payload["from_provider"], payload["to_provider"], payload["to_model"]) == (
        "anthropic",
        "openai",
        "gpt-backup",
    )
    assert payload["profile"] == "backup" and payload["error"]["type"] == "server"
    (record,) = rows(soong_env, "SELECT usage_json FROM runs WHERE run_id = ?", run.run_id)
    usage = json.loads(record["usage_json"])
    by_model = usage["by_model"]
    assert set(by_model) == {"anthropic/test-model", "openai/gpt-backup"}
    assert by_model["anthropic/test-model"]["input_tokens"] == 10
    costs = [m["cost_usd"] for m in by_model.values()]
    assert usage["cost_usd"] == pytest.approx(sum(costs))
    assert by_model["anthropic/test-model"]["cost_usd"] != by_model["openai/gpt-backup"]["cost_usd"]


async def test_an_image_for_a_text_only_model_goes_to_a_vision_fallback(soong_env: SoongEnv) -> None:
    primary, vision = server_for("openai"), server_for("anthropic")
    with serving(primary), serving(vision):
        vision.enqueue(stream(text_answer("anthropic", "A red square.")))
        model = model_config("openai", primary, fallback_profiles=["vision"])
        vision_model = model_config("anthropic", vision, input_modalities=["text", "image"])
        config = {"model": model, "model_overrides": {"vision": vision_model}}
        async with open_runtime(soong_env, config=config) as rt:
            run = await finished(await rt.start(UserMessage.with_files("what is it?", png(8, 8))))
    assert bodies(primary) == []  # refused before sending: the model takes no images
    (sent,) = bodies(vision)
    assert any(b.get("type") == "image" for m in sent["messages"] for b in m["content"])
    (event,) = events(soong_env, run.session_id, "model_fallback")
    assert event["payload"]["error"]["code"] == "unsupported_capability"


async def test_a_request_error_does_not_fall_back(soong_env: SoongEnv) -> None:
    primary, backup = server_for("openai"), server_for("openai")
    with serving(primary), serving(backup):
        primary.handler(
            lambda r: error(400, {"error": {"message": "bad request", "type": "invalid_request_error"}})
        )
        config: dict[str, Any] = {
            "model": model_config("openai", primary, fallback_profiles=["backup"]),
            "model_overrides": {"backup": model_config("openai", backup)},
        }
        async with open_runtime(soong_env, config=config) as rt:
            run = await finished(await rt.start("hi"), status=RunStatus.failed)
    assert bodies(backup) == [] and not events(soong_env, run.session_id, "model_fallback")


def test_an_unknown_fallback_profile_is_a_config_error(soong_env: SoongEnv) -> None:
    from agent_core import AgentRuntime, ConfigError

    soong_env.write_config(model={"provider": "openai", "fallback_profiles": ["ghost"]})
    with pytest.raises(ConfigError) as info:
        AgentRuntime(project_dir=soong_env.project)
    assert "model.fallback_profiles" in info.value.message and "ghost" in info.value.message


@pytest.mark.parametrize(
    ("provider", "backup"),
    [
        ("openai", "openai_responses"),
        ("openai_responses", "ollama"),
        ("ollama", "anthropic"),
        ("anthropic", "openai"),
    ],
)
async def test_every_provider_falls_back_after_its_retries(
    soong_env: SoongEnv, provider: str, backup: str
) -> None:
    primary, second = server_for(provider), server_for(backup)
    with serving(primary), serving(second):
        primary.handler(lambda r: error(503, {"error": {"message": "unavailable", "type": "server_error"}}))
        second.enqueue(stream(text_answer(backup, "from the backup")))
        config: dict[str, Any] = {
            "model": model_config(provider, primary, fallback_profiles=["backup"]),
            "model_overrides": {"backup": model_config(backup, second, name="backup-model")},
        }
        async with open_runtime(soong_env, config=config) as rt:
            run = await finished(await rt.start("hi"))
    assert len(bodies(primary)) == 3 and len(bodies(second)) == 1  # the retries, then the fallback
    (event,) = events(soong_env, run.session_id, "model_fallback")
    assert (event["payload"]["from_provider"], event["payload"]["to_provider"]) == (provider, backup)
