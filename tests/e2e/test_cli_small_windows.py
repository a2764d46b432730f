"""Small context windows through the CLI (issue 13): the packaged ``config_default.toml`` works as it is
with an 8k model, a 4k window still runs, and a window that truly cannot hold the prompt is refused with
the figures and the config keys to change. The CLI's stderr stays clean (no traceback, no logged error).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from tests.fixtures.cli import TurnScript, chat_requests, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import rows
from tests.fixtures.scripted_servers import ScriptedOllamaServer


def template_config(base_url: str, *, context_window: int | None = None) -> str:
    """The packaged template, unchanged except for ``base_url`` (and the window when given)."""
    text = (
        resources.files("agent_core")
        .joinpath("assets/templates/config_default.toml")
        .read_text(encoding="utf-8")
    )
    text, count = re.subn(r'(?m)^base_url = "http://127\.0\.0\.1:11434"$', f'base_url = "{base_url}"', text)
    assert count == 1
    if context_window is not None:
        text, count = re.subn(r"(?m)^context_window = 8192$", f"context_window = {context_window}", text)
        assert count == 1
    return text


def assert_clean_stderr(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert "ERROR" not in stderr, stderr
    assert "no active connection" not in stderr, stderr


def request_budget(request: Any) -> tuple[int, int]:
    options = request.json["options"]
    return int(options["num_predict"]), int(options["num_ctx"])


def test_packaged_template_runs_as_is_with_an_8k_model(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(template_config(scripted_ollama.base_url))
    scripted_ollama.handler(TurnScript(lambda r: "Hello from the template."))
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "hi"])
    assert result.exit_code == 0, result
    assert result.stdout == "Hello from the template.\n"
    assert_clean_stderr(result.stderr)
    (request,) = chat_requests(scripted_ollama)
    num_predict, num_ctx = request_budget(request)
    assert num_ctx == 8192
    # the reservation shrank from the template's 4096 to what the prompt leaves
    assert 256 <= num_predict < 4096


def test_a_4k_window_still_runs(soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer) -> None:
    soong_env.write_config(template_config(scripted_ollama.base_url, context_window=4096))
    scripted_ollama.handler(TurnScript(lambda r: "Small but working."))
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "hi"])
    assert result.exit_code == 0, result
    assert result.stdout == "Small but working.\n"
    assert_clean_stderr(result.stderr)
    (request,) = chat_requests(scripted_ollama)
    num_predict, num_ctx = request_budget(request)
    assert num_ctx == 4096
    assert num_predict >= 256
    # what was sent (system + tools + messages, estimated as the core does) leaves room for the output
    sent = len(str(request.json["messages"])) + len(str(request.json.get("tools", [])))
    assert sent // 4 + num_predict <= num_ctx + 512  # the estimate is approximate; JSON quoting adds ~10%


def test_a_window_that_cannot_hold_the_prompt_names_figures_and_keys(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer
) -> None:
    soong_env.write_config(template_config(scripted_ollama.base_url, context_window=1024))
    result = run_cli(["run", "--path", str(soong_env.project), "--plain", "hi"])
    assert result.exit_code == 1, result
    assert chat_requests(scripted_ollama) == []
    assert_clean_stderr(result.stderr)
    err = result.stderr
    assert "prompt_too_long" in err or "does not fit" in err
    assert re.search(r"needs \d+ prompt tokens", err), err
    assert "context window 1024" in err
    assert re.search(r"reserved output \d+", err), err
    assert "model.context_window" in err
    assert "context.reserve_output_tokens" in err
    (run,) = rows(soong_env, "SELECT end_reason, error_json FROM runs")
    assert run["end_reason"] == "prompt_too_long"


def test_version_and_the_run_help_lists_the_exit_codes() -> None:
    version = run_cli(["--version"])
    assert version.exit_code == 0, version
    assert re.fullmatch(r"soong-agent \d+\.\d+\.\d+\S*\n", version.stdout), version
    helped = run_cli(["run", "--help"])
    assert helped.exit_code == 0, helped
    text = " ".join(helped.stdout.split())
    for code in (
        "0 the run completed",
        "1 a startup or configuration error",
        "2 a usage error",
        "130 interrupted",
    ):
        assert code in text, helped
