"""Secrets (issue 10 item 4): a secret planted in the API-key env var, in a tool's output and in a file the
agent reads never reaches ``sessions.sqlite``, persisted events, artifacts or memory files — not even with
``include_sensitive=True`` (write-time redaction is irreversible). A sensitive *field* (``password``) is kept
for the owner and shown only when ``include_sensitive=True`` is asked for at read time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_core import RunStatus, ToolDefinition
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.fixtures.memory import MemoryRouter, create_op, memory_of, run_finished, submit
from tests.fixtures.runtime import collect, db_bytes, open_runtime
from tests.fixtures.scripted_servers import OpenAIWire, ScriptedOpenAIServer, stream

SECRET = "sk-test-4be1d0c9f8e7a6b5c4d3e2f1"
PASSWORD = "hunter2-correct-horse-battery"
BIG = 70_000


def files_under(*roots: Path) -> dict[Path, bytes]:
    out: dict[Path, bytes] = {}
    for root in roots:
        if root.exists():
            out.update({p: p.read_bytes() for p in root.rglob("*") if p.is_file()})
    return out


def leaking(env: SoongEnv, needle: str) -> list[str]:
    """Every persisted place holding ``needle``: SQLite (with its WAL), artifacts, memory files, home files."""
    places = [str(env.home / "sessions.sqlite")] if needle.encode() in db_bytes(env) else []
    places += [str(p) for p, data in files_under(env.home).items() if needle.encode() in data]
    return places


def leak_tools(runtime: Any) -> None:
    """``demo.leaky``: small JSON (stays inline) with the secret and a password field; ``demo.dump``: a large
    JSON output (moved into an artifact) with both."""

    async def leaky(args: dict[str, Any], ctx: Any) -> Any:
        return {
            "log": f"connecting with token {SECRET} ... ok",
            "account": {"user": "deploy", "password": PASSWORD},
        }

    async def dump(args: dict[str, Any], ctx: Any) -> Any:
        return {"account": {"password": PASSWORD}, "dump": ("line with " + SECRET + "\n") * (BIG // 40)}

    for name, handler in (("demo.leaky", leaky), ("demo.dump", dump)):
        runtime.register_tool(
            ToolDefinition(
                name=name,
                description="Prints credentials.",
                input_schema={"type": "object", "properties": {}},
                permission="readonly",
            ),
            handler,
        )


async def test_planted_secret_never_persisted(soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    soong_env.write_project("deploy/notes.txt", f"staging key: {SECRET}\nowner: ops\n")

    def main(request: ModelRequest) -> Turn:
        answered = sum(1 for m in request.messages if m.role == "tool")
        if answered == 0:
            return tool_calls(
                ("code.read_file", {"path": "deploy/notes.txt"}), ("demo.leaky", {}), ("demo.dump", {})
            )
        return text(f"The key is {SECRET}; the account is in the tool output.", chunks=7)

    router = MemoryRouter(fallback=main).extraction(
        submit(
            lambda r: {
                "operations": [
                    create_op(
                        r,
                        name="deploy-key",
                        summary=f"Deploy key {SECRET}",
                        body=f"The user's deploy key is {SECRET}; password {PASSWORD}.",
                    )
                ]
            }
        )
    )
    fake = FakeProvider(strict=False).route(router)
    config = {"model": {"api_key_env": "SOONG_TEST_API_KEY"}, "memory": {"enabled": True}}
    async with open_runtime(soong_env, fake, config=config, debug=True) as rt:
        leak_tools(rt)
        run = await rt.start(f"remember that my deploy key is {SECRET}")
        live = await collect(run, debug=True)
        await run_finished(run)
        await memory_of(rt).scheduler.wait_quiet()
        [outcome] = memory_of(rt).scheduler.outcomes(run.session_id)
        assert run.status == RunStatus.completed, run.error
        default = await rt.replay_session(run.session_id)
        sensitive = await rt.replay_session(run.session_id, include_sensitive=True)
        artifacts = default.artifacts
    # the memory writer refuses secret-looking content outright: the job fails and writes nothing
    assert outcome.status == "failed" and outcome.error is not None
    assert outcome.error.code == "memory_write_failed" and SECRET not in outcome.error.message
    assert not any(SECRET.encode() in data for data in files_under(soong_env.home / "memory").values())
    # the prompt the extraction job saw was already redacted
    assert SECRET not in router.requests["memory_extraction"][0].model_dump_json()
    assert artifacts, "the large tool output was not moved into an artifact"
    assert leaking(soong_env, SECRET) == []
    for view in (default, sensitive):
        assert SECRET not in view.model_dump_json()
    assert SECRET not in json.dumps([e.model_dump(mode="json") for e in live])
    # the sensitive field: hidden by default (also in the artifact's preview summary), available on request
    assert PASSWORD not in default.model_dump_json()
    assert PASSWORD in sensitive.model_dump_json()
    [dumped] = [a for a in artifacts if a.metadata.get("kind") == "tool_output"]
    assert PASSWORD not in (dumped.summary or "") and PASSWORD in Path(dumped.path).read_text()


async def test_api_key_in_auth_header_and_echoed_by_server_never_persisted(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debug mode stores raw provider requests/responses: the key (sent as a header, echoed back in the
    stream) must still be absent from every artifact and row."""
    monkeypatch.setenv("SOONG_TEST_API_KEY", SECRET)
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("your key is ", SECRET[:10], SECRET[10:], " ok")))
    config = {
        "model": {
            "provider": "openai",
            "base_url": scripted_openai.base_url,
            "api_key_env": "SOONG_TEST_API_KEY",
        }
    }
    async with open_runtime(soong_env, config=config, debug=True) as rt:
        run = await rt.start("what is my key?")
        live = await collect(run, debug=True)
        replay = await rt.replay_session(run.session_id, include_sensitive=True)
    assert run.status == RunStatus.completed, run.error
    [sent] = scripted_openai.requests
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    assert any(a.metadata.get("kind") == "provider_raw" for a in replay.artifacts)
    assert leaking(soong_env, SECRET) == []
    assert SECRET not in replay.model_dump_json()
    assert SECRET not in json.dumps([e.model_dump(mode="json") for e in live])
