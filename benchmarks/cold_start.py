"""Target 2 — cold start: a fresh interpreter to the first byte of the first model request.

Two paths, each started ``--runs`` times after one warm-up run (it writes the bytecode cache, as an install
does), against the scripted OpenAI server in its own process:

- **CLI**: the installed console script, ``.venv/bin/soong-agent run --path <project> "hello"``;
- **SDK**: ``python -c`` importing ``agent_core``, opening an ``AgentRuntime`` and starting one run.

The server stamps each request with ``time.monotonic()`` (a system-wide clock) when it has been received;
the figure is that stamp minus the clock just before ``Popen``. It therefore includes interpreter start-up,
imports, config loading, opening SQLite and the request itself (an upper bound of "first byte"). The CPU
time (user + system) of each whole run is printed too: on a loaded machine it moves far less than wall time.

``--baseline-src DIR`` measures another checkout's ``src`` (e.g. ``git archive <commit> src``) in the same
run: every sample of the current tree is followed by one of the baseline (``PYTHONPATH=DIR``), so both see
the same machine load, and the ratio of their medians is printed. ``--imports`` prints ``-X importtime``'s
totals (sum of self times, median of ``--import-runs`` profiled runs) and the heaviest imports of one.

Run: ``.venv/bin/python -m benchmarks.cold_start [--runs 15] [--imports] [--baseline-src DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from benchmarks._common import BenchDirs, private_home, scripted_server, write_config

SDK_SCRIPT = """
import asyncio, sys
from agent_core import AgentRuntime
async def main():
    async with AgentRuntime(project_dir=sys.argv[1]) as rt:
        run = await rt.start("hello")
        await run.wait()
