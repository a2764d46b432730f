"""Optional real-model CLI run (case O8 and the best-effort real-model variant of O9): the CLI against
a local llama.cpp server (the prebuilt ``xllamacpp`` wheel) with the tiny SmolLM2-135M-Instruct GGUF, through the ``openai`` provider.

The agent's static system prompt (instructions plus the tool schemas) alone is 3-6k tokens, more than the
2048-token context of the shared ``llama_server`` fixture, so this module starts its own server with the
same helpers, an 8k context and ONE thread: llama.cpp's spinning worker threads collapse (~1 token/s)
when a busy 2-core CI machine oversubscribes them, while one thread keeps a steady pace. Skipped with a
reason naming the missing part when xllamacpp or the model is not installed (``scripts/test.sh --real-model`` installs both); run with ``pytest -m real_model``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.llama_server import (
    MISSING_MODEL,
    MISSING_SERVER,
    LlamaServer,
    find_gguf,
    has_xllamacpp,
    start_llama_server,
)
from tests.fixtures.runtime import rows

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

CONTEXT = 8192


@pytest.fixture(scope="module")
def llama_server_8k() -> Iterator[LlamaServer]:
    if not has_xllamacpp():
        pytest.skip(MISSING_SERVER)
    gguf = find_gguf()
    if gguf is None:
        pytest.skip(MISSING_MODEL)
    workdir = Path(tempfile.mkdtemp(prefix="soong-llama-cli-"))  # kept for post-mortem inspection
    server = start_llama_server(gguf, workdir, context=CONTEXT, threads=1)
    try:
        yield server
    finally:
        server.stop()
    assert server.process.poll() is not None  # only the process this fixture started, and it is stopped


def test_real_model_cli_run(llama_server_8k: LlamaServer, soong_env: SoongEnv) -> None:
    """Cases O8, O9."""
    soong_env.write_config(
        model={
            "provider": "openai",
            "base_url": llama_server_8k.base_url,
            "api_key_env": "",
            "name": llama_server_8k.model,
            "context_window": CONTEXT,
            "max_output_tokens": 512,
            "temperature": 0.2,
            "timeout_ms": 480000,
        },
        context={"reserve_output_tokens": 512},
    )
    soong_env.write_project("README.md", "# Demo\n\nA tiny demo project.\n")
    result = run_cli(
        ["run", "--path", str(soong_env.project), "Say hello in one short sentence."],
        stdin="3\n",
        timeout=560,
    )
    assert result.exit_code == 0, result
    assert result.stdout.strip() or "[tool]" in result.stderr, result
    assert "Traceback" not in result.stderr
    (run,) = rows(soong_env, "SELECT run_id, status, turn_count, session_id FROM runs")
    assert run["status"] == "completed"
    table = f"events_{run['session_id']}"
    kinds = [r["event_type"] for r in rows(soong_env, f"SELECT event_type FROM {table} ORDER BY seq")]
    assert kinds.count("model_completed") == run["turn_count"] >= 1
    tool_results = [k for k in kinds if k in ("tool_completed", "tool_failed", "tool_denied")]
    if tool_results:  # a mapped tool call ran (or was refused) and its result went back to the model
        assert run["turn_count"] >= 2
    assert kinds[-1] == "run_completed"
