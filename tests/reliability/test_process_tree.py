"""Commands leave no process behind (issue 14 item 5): a descendant that escapes the process group (its own
session, stdio closed) is killed when the tool returns, on a timeout and on cancellation."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from agent_core.tools._command import run_process
from tests.fixtures.code_tools import CodeToolsHarness, data_of, make_harness

PY = sys.executable

ESCAPER = """
import subprocess, sys
child = '''
import os, sys, time
open(sys.argv[2], "w").write(str(os.getpid()))
time.sleep(float(sys.argv[3]))
open(sys.argv[1], "w").write("escaped")
'''
subprocess.Popen([sys.executable, "-c", child, sys.argv[1], sys.argv[2], sys.argv[3]],
                 start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                 stderr=subprocess.DEVNULL, close_fds=True)
import time
deadline = time.time() + 5
import os
while not os.path.exists(sys.argv[2]) and time.time() < deadline:
    time.sleep(0.01)
"""


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


async def settle_and_check(marker: Path, pidfile: Path, wait_s: float) -> None:
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text():
            break
        await asyncio.sleep(0.01)
    pid = int(pidfile.read_text())
    await asyncio.sleep(wait_s)
    assert not alive(pid), f"descendant {pid} is still running after the tool returned"
    assert not marker.exists(), "an escaped descendant kept running and wrote its file"


@pytest.fixture
def h(tmp_path: Path) -> CodeToolsHarness:
    return make_harness(tmp_path)


async def test_run_command_kills_setsid_descendant(h: CodeToolsHarness, tmp_path: Path) -> None:
    marker, pidfile = tmp_path / "outside-marker", tmp_path / "pid"
    result = await h.run("code.run_command", argv=[PY, "-c", ESCAPER, str(marker), str(pidfile), "0.8"])
    assert not result.is_error, data_of(result)
    await settle_and_check(marker, pidfile, 1.3)


async def test_timeout_kills_setsid_descendant(tmp_path: Path) -> None:
    marker, pidfile = tmp_path / "outside-marker", tmp_path / "pid"
    script = ESCAPER + "\ntime.sleep(30)\n"
    started = time.monotonic()
    outcome = await run_process(
        [PY, "-c", script, str(marker), str(pidfile), "1.0"],
        cwd=tmp_path,
        env=dict(os.environ),
        timeout_ms=600,
        kill_grace_s=0.3,
    )
    assert outcome.timed_out and time.monotonic() - started < 5
    await settle_and_check(marker, pidfile, 1.5)


async def test_cancel_kills_setsid_descendant(tmp_path: Path) -> None:
    marker, pidfile = tmp_path / "outside-marker", tmp_path / "pid"
    script = ESCAPER + "\ntime.sleep(30)\n"
    cancel = asyncio.Event()
    task = asyncio.create_task(
        run_process(
            [PY, "-c", script, str(marker), str(pidfile), "1.0"],
            cwd=tmp_path,
            env=dict(os.environ),
            cancel_event=cancel,
            kill_grace_s=0.3,
        )
    )
    for _ in range(300):
        if pidfile.exists() and pidfile.read_text():
            break
        await asyncio.sleep(0.01)
    cancel.set()
    outcome = await task
    assert outcome.cancelled
    await settle_and_check(marker, pidfile, 1.5)
