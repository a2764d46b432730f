"""``soong-agent worker`` startup errors (docs/scale-out.md): one line, exit 1, the config key named; Ctrl-C
at any moment of its startup and polling: one line, exit 130."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import uuid

import pytest

from tests.e2e.test_cli_interrupts import STARTUP_WINDOW_S, interpreter_startup
from tests.fixtures.cli import cli_command, cli_env, console_script, run_cli
from tests.fixtures.env import SoongEnv
from tests.fixtures.temporal_server import TemporalServer


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


@pytest.mark.temporal
@pytest.mark.timeout(300)
def test_ctrl_c_at_a_spread_of_moments_is_one_line_and_130(
    soong_env: SoongEnv, temporal_server: TemporalServer
) -> None:
    """Issue 32: SIGINT while the worker starts, connects, polls: status 130, one line, no
    traceback (the spread of tests/e2e/test_cli_interrupts.py, for the command that needs Temporal)."""
    soong_env.write_config(
        engine={
            "kind": "temporal",
            "temporal": {"address": temporal_server.address, "task_queue": f"q-{uuid.uuid4().hex[:8]}"},
        }
    )
    for delay in (0.0, 0.1, 0.3, 0.6, 1.0, 1.5):
        proc = subprocess.Popen(
            cli_command(["worker", "--path", str(soong_env.project)], script=console_script()),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        try:
            time.sleep(delay)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        where = f"at {delay} s: status {proc.returncode}\n{out}\n{err}"
        if interpreter_startup(proc.returncode, err):
            assert delay < STARTUP_WINDOW_S, where
            continue
        assert proc.returncode == 130, where
        assert "Traceback" not in err and err.count("interrupted") <= 1, where
