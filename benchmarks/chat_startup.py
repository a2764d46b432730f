"""Chat startup: ``soong-agent chat`` from process start to its first prompt on a pseudo-terminal.

Starts the installed console script (``.venv/bin/soong-agent chat --path <project>``) ``--runs`` times
after one warm-up run (it writes the bytecode cache, as an install does) on a fresh pty (stdlib ``pty``),
answering the terminal's cursor-position query like a terminal does. The figure is the time from just
before the process is spawned until the prompt (``>`` followed by the editor's cursor placement) has been
written; then Ctrl-D ends the chat and the exit status must be 0. No model request is made (the
runtime opens in the background while the prompt is shown). Target: median under 400 ms on 2 cores.

Run: ``.venv/bin/python -m benchmarks.chat_startup [--runs 15]``
"""

from __future__ import annotations

import argparse
import os
import re
import select
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._common import BenchDirs, private_home, write_config

PROMPT = re.compile(rb">(?: |\x08|\x1b\[)")
CPR_QUERY = b"\x1b[6n"
TARGET_S = 0.400


def console_script() -> list[str]:
    script = Path(sys.executable).parent / "soong-agent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agent_core.cli"]


def one_start(dirs: BenchDirs) -> float:
    """Seconds from spawn to the first prompt."""
    import pty

    env = {**os.environ, "TERM": "xterm-256color"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    master, slave = pty.openpty()
    started = time.monotonic()
    proc = subprocess.Popen(
        [*console_script(), "chat", "--path", str(dirs.project)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    shown: float | None = None
    try:
        deadline = started + 30
        while shown is None and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            chunk = os.read(master, 65536)
            if not chunk:
                break
            seen += chunk
            if CPR_QUERY in chunk:
                os.write(master, b"\x1b[1;1R")
            if PROMPT.search(seen.replace(CPR_QUERY, b"")):
                shown = time.monotonic()
        if shown is None:
            raise RuntimeError(f"no prompt within 30 s; output: {seen[-500:]!r}")
        time.sleep(0.05)
        os.write(master, b"\x04")  # Ctrl-D: leave
        with_drain(master, proc)
        if proc.returncode != 0:
            raise RuntimeError(f"soong-agent chat exited {proc.returncode}: {seen[-500:]!r}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    return shown - started


def with_drain(master: int, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                os.read(master, 65536)
            except OSError:
                break
    proc.wait(timeout=max(0.1, deadline - time.monotonic()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    dirs = private_home("soong-bench-chat-")
    write_config(dirs.home, "http://127.0.0.1:9/v1")  # never contacted: no message is sent
    one_start(dirs)  # warm-up: bytecode cache, SQLite file and schema
    times = [one_start(dirs) for _ in range(args.runs)]
    median = statistics.median(times)
    print(
        f"chat startup to first prompt ({args.runs} runs): median {median * 1000:.0f} ms, "
        f"best {min(times) * 1000:.0f} ms, worst {max(times) * 1000:.0f} ms "
        f"(target < {TARGET_S * 1000:.0f} ms: {'met' if median < TARGET_S else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
