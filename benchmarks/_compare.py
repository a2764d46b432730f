"""``turn_overhead --compare``: ours, the raw-httpx floor and the peers, turn by turn in one run.

Every turn runs, in this order, our runtime (``runtime.start`` until its event stream ends: every node and
event durably stored), the floor (the same two streaming round trips over our exact last request), then
each peer (``benchmarks/_peers.py``) on its own growing session. All talk to the same scripted OpenAI
server in its own process, so they see the same machine load; the table gives each one's median turn and
its ratio to the floor's median, and each one's 2nd/1st-half growth.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks._common import BenchDirs, halves_growth, median_ms, turn_message
from benchmarks._peers import make_peers


async def compare(dirs: BenchDirs, base_url: str, turns: int) -> dict[str, Any]:
    import httpx

    from agent_core import AgentRuntime, RunStatus
    from benchmarks.turn_overhead import Samples, floor_turn

    ours, floor = Samples(), Samples()
    peers, missing = make_peers(base_url, dirs.project, dirs.root)
    peer_samples = {p.name: Samples() for p in peers}
    session_id: str | None = None
    try:
        async with httpx.AsyncClient(timeout=60) as client, AgentRuntime(project_dir=dirs.project) as rt:
            for i in range(turns):
                message = turn_message(i)
                wall, cpu = time.perf_counter(), time.process_time()
                run = await rt.start(message, session_id=session_id)
                async for _event in run.events():
                    pass
                ours.wall.append(time.perf_counter() - wall)
                ours.cpu.append(time.process_time() - cpu)
                if run.status != RunStatus.completed:
                    raise RuntimeError(f"turn {i} ended {run.status}: {run.error}")
                session_id = run.session_id
                await floor_turn(client, base_url, floor)
                for peer in peers:
                    samples = peer_samples[peer.name]
                    wall, cpu = time.perf_counter(), time.process_time()
                    answer = await peer.turn(message)
                    samples.wall.append(time.perf_counter() - wall)
                    samples.cpu.append(time.process_time() - cpu)
                    if not answer.startswith("Read it"):
                        raise RuntimeError(f"{peer.name}: unexpected answer {answer[:80]!r} at turn {i}")
    finally:
        for peer in peers:
            await peer.close()
    rows = [("raw httpx (the wire floor)", floor), ("ours (soong-agent)", ours)]
    rows += [(name, s) for name, s in peer_samples.items()]
    floor_median = median_ms(floor.wall)
    table = [
        {
            "harness": name,
            "median_ms": median_ms(s.wall),
            "x_floor": median_ms(s.wall) / floor_median,
            "cpu_median_ms": median_ms(s.cpu),
            "growth": halves_growth(s.wall),
        }
        for name, s in rows
    ]
    print(f"one run, {turns} turns per harness, interleaved turn by turn (same machine load)")
    print(
        f"| harness | median per turn, {turns} turns | x raw-httpx floor | CPU median | growth 2nd/1st half |"
    )
    print("|---|---|---|---|---|")
    for row in table:
        print(
            f"| {row['harness']} | {row['median_ms']:.1f} ms | {row['x_floor']:.1f} |"
            f" {row['cpu_median_ms']:.1f} ms | {row['growth']:.2f} |"
        )
    for note in missing:
        print(f"not measured: {note}")
    return {"turns": turns, "table": table, "missing": missing}
