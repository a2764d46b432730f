"""``soong-agent run`` reports the run's usage and cost before its final ``session_id`` line (issue 19)."""

from __future__ import annotations

from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import OllamaWire, ScriptedOllamaServer, stream


def test_run_prints_usage_and_cost(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    soong_env.write_config(
        model={
            "provider": "ollama",
            "base_url": scripted_ollama.base_url,
            "price_input_per_mtok": 2.5,
            "price_output_per_mtok": 10.0,
        }
    )
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("Hello ", "there.")))
    result = run_cli(["run", "--path", str(soong_env.project), "hi"])
    assert result.exit_code == 0, result
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("session_id: sess_")
    # Ollama's done line: prompt_eval_count 10, eval_count 5 -> 10 * 2.5 + 5 * 10 = 75 USD per million
    assert lines[-2] == "usage: 10 input + 5 output tokens, $0.0001"


def test_run_without_prices_prints_tokens_only(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(model={"provider": "ollama", "base_url": scripted_ollama.base_url})
    scripted_ollama.enqueue(stream(OllamaWire.text_stream("ok")))
    result = run_cli(["run", "--path", str(soong_env.project), "hi"])
    assert result.exit_code == 0, result
    assert result.stderr.strip().splitlines()[-2] == "usage: 10 input + 5 output tokens"
