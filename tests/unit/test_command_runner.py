"""The shared command runner (docs/tools.md#the-command-runner): env allowlist, process groups, timeout,
cancellation, output."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path

import pytest

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._command import (
    TREE_TRACKING,
    StreamCapture,
    build_env,
    env_summary,
    head_tail,
    resolve_executable,
    run_process,
)

PY = sys.executable


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


async def wait_dead(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.02)
    return not alive(pid)


async def read_pid(path: Path, within: float = 3.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text().strip())
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never written")


SPAWN_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
    "print('started', flush=True)\n"  # before the pid file: a test that waits for it sees the output too
    "open(sys.argv[1], 'w').write(str(p.pid))\n"
    "time.sleep(30)\n"
)


def test_build_env_only_allowlisted_names() -> None:
    environ = {"PATH": "/bin", "HOME": "/h", "SECRET_TOKEN": "s3cr3t-value", "OTHER": "x"}
    env = build_env(["PATH", "HOME", "TMPDIR"], environ=environ)
    assert env == {"PATH": "/bin", "HOME": "/h"}
    env = build_env(
        ["PATH"], required=["OTHER"], required_by="tool x", extra={"SOONG_AGENT_HOME": "/sh"}, environ=environ
    )
    assert env == {"PATH": "/bin", "OTHER": "x", "SOONG_AGENT_HOME": "/sh"}
    with pytest.raises(AgentCoreError) as err:
        build_env([], required=["MISSING_VAR"], required_by="hook #1 (hooks.json)", environ=environ)
    assert err.value.code == ErrorCode.config_error
    assert "MISSING_VAR" in err.value.message and "hook #1" in err.value.message
    assert env_summary(["PATH", "TMPDIR"], environ) == {"PATH": "<set>", "TMPDIR": "<unset>"}


def test_resolve_executable(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "mytool"
    tool.write_text("#!/bin/sh\necho hi\n")
    tool.chmod(0o755)
    plain = bindir / "plain.txt"
    plain.write_text("x")
    env = {"PATH": str(bindir)}
    assert resolve_executable("mytool", cwd=tmp_path, env=env) == tool
    assert resolve_executable("./bin/mytool", cwd=tmp_path, env={}) == tool
    for name, e in (
        ("nosuchtool", env),
        ("./bin/plain.txt", env),
        ("./bin", env),
        ("mytool", {"PATH": "/nonexistent"}),
    ):
        with pytest.raises(AgentCoreError) as err:
            resolve_executable(name, cwd=tmp_path, env=e)
        assert err.value.code == ErrorCode.file_not_found
        assert err.value.details["executable"] == name


async def test_exec_captures_streams_exit_code_and_exact_env(tmp_path: Path) -> None:
    code = "import os,sys; print(sorted(os.environ)); print('err', file=sys.stderr); sys.exit(7)"
    outcome = await run_process([PY, "-c", code], cwd=tmp_path, env={"ONLY_THIS": "1"}, timeout_ms=10_000)
    assert outcome.exit_code == 7 and not outcome.timed_out and not outcome.cancelled
    names = eval(outcome.stdout.text())  # list of names
    assert [n for n in names if n not in ("LC_CTYPE",)] == ["ONLY_THIS"]
    assert outcome.stderr.text() == "err\n"


async def test_stdin_is_fed_then_closed_and_devnull_by_default(tmp_path: Path) -> None:
    code = "import sys; data = sys.stdin.read(); print(len(data), repr(data[:5]))"
    outcome = await run_process(
        [PY, "-c", code], cwd=tmp_path, env={}, stdin_data=b"hello" * 100_000, timeout_ms=10_000
    )
    assert outcome.stdout.text() == "500000 'hello'\n"
    outcome = await run_process([PY, "-c", code], cwd=tmp_path, env={}, timeout_ms=10_000)
    assert outcome.stdout.text() == "0 ''\n"


async def test_shell_mode_for_hooks_and_declarative_tools(tmp_path: Path) -> None:
    outcome = await run_process(
        shell_command='echo "$1-$2" && printf x >&2',
        cwd=tmp_path,
        env={"PATH": os.defpath},
        timeout_ms=10_000,
    )
    assert outcome.exit_code == 0 and outcome.stdout.text() == "-\n" and outcome.stderr.text() == "x"


async def test_argument_validation() -> None:
    cwd = Path("/")
    for kwargs in ({"argv": []}, {"argv": ["a\x00b"]}, {}, {"argv": ["true"], "shell_command": "true"}):
        with pytest.raises(AgentCoreError) as err:
            await run_process(cwd=cwd, env={}, **kwargs)  # type: ignore[arg-type]
        assert err.value.code == ErrorCode.validation_error


async def test_missing_executable_or_cwd_is_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(AgentCoreError) as err:
        await run_process([str(tmp_path / "nope")], cwd=tmp_path, env={})
    assert err.value.code == ErrorCode.file_not_found
    with pytest.raises(AgentCoreError) as err:
        await run_process([PY, "-c", "pass"], cwd=tmp_path / "missing", env={})
    assert err.value.code == ErrorCode.file_not_found


async def test_timeout_terminates_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    outcome = await run_process(
        [PY, "-c", SPAWN_GRANDCHILD, str(pidfile)], cwd=tmp_path, env={}, timeout_ms=700
    )
    assert outcome.timed_out and outcome.exit_code is None and not outcome.cancelled
    assert outcome.stdout.text() == "started\n" and outcome.partial
    assert time.monotonic() - started < 3.5
    assert await wait_dead(await read_pid(pidfile), 2.0)


async def test_sigterm_ignored_then_sigkill_after_grace(tmp_path: Path) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('armed', flush=True)\n"
        "time.sleep(30)\n"
    )
    started = time.monotonic()
    outcome = await run_process([PY, "-c", code], cwd=tmp_path, env={}, timeout_ms=500)
    elapsed = time.monotonic() - started
    assert outcome.timed_out and outcome.stdout.text() == "armed\n"
    assert 2.3 <= elapsed < 4.5, elapsed  # 0.5 s timeout + the fixed 2 s SIGTERM grace


async def test_cancel_event_terminates_and_returns_partial_output(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    event = asyncio.Event()
    task = asyncio.create_task(
        run_process(
            [PY, "-c", SPAWN_GRANDCHILD, str(pidfile)],
            cwd=tmp_path,
            env={},
            timeout_ms=20_000,
            cancel_event=event,
        )
    )
    grandchild = await read_pid(pidfile)
    event.set()
    outcome = await asyncio.wait_for(task, 4)
    assert outcome.cancelled and not outcome.timed_out and outcome.exit_code is None
    assert outcome.partial and outcome.stdout.text() == "started\n"
    assert await wait_dead(grandchild, 2.0)


async def test_already_cancelled_spawns_nothing(tmp_path: Path) -> None:
    event = asyncio.Event()
    event.set()
    marker = tmp_path / "marker"
    outcome = await run_process(
        [PY, "-c", f"open({str(marker)!r}, 'w')"], cwd=tmp_path, env={}, cancel_event=event
    )
    assert outcome.cancelled and not marker.exists()


async def test_task_cancellation_kills_group_and_propagates(tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    task = asyncio.create_task(run_process([PY, "-c", SPAWN_GRANDCHILD, str(pidfile)], cwd=tmp_path, env={}))
    grandchild = await read_pid(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 4)
    assert await wait_dead(grandchild, 2.0)


async def test_leftover_group_members_are_killed_after_normal_exit(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = await run_process(
        ["/bin/sh", "-c", "sleep 30 & echo $!"], cwd=tmp_path, env={"PATH": os.defpath}, timeout_ms=10_000
    )
    assert outcome.exit_code == 0 and time.monotonic() - started < 3
    assert await wait_dead(int(outcome.stdout.text().strip()), 2.0)


async def test_streaming_stdout_lines(tmp_path: Path) -> None:
    lines: list[bytes] = []
    outcome = await run_process(
        [PY, "-c", "print('a'); print('b', end='')"], cwd=tmp_path, env={}, on_stdout_line=lines.append
    )
    assert lines == [b"a\n", b"b"] and outcome.stdout.total_bytes == 3 and outcome.stdout.head == b""


def test_head_tail_marker_and_utf8_boundaries() -> None:
    data = ("é" * 100).encode()  # 200 bytes of 2-byte characters
    text, cut = head_tail(StreamCapture(head=data, tail=b"", total_bytes=len(data)), 21)
    assert cut
    head, rest = text.split("... [truncated ", 1)
    count, tail = rest.split(" bytes] ...", 1)
    assert head == "é" * 5 and tail == "é" * 5  # 10 -> 5 chars (cut on a boundary); 11 -> 5 chars
    assert int(count) == 200 - 20
    small = StreamCapture(head=b"abc", tail=b"", total_bytes=3)
    assert head_tail(small, 3) == ("abc", False)


async def test_overflowing_stream_keeps_exact_tail(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('H' * 1000 + 'x' * 5000 + 'T' * 1000)"
    outcome = await run_process([PY, "-c", code], cwd=tmp_path, env={}, capture_cap=2000, tail_keep=1500)
    assert (
        outcome.stdout.overflowed and outcome.stdout.total_bytes == 7000 and len(outcome.stdout.head) == 2000
    )
    text, cut = head_tail(outcome.stdout, 2000)
    assert cut and text == "H" * 1000 + "... [truncated 5000 bytes] ..." + "T" * 1000


async def test_escaped_background_process_does_not_hang_the_runner(tmp_path: Path) -> None:
    """A child that leaves the group (setsid) but keeps stdout open: the runner returns after a bounded drain."""
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(8)'])\n"
        "print(p.pid, flush=True)\n"
    )
    started = time.monotonic()
    outcome = await run_process([PY, "-c", code], cwd=tmp_path, env={}, timeout_ms=10_000)
    escaped = int(outcome.stdout.text().split()[0])
    try:
        assert outcome.exit_code == 0 and time.monotonic() - started < 4
        if TREE_TRACKING:  # issue 14 item 5: the subreaper launcher killed it with the tree
            assert not Path(f"/proc/{escaped}").exists() or "Z" in Path(f"/proc/{escaped}/stat").read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(escaped, 9)
