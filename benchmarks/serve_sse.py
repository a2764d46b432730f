"""50 concurrent SSE clients on one ``soong-agent serve`` while runs execute (docs/serve.md#run-event-streams,
issue 18).

Starts the scripted Ollama model (in-process thread, 127.0.0.1) and ``soong-agent serve --port 0`` with a
private home, starts ``--runs`` runs whose replies stream slowly, and attaches ``--clients`` SSE clients
spread over the runs — half at once, half mid-run (they get the replay from SQLite, then live). Each client
reads to the end of its stream. Checks against SQLite: every client saw every user-visible persisted event
of its run exactly once and in ``run_seq`` order (no lost, duplicated or reordered event). Prints figures.

Usage: ``.venv/bin/python -m benchmarks.serve_sse [--clients 50] [--runs 10] [--frames 40]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from httpx_sse import aconnect_sse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fixtures.env import SoongEnv  # noqa: E402
from tests.fixtures.scripted_servers import ScriptedOllamaServer  # noqa: E402
from tests.fixtures.serve import persisted_events, start_serve, use_scripted_ollama  # noqa: E402

DEBUG_ONLY = {"model_started", "model_completed", "context_built"}


async def client(base: str, token: str, run_id: str, delay: float) -> tuple[list[int], int, float]:
    await asyncio.sleep(delay)
    seqs: list[int] = []
    deltas = 0
    started = time.monotonic()
    async with (
        httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http,
        aconnect_sse(http, "GET", f"/api/runs/{run_id}/events") as source,
    ):
        async for message in source.aiter_sse():
            event = json.loads(message.data)
            if event["seq"] is not None:
                seqs.append(event["run_seq"])
            elif event["event_type"] == "message_delta":
                deltas += 1
    return seqs, deltas, time.monotonic() - started


async def main_async(args: argparse.Namespace, env: SoongEnv, base: str, token: str) -> int:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as http:
        runs = []
        for _ in range(args.runs):
            created = (await http.post("/api/runs", json={"message": f"slow {args.frames}"})).json()
            runs.append(created)
    started = time.monotonic()
    tasks = []
    for i in range(args.clients):
        run = runs[i % len(runs)]
        delay = 0.0 if i % 2 == 0 else 0.5 + (i % 7) * 0.3  # half attach mid-run
        tasks.append(asyncio.ensure_future(client(base, token, run["run_id"], delay)))
    results = await asyncio.gather(*tasks)
    wall = time.monotonic() - started
    lost = duplicated = reordered = 0
    total = 0
    for i, (seqs, _, _) in enumerate(results):
        run = runs[i % len(runs)]
        stored = [
            e["run_seq"]
            for e in persisted_events(env, run["session_id"], run["run_id"])
            if e["event_type"] not in DEBUG_ONLY
        ]
        total += len(seqs)
        lost += len(set(stored) - set(seqs))
        duplicated += len(seqs) - len(set(seqs))
        reordered += int(seqs != sorted(seqs))
    durations = [d for _, _, d in results]
    deltas = [n for _, n, _ in results]
    print(f"clients {args.clients}, runs {args.runs} ({args.frames} streamed frames each, 0.1 s apart)")
    print(
        f"wall {wall:.2f} s; per-client stream median {statistics.median(durations):.2f} s, max {max(durations):.2f} s"
    )
    print(
        f"persisted events delivered {total} ({total / args.clients:.1f} per client); live message_delta median {statistics.median(deltas):.0f} per client"
    )
    print(f"lost {lost}, duplicated {duplicated}, out of order {reordered}")
    return 0 if lost == duplicated == reordered == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--frames", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = SoongEnv(home=Path(tmp) / "home", project=Path(tmp) / "project")
        env.home.mkdir()
        env.project.mkdir()
        os.environ["SOONG_AGENT_HOME"] = str(env.home)
        os.environ["HOME"] = tmp
        with ScriptedOllamaServer() as model:
            use_scripted_ollama(env, model)
            server = start_serve(env)
            try:
                return asyncio.run(main_async(args, env, server.base_url, server.token))
            finally:
                server.stop()


if __name__ == "__main__":
    raise SystemExit(main())
