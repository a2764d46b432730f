"""Target 4 — concurrency: 50 sessions × 20 turns at once on one runtime.

Each session runs its turns one after another (user message → ``code.read_file`` call → tool result → final
answer, against the scripted OpenAI server in its own process); all sessions run concurrently on one
:class:`AgentRuntime` (one SQLite writer). Every run's stream is consumed with ``debug=True``. Prints the
total throughput (turns/s), the median and p99 turn latency, and checks, from the database after the
runtime closed, that no run failed (no ``database is locked``), that every run's persisted events were all
delivered on its stream (same ``seq`` set, ``run_seq`` contiguous from 1) and that every turn wrote 4 nodes.

Run: ``.venv/bin/python -m benchmarks.concurrency [--sessions 50] [--turns 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
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


async def session_worker(runtime: Any, turns: int, latencies: list[float], seen: dict[str, set[int]]) -> str:
    from agent_core import RunStatus

    session_id: str | None = None
    for i in range(turns):
        started = time.perf_counter()
        run = await runtime.start(turn_message(i), session_id=session_id)
        seqs: set[int] = set()
        async for event in run.events(debug=True):
            if event.seq is not None:
                seqs.add(event.seq)
        latencies.append(time.perf_counter() - started)
        if run.status != RunStatus.completed:
            raise RuntimeError(f"run {run.run_id} ended {run.status}: {run.error}")
        seen[run.run_id] = seqs
        session_id = run.session_id
    assert session_id is not None
    return session_id


def verify(dirs: BenchDirs, sessions: list[str], seen: dict[str, set[int]], turns: int) -> dict[str, int]:
    """Checks the database against what the streams delivered; returns counts."""
    db = sqlite3.connect(f"file:{dirs.home / 'sessions.sqlite'}?mode=ro", uri=True)
    problems: list[str] = []
    events = nodes = 0
    try:
        statuses = dict(db.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall())
        if set(statuses) != {"completed"}:
            problems.append(f"run statuses {statuses}")
        for sid in sessions:
            count = db.execute(f'SELECT COUNT(*) FROM "nodes_{sid}"').fetchone()[0]
            nodes += count
            if count != 4 * turns:
                problems.append(f"{sid}: {count} nodes, expected {4 * turns}")
            rows = db.execute(f'SELECT run_id, seq, run_seq FROM "events_{sid}" ORDER BY seq').fetchall()
            by_run: dict[str, list[tuple[int, int]]] = {}
            for run_id, seq, run_seq in rows:
                by_run.setdefault(run_id, []).append((seq, run_seq))
            for run_id, pairs in by_run.items():
                events += len(pairs)
                if [r for _, r in pairs] != list(range(1, len(pairs) + 1)):
                    problems.append(f"{run_id}: run_seq not contiguous")
                if {s for s, _ in pairs} != seen.get(run_id):
                    problems.append(f"{run_id}: persisted events missing from its stream")
    finally:
        db.close()
    if problems:
        raise AssertionError("; ".join(problems[:10]))
    return {"events_checked": events, "nodes_checked": nodes, "runs": len(seen)}


async def main_async(args: argparse.Namespace) -> None:
    from agent_core import AgentRuntime

    dirs = private_home()
    latencies: list[float] = []
    seen: dict[str, set[int]] = {}
    with scripted_server() as base_url:
        write_config(dirs.home, base_url)
        async with AgentRuntime(project_dir=dirs.project) as runtime:
            started = time.perf_counter()
            sessions = await asyncio.gather(
                *(session_worker(runtime, args.turns, latencies, seen) for _ in range(args.sessions))
            )
            elapsed = time.perf_counter() - started
    checks = verify(dirs, list(sessions), seen, args.turns)
    total = args.sessions * args.turns
    figures = {
        "sessions": args.sessions,
        "turns_per_session": args.turns,
        "turns": total,
        "elapsed_s": elapsed,
        "throughput_turns_per_s": total / elapsed,
        "model_requests_per_s": 2 * total / elapsed,
        "turn_median_ms": median_ms(latencies),
        "turn_p99_ms": percentile(latencies, 99) * 1000,
        **checks,
    }
    print(f"sessions x turns            {args.sessions} x {args.turns} = {total} turns in {elapsed:.1f} s")
    print(
        f"throughput                  {figures['throughput_turns_per_s']:.1f} turns/s "
        f"({figures['model_requests_per_s']:.1f} model requests/s)"
    )
    print(
        f"turn latency                median {figures['turn_median_ms']:.0f} ms  p99 {figures['turn_p99_ms']:.0f} ms"
    )
    print(
        f"checks                      all {checks['runs']} runs completed (no 'database is locked'); "
        f"{checks['events_checked']} persisted events all delivered, run_seq contiguous; "
        f"{checks['nodes_checked']} nodes"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--json", help="also write the figures as JSON here")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
