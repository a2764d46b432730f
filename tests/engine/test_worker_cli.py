"""``soong-agent worker`` startup errors (surfaces.md §3): one line, exit 1, the config key named."""

from __future__ import annotations

import socket

from tests.fixtures.cli import run_cli
from tests.fixtures.env import SoongEnv


def test_worker_needs_the_temporal_engine(soong_env: SoongEnv) -> None:
    soong_env.write_config()
    result = run_cli(["worker", "--path", str(soong_env.project)])
    assert result.exit_code == 1, result
    assert 'a worker needs [engine] kind = "temporal"' in result.stderr, result
    assert "engine.kind is 'local'" in result.stderr, result


def test_worker_names_the_unreachable_address(soong_env: SoongEnv) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    soong_env.write_config(engine={"kind": "temporal", "temporal": {"address": f"127.0.0.1:{port}"}})
    result = run_cli(["worker", "--path", str(soong_env.project)])
    assert result.exit_code == 1, result
    assert f"engine.temporal.address = '127.0.0.1:{port}'" in result.stderr, result