asyncio.run(main())
"""


def console_script() -> list[str]:
    script = Path(sys.executable).parent / "soong-agent"
    return [str(script)] if script.exists() else [sys.executable, "-m", "agent_core.cli"]


def command(path: str, dirs: BenchDirs) -> list[str]:
    if path == "cli":
        return [*console_script(), "run", "--path", str(dirs.project), "hello"]
    return [sys.executable, "-c", SDK_SCRIPT, str(dirs.project)]


def arrivals(base_url: str) -> list[float]:
    with urllib.request.urlopen(f"{base_url}/_arrivals", timeout=10) as response:  # loopback only
        data: list[float] = json.loads(response.read())
    return data


def one_run(
    dirs: BenchDirs, base_url: str, path: str, src: str | None = None, extra_env: dict[str, str] | None = None
) -> tuple[float, float, float, str]:
    """``(seconds to the first model request, seconds to exit, CPU seconds of the process, stderr)``."""
    seen = len(arrivals(base_url))
    env = {**os.environ, **(extra_env or {})}
    # an installed package has up-to-date bytecode: let the warm-up run write it (shells of this
    # workplace export PYTHONDONTWRITEBYTECODE, which would make every run recompile edited modules)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = src
    cpu_before = _children_cpu()
    started = time.monotonic()
    done = subprocess.run(
        command(path, dirs),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    ended = time.monotonic()
    cpu = _children_cpu() - cpu_before
    if done.returncode != 0:
        raise RuntimeError(f"{path} exited {done.returncode}: {done.stderr}")
    first = arrivals(base_url)[seen]
    return first - started, ended - started, cpu, done.stderr


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def import_profile(
    dirs: BenchDirs, base_url: str, path: str, src: str | None, top: int = 15
) -> tuple[float, float, list[tuple[int, str]]]:
    """``(sum of self times ms, of which agent_core ms, heaviest cumulative imports)`` of one run."""
    *_times, stderr = one_run(dirs, base_url, path, src, {"PYTHONPROFILEIMPORTTIME": "1"})
    rows: list[tuple[int, int, str]] = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            own, cumulative, name = line[len("import time:") :].split("|", 2)
            if own.strip().isdigit():
                rows.append((int(own), int(cumulative), name.rstrip()))
    total = sum(r[0] for r in rows) / 1000
    ours = sum(r[0] for r in rows if r[2].strip().startswith("agent_core")) / 1000
    heaviest = sorted(((r[1], r[2]) for r in rows), reverse=True)[:top]
    return total, ours, heaviest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--paths", default="cli,sdk", help="comma-separated: cli, sdk")
    parser.add_argument("--baseline-src", help="another checkout's src directory, measured alternately")
    parser.add_argument("--imports", action="store_true", help="-X importtime totals and heaviest imports")
    parser.add_argument("--import-runs", type=int, default=5, help="profiled runs per path and tree (median)")
    parser.add_argument("--json", help="also write the figures as JSON here")
    args = parser.parse_args()
    paths = [p for p in args.paths.split(",") if p]
    trees: list[tuple[str, str | None]] = [("current", None)]
    if args.baseline_src:
        trees.append(("baseline", str(Path(args.baseline_src).resolve())))
    dirs = private_home()
    figures: dict[str, dict[str, float]] = {}
    samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {
        (p, t): [] for p in paths for t, _ in trees
    }
    profiles: dict[tuple[str, str], list[tuple[float, float, list[tuple[int, str]]]]] = {
        (p, t): [] for p in paths for t, _ in trees
    }
    with scripted_server() as base_url:
        write_config(dirs.home, base_url)
        for path in paths:
            for _tree, src in trees:
                one_run(dirs, base_url, path, src)  # warm the bytecode cache
        for _ in range(args.runs):
            for path in paths:
                for tree, src in trees:
                    samples[(path, tree)].append(one_run(dirs, base_url, path, src)[:3])
        for _ in range(args.import_runs if args.imports else 0):
            for path in paths:
                for tree, src in trees:
                    profiles[(path, tree)].append(import_profile(dirs, base_url, path, src))
    print(f"runs per path and tree                {args.runs} (+1 warm-up)")
    for (path, tree), values in samples.items():
        first = [v[0] for v in values]
        entry = {
            "first_request_median_ms": statistics.median(first) * 1000,
            "first_request_best_ms": min(first) * 1000,
            "whole_run_median_ms": statistics.median(v[1] for v in values) * 1000,
            "whole_run_cpu_median_ms": statistics.median(v[2] for v in values) * 1000,
        }
        if profiles[(path, tree)]:
            entry["import_self_total_ms"] = statistics.median(p[0] for p in profiles[(path, tree)])
            entry["import_self_agent_core_ms"] = statistics.median(p[1] for p in profiles[(path, tree)])
        figures[f"{path}/{tree}"] = entry
        print(
            f"{path:>3} {tree:<9} process start -> model request  median {entry['first_request_median_ms']:.0f} ms"
            f"  best {entry['first_request_best_ms']:.0f} ms   whole run {entry['whole_run_median_ms']:.0f} ms"
            f" (CPU {entry['whole_run_cpu_median_ms']:.0f} ms)   (target <= 250 ms)"
        )
    if args.baseline_src:
        for path in paths:
            current, baseline = figures[f"{path}/current"], figures[f"{path}/baseline"]
            ratio = current["first_request_median_ms"] / baseline["first_request_median_ms"]
            cpu = current["whole_run_cpu_median_ms"] / baseline["whole_run_cpu_median_ms"]
            figures[f"{path}/ratio"] = {"first_request_median": ratio, "whole_run_cpu_median": cpu}
            print(f"{path:>3} current / baseline (medians)       first request {ratio:.2f}, CPU {cpu:.2f}")
    for (path, tree), runs in profiles.items():
        if not runs:
            continue
        entry = figures[f"{path}/{tree}"]
        print(
            f"{path:>3} {tree:<9} -X importtime (median of {len(runs)}): self times "
            f"{entry['import_self_total_ms']:.0f} ms in all, agent_core {entry['import_self_agent_core_ms']:.0f} ms"
        )
        for cumulative, name in runs[0][2]:
            print(f"      import {cumulative / 1000:7.1f} ms  {name}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
