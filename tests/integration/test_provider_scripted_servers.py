"""Self-checks of the scripted provider servers (docs/testing.md#isolation): strict mode, built-in Ollama
endpoints, keep-alive, subprocess clients, and independence from pytest."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.types.model import ModelCompleted
from tests.fixtures.provider_requests import collect, make_request, model_config, tool
from tests.fixtures.scripted_servers import (
    OpenAIWire,
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    ScriptedRequest,
    error,
    split_text,
    stream,
)

REPO = Path(__file__).resolve().parents[2]


def post(url: str, body: object) -> tuple[int, bytes]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_strict_mode_flags_unexpected_and_unconsumed() -> None:
    with ScriptedAnthropicServer() as server:
        status, body = post(f"{server.base_url}/v1/messages", {"model": "m"})
        assert status == 500 and b"unexpected request" in body
        with pytest.raises(AssertionError, match="unexpected requests"):
            server.verify()
    with ScriptedOpenAIServer() as server:
        server.enqueue(error(500))
        with pytest.raises(AssertionError, match="never requested"):
            server.verify()
        server.allow_unconsumed = True
        server.verify()


def test_handler_errors_fail_verification() -> None:
    def broken(request: ScriptedRequest) -> object:
        raise ValueError("bad script")

    with ScriptedOpenAIServer() as server:
        server.handler(broken)  # type: ignore[arg-type]
        status, _ = post(f"{server.base_url}/chat/completions", {})
        assert status == 500
        with pytest.raises(AssertionError, match="bad script"):
            server.verify()


def test_ollama_builtin_endpoints() -> None:
    with ScriptedOllamaServer() as server:
        with urllib.request.urlopen(f"{server.base_url}/api/version", timeout=5) as reply:
            assert json.loads(reply.read())["version"]
        with urllib.request.urlopen(f"{server.base_url}/api/tags", timeout=5) as reply:
            assert json.loads(reply.read())["models"]
        status, body = post(f"{server.base_url}/api/show", {"model": "m"})
        assert status == 200 and json.loads(body)["capabilities"] == ["completion", "tools"]
        server.capabilities = ["completion"]
        status, body = post(f"{server.base_url}/api/chat", {"model": "m", "tools": [{"type": "function"}]})
        assert status == 400 and json.loads(body) == {"error": '"m" does not support tools'}
        server.verify()


async def test_keep_alive_connection_is_reused(scripted_openai: ScriptedOpenAIServer) -> None:
    scripted_openai.enqueue(stream(OpenAIWire.text_stream("a")), stream(OpenAIWire.text_stream("b")))
    adapter = OpenAIAdapter(model_config("openai", scripted_openai.base_url))
    for _ in range(2):
        assert isinstance(
            (await collect(adapter, make_request(tools=[tool("code.list_dir")])))[-1], ModelCompleted
        )
    assert scripted_openai.connections_total == 1
    await adapter.close()


def test_server_module_needs_no_pytest_and_serves_subprocesses() -> None:
    script = textwrap.dedent(
        """
        import json, sys, urllib.request
        from tests.fixtures.scripted_servers import ScriptedOllamaServer, OllamaWire, stream
        assert "pytest" not in sys.modules
        with ScriptedOllamaServer() as server:
            server.enqueue(stream(OllamaWire.text_stream("x")))
            req = urllib.request.Request(server.base_url + "/api/chat", data=b'{"model": "m"}', method="POST")
            with urllib.request.urlopen(req, timeout=5) as reply:
                lines = [json.loads(l) for l in reply.read().splitlines() if l.strip()]
            server.verify()
        print(json.dumps(lines[-1]["done"]))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "true"


def test_split_text_fragments() -> None:
    assert split_text('{"path": "."}', 3) == ['{"pat', 'h": ', '"."}']
    assert "".join(split_text("abcdefgh", 5)) == "abcdefgh" and len(split_text("ab", 5)) == 2
