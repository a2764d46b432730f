"""Target 2 — cold start: ``soong-agent run`` from process start to the first byte of the model request.

Starts the installed console script (``.venv/bin/soong-agent run --path <project> "hello"``) ``--runs``
times after one warm-up run (it writes the bytecode cache, as an install does), against the scripted OpenAI server in its own process. The
server stamps each request with ``time.monotonic()`` (a system-wide clock) when it has been received; the
figure is that stamp minus the clock just before ``Popen``. It therefore includes interpreter start-up,
imports, config loading, opening SQLite and the request itself (an upper bound of "first byte"). Also prints
the whole run's duration and ``python -X importtime``'s heaviest imports of one run with ``--imports``.

Run: ``.venv/bin/python -m benchmarks.cold_start [--runs 15] [--imports]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks._common import BenchDirs, private_home, scripted_server, write_config


def console_script() -> list[str]:
    script = Path(sys.executable).parent / "soong-agent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agent_core.cli"]


def arrivals(base_url: str) -> list[float]:
    with urllib.request.urlopen(f"{base_url}/_arrivals", timeout=10) as response:  # loopback only
        data: list[float] = json.loads(response.read())
    return data


def one_run(
    dirs: BenchDirs, base_url: str, extra_env: dict[str, str] | None = None
) -> tuple[float, float, str]:
    """``(seconds to the first model request, seconds to exit, stderr)``."""
    seen = len(arrivals(base_url))
    env = {**os.environ, **(extra_env or {})}
    # an installed package has up-to-date bytecode: let the warm-up run write it (shells of this
    # workplace export PYTHONDONTWRITEBYTECODE, which would make every run recompile edited modules)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.monotonic()
    done = subprocess.run(
        [*console_script(), "run", "--path", str(dirs.project), "hello"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    ended = time.monotonic()
    if done.returncode != 0:
        raise RuntimeError(f"soong-agent exited {done.returncode}: {done.stderr}")
    first = arrivals(base_url)[seen]
    return first - started, ended - started, done.stderr


def heaviest_imports(dirs: BenchDirs, base_url: str, top: int = 15) -> list[tuple[int, str]]:
    _first, _total, stderr = one_run(dirs, base_url, {"PYTHONPROFILEIMPORTTIME": "1"})
    rows: list[tuple[int, str]] = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _self, cumulative, name = line[len("import time:") :].split("|", 2)
            if cumulative.strip().isdigit():
                rows.append((int(cumulative), name.rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--imports", action="store_true", help="print the heaviest imports of one run")
    parser.add_argument("--json", help="also write the figures as JSON here")
    args = parser.parse_args()
    dirs = private_home()
    with scripted_server() as base_url:
        write_config(dirs.home, base_url)
        one_run(dirs, base_url)  # warm the bytecode cache
        samples = [one_run(dirs, base_url)[:2] for _ in range(args.runs)]
        imports = heaviest_imports(dirs, base_url) if args.imports else []
    first = [s[0] for s in samples]
    total = [s[1] for s in samples]
    figures = {
        "runs": args.runs,
        "first_request_median_ms": statistics.median(first) * 1000,
        "first_request_best_ms": min(first) * 1000,
        "whole_run_median_ms": statistics.median(total) * 1000,
    }
    print(f"runs                                  {args.runs} (+1 warm-up)")
    print(
        f"process start -> model request        median {figures['first_request_median_ms']:.0f} ms  "
        f"best {figures['first_request_best_ms']:.0f} ms   (target <= 300 ms)"
    )
    print(f"whole run (2 model calls + a tool)    median {figures['whole_run_median_ms']:.0f} ms")
    for cumulative, name in imports:
        print(f"  import {cumulative / 1000:7.1f} ms  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
