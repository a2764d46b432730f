"""Schemathesis against a running ``soong-agent serve`` (docs/serve.md): every generated request to every
route in ``/openapi.json`` (coverage, fuzzing and stateful phases, all checks) — no 5xx, responses match
the document. Marker ``fuzz_api`` (excluded by default; ``.ci/run`` runs it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.env import SoongEnv
from tests.fixtures.scripted_servers import ScriptedOllamaServer
from tests.fixtures.serve import start_serve, use_scripted_ollama

pytestmark = [pytest.mark.fuzz_api, pytest.mark.timeout(600)]


def test_schemathesis_finds_no_failure(
    soong_env: SoongEnv, scripted_ollama: ScriptedOllamaServer, tmp_path: Path
) -> None:
    use_scripted_ollama(soong_env, scripted_ollama)
    server = start_serve(soong_env)
    try:
        result = subprocess.run(
            [
                str(Path(sys.executable).with_name("schemathesis")),
                "run",
                f"{server.base_url}/openapi.json",
                "-H",
                f"Authorization: Bearer {server.token}",
                "--checks",
                "all",
                "--max-examples",
                os.environ.get("SOONG_FUZZ_EXAMPLES", "30"),
                "--seed",
                os.environ.get("SOONG_FUZZ_SEED", "1"),
                "--request-timeout",
                "20",
                "--no-color",
                # the approval push stream never ends by design (tests/e2e/test_serve_api.py covers it)
                "--exclude-path",
                "/api/approvals/events",
            ],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=540,
            check=False,
        )
        report = result.stdout[-8000:] + result.stderr[-2000:]
        assert result.returncode == 0, report
        assert "5xx" not in report.split("SUMMARY")[-1] or "Server error" not in report, report
    finally:
        assert server.stop() == 0
    stderr = server.proc.stderr.read() if server.proc.stderr else ""
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
