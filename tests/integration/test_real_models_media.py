"""Images and documents on the wire (issue 34 item 4): a message's attachments and an image read by
``code.read_file`` reach every provider encoded its way; a model without ``image`` in
``input_modalities`` refuses them before any request; big images are downscaled when stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core import ImageBlock, RunStatus, UserMessage
from agent_core.testing import Response, ScriptedRequest, stream
from tests.fixtures.env import SoongEnv
from tests.fixtures.real_models import (
    KEY_ENV,
    KEY_VALUE,
    PDF,
    PROVIDERS,
    TEXT_ONLY,
    b64,
    bodies,
    finished,
    image_size,
    last_is_tool_result,
    model_config,
    png,
    server_for,
    serving,
    text_answer,
    tool_answer,
)
from tests.fixtures.runtime import open_runtime, rows

IMAGE = png(40, 30)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)


def images_in(provider: str, body: dict[str, Any]) -> list[str]:
    """The base64 image data a request carries, in the provider's own encoding."""
    found: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            if provider == "openai" and value.get("type") == "image_url":
                found.append(value["image_url"]["url"])
            elif provider == "openai_responses" and value.get("type") == "input_image":
                found.append(value["image_url"])
            elif provider == "anthropic" and value.get("type") == "image":
                source = value["source"]
                assert source["type"] == "base64"
                found.append(f"data:{source['media_type']};base64,{source['data']}")
            elif provider == "ollama" and "images" in value:
                found.extend(f"data:image/png;base64,{data}" for data in value["images"])
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(body.get("messages") if provider != "openai_responses" else body.get("input"))
    return found


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_attached_image_reaches_each_provider(soong_env: SoongEnv, provider: str) -> None:
    with serving(server_for(provider)) as server:
        server.enqueue(stream(text_answer(provider, "A red square.")))
        model = model_config(provider, server, input_modalities=["text", "image"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(await rt.start(UserMessage.with_files("what is this?", IMAGE)))
    (body,) = bodies(server)
    assert images_in(provider, body) == [f"data:image/png;base64,{b64(IMAGE)}"]
    (user,) = rows(soong_env, f"SELECT content_json FROM nodes_{run.session_id} WHERE role = 'user'")
    content = json.loads(user["content_json"])
    assert content[0] == {"type": "text", "text": "what is this?"}
    assert content[1]["type"] == "image" and content[1]["mime_type"] == "image/png"
    assert b64(IMAGE) not in user["content_json"]  # the bytes are an artifact, not in the database
    (artifact,) = rows(soong_env, "SELECT * FROM artifacts WHERE artifact_id = ?", content[1]["artifact_id"])
    assert json.loads(artifact["metadata_json"])["kind"] == "attachment"
    assert Path(artifact["path"]).read_bytes() == IMAGE


def read_image_turns(provider: str) -> Any:
    def turns(request: ScriptedRequest) -> Response:
        if last_is_tool_result(provider, request):
            return stream(text_answer(provider, "It is red."))
        return stream(tool_answer(provider, request, "read_file", {"path": "shot.png"}, 1))

    return turns


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_image_read_by_code_read_file_reaches_each_provider(
    soong_env: SoongEnv, provider: str
) -> None:
    """Case C15: an image read by code.read_file reaches each provider encoded its way."""
    (soong_env.project / "shot.png").write_bytes(IMAGE)
    with serving(server_for(provider)) as server:
        server.handler(read_image_turns(provider))
        model = model_config(provider, server, input_modalities=["text", "image"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            await finished(await rt.start("look at shot.png"))
    first, second = bodies(server)
    assert images_in(provider, first) == []
    assert images_in(provider, second) == [f"data:image/png;base64,{b64(IMAGE)}"]
    if provider == "anthropic":  # inside the tool result itself
        (result,) = [b for m in second["messages"] for b in m["content"] if b.get("type") == "tool_result"]
        assert [p["type"] for p in result["content"]][-1] == "image"
    if provider == "openai_responses":
        (output,) = [i for i in second["input"] if i.get("type") == "function_call_output"]
        assert output["output"][-1]["type"] == "input_image"


async def test_a_text_only_model_gets_binary_true_from_read_file(soong_env: SoongEnv) -> None:
    (soong_env.project / "shot.png").write_bytes(IMAGE)
    with serving(server_for("openai")) as server:
        server.handler(read_image_turns("openai"))
        async with open_runtime(soong_env, config={"model": model_config("openai", server)}) as rt:
            await finished(await rt.start("look at shot.png"))
    second = bodies(server)[1]
    (tool,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert '"binary":true' in tool["content"]
    assert 'input_modalities lacks "image"' in tool["content"]
    assert images_in("openai", second) == []


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_image_for_a_text_only_model_fails_unsupported_capability_before_sending(
    soong_env: SoongEnv, provider: str
) -> None:
    with serving(server_for(provider)) as server:
        async with open_runtime(soong_env, config={"model": model_config(provider, server)}) as rt:
            run = await finished(
                await rt.start(UserMessage.with_files("see", IMAGE)), status=RunStatus.failed
            )
    assert bodies(server) == []  # nothing was sent
    assert run.error is not None and run.error.code.value == "unsupported_capability"
    assert "model.input_modalities" in run.error.message


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai_responses"])
async def test_the_servers_refuse_image_parts_for_a_text_only_model(
    soong_env: SoongEnv, provider: str
) -> None:
    """The model claims images (input_modalities), the server knows it takes none: the vendor's error."""
    with serving(server_for(provider, models={"test-model": TEXT_ONLY})) as server:
        model = model_config(provider, server, input_modalities=["text", "image"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            await finished(await rt.start(UserMessage.with_files("see", IMAGE)), status=RunStatus.failed)
    ((_, status, _body),) = server.rejections
    assert status == 400


async def test_ollama_refuses_images_for_a_model_without_vision(soong_env: SoongEnv) -> None:
    with serving(server_for("ollama", capabilities=("completion", "tools"))) as server:
        model = model_config("ollama", server, input_modalities=["text", "image"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(
                await rt.start(UserMessage.with_files("see", IMAGE)), status=RunStatus.failed
            )
    assert run.error is not None and run.error.code.value == "unsupported_capability"
    assert [r.path for r in server.requests] == ["/api/show"]  # the capability check, no chat request


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openai_responses"])
async def test_a_pdf_reaches_the_providers_that_read_documents(soong_env: SoongEnv, provider: str) -> None:
    with serving(server_for(provider)) as server:
        server.enqueue(stream(text_answer(provider, "A PDF.")))
        model = model_config(provider, server, input_modalities=["text", "pdf"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            await finished(await rt.start(UserMessage.with_files("read", PDF)))
    text = json.dumps(bodies(server)[0])
    assert b64(PDF) in text
    marker = {
        "openai": '"type": "file"',
        "anthropic": '"type": "document"',
        "openai_responses": '"input_file"',
    }
    assert marker[provider] in text


async def test_ollama_cannot_read_pdfs(soong_env: SoongEnv) -> None:
    with serving(server_for("ollama")) as server:
        model = model_config("ollama", server, input_modalities=["text", "pdf"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(await rt.start(UserMessage.with_files("read", PDF)), status=RunStatus.failed)
    assert run.error is not None and "PDF" in run.error.message and bodies(server) == []


async def test_a_big_image_is_downscaled_to_the_configured_long_edge(soong_env: SoongEnv) -> None:
    pytest.importorskip("PIL")  # the images extra is a dev dependency: present in every test run
    big = png(2000, 1000)
    with serving(server_for("anthropic")) as server:
        server.enqueue(stream(text_answer("anthropic", "ok")))
        model = model_config("anthropic", server, input_modalities=["text", "image"], image_max_edge_px=500)
        async with open_runtime(soong_env, config={"model": model}) as rt:
            run = await finished(await rt.start(UserMessage.with_files("see", big)))
    (body,) = bodies(server)
    (sent,) = images_in("anthropic", body)
    import base64

    assert image_size(base64.b64decode(sent.split(",", 1)[1])) == (500, 250)
    (user,) = rows(soong_env, f"SELECT content_json FROM nodes_{run.session_id} WHERE role = 'user'")
    assert json.loads(user["content_json"])[1]["type"] == "image"


async def test_a_file_that_is_no_image_is_refused_at_start(soong_env: SoongEnv) -> None:
    from agent_core import AgentCoreError

    with serving(server_for("openai")) as server:
        model = model_config("openai", server, input_modalities=["text", "image"])
        async with open_runtime(soong_env, config={"model": model}) as rt:
            with pytest.raises(AgentCoreError) as info:
                await rt.start(UserMessage.with_files("see", b"just text, not an image"))
    assert info.value.code.value == "validation_error"
    assert "is not an image" in info.value.message
    assert bodies(server) == []


def test_image_block_shape() -> None:
    block = ImageBlock(artifact_id="artifact_x", mime_type="image/png", detail="low")
    assert block.model_dump() == {
        "type": "image",
        "artifact_id": "artifact_x",
        "mime_type": "image/png",
        "detail": "low",
    }
