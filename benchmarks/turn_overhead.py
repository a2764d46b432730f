"""Target 1 — turn overhead of the runtime against the raw-httpx floor over a long session.

One session of ``--turns`` turns (default 300). Each turn: user message → the model calls
``code.read_file`` → tool result → final answer, against the scripted OpenAI server in a separate process
(TCP_NODELAY). The runtime side times ``runtime.start(...)`` until its event stream ends (every node and
event durably stored in SQLite). The floor makes the same two streaming round trips per turn with raw
httpx over the same history (the exact messages the runtime sent, appended turn by turn, parsed the same
way). Prints the medians, their ratio (target ≤ 1.5×, issue 16) and each side's second-half/first-half growth
(target: the runtime's growth no steeper than the floor's).

``--telemetry jsonl`` turns OpenTelemetry spans on (``[telemetry] enabled``, JSONL exporter into the private
home; needs the ``otel`` extra). ``--telemetry compare`` measures the telemetry overhead itself: two runtimes
(telemetry off / on, own homes, same project and server) run their sessions turn by turn alternately, so
both see the same machine load; prints both medians and the per-turn overhead (target ≤ 10 %).

``--beside-writes-ms N`` (issue 40) runs a second process on the same home while the session runs: it
opens the session database and commits a small row into a table of its own every N ms, so the runtime's
transactions keep finding that another connection wrote the file (their counters are read again, and a
commit may wait for the other one's lock) — the cost of several processes on one home.

Run: ``.venv/bin/python -m benchmarks.turn_overhead [--turns 300] [--telemetry off|jsonl] [--profile out.html]
[--beside-writes-ms N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    BenchDirs,
    halves_growth,
    median_ms,
    private_home,
    scripted_server,
    turn_message,
    write_config,
)


async def _post_stream(client: Any, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One streaming Chat Completions call: parses every SSE chunk, aggregates text and tool calls."""
    text: list[str] = []
    calls: dict[int, dict[str, str]] = {}
    content = json.dumps(body, ensure_ascii=False).encode("utf-8")
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-floor"}
    async with client.stream("POST", url, content=content, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    text.append(delta["content"])
                for frag in delta.get("tool_calls") or []:
                    call = calls.setdefault(frag["index"], {"id": "", "name": "", "arguments": ""})
                    call["id"] = frag.get("id") or call["id"]
                    function = frag.get("function") or {}
                    call["name"] += function.get("name") or ""
                    call["arguments"] += function.get("arguments") or ""
    return {"text": "".join(text), "calls": [json.loads(c["arguments"]) for c in calls.values()]}


@dataclass
class Samples:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


async def floor_turn(client: Any, base_url: str, samples: Samples) -> None:
    """The floor of the turn the runtime just ran: the same two round trips over the same history.

    The runtime's last request of the turn holds the whole history (… user, assistant tool call, tool
    result); the first floor call sends it without the last two messages, the second one sends all of it.
    """
    last = (await client.get(f"{base_url}/_last_request")).json()
    messages = last.pop("messages")
    if messages[-1]["role"] != "tool":
        raise RuntimeError("the runtime's last request of a turn ends with the tool result")
    url = f"{base_url}/chat/completions"
    history = messages[:-2]
    wall, cpu = time.perf_counter(), time.process_time()
    first = await _post_stream(client, url, {**last, "messages": history})
    assert first["calls"], "the scripted model calls read_file"
    history.extend(messages[-2:])
    second = await _post_stream(client, url, {**last, "messages": history})
    assert second["text"]
    samples.wall.append(time.perf_counter() - wall)
    samples.cpu.append(time.process_time() - cpu)


BESIDE_WRITER = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=5)
conn.execute("CREATE TABLE IF NOT EXISTS bench_beside (at REAL)")
pause = float(sys.argv[2]) / 1000
while True:
    conn.execute("INSERT INTO bench_beside (at) VALUES (?)", (time.time(),))
    time.sleep(pause)
"""
"""The second process of ``--beside-writes-ms``: one small commit every N ms (killed at the end)."""


def _start_beside(db: str, every_ms: float) -> Any:
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", BESIDE_WRITER, db, str(every_ms)])


async def interleaved(
    dirs: BenchDirs, base_url: str, turns: int, profiler: Any, beside_writes_ms: float = 0
) -> tuple[Samples, Samples]:
    """Runs the runtime session turn by turn; after each turn the floor repeats it (same load, same
    history). Times wall clock and this process's CPU time (all threads, incl. the SQLite writer)."""
    import httpx

    from agent_core import AgentRuntime

    runtime, floor = Samples(), Samples()
    beside: Any = None
    async with httpx.AsyncClient(timeout=60) as client, AgentRuntime(project_dir=dirs.project) as rt:
        if beside_writes_ms:  # the database exists now (the runtime opened it)
            db = str(dirs.home / "sessions.sqlite")
            beside = _start_beside(db, beside_writes_ms)
        try:
            await _turns(rt, client, base_url, turns, profiler, runtime, floor)
        finally:
            if beside is not None:
                beside.kill()
                beside.wait()
    return runtime, floor


async def _turns(
    rt: Any, client: Any, base_url: str, turns: int, profiler: Any, runtime: Samples, floor: Samples
) -> None:
    from agent_core import RunStatus

    session_id: str | None = None
    for i in range(turns):
        if profiler is not None:
            profiler.start()
        wall, cpu = time.perf_counter(), time.process_time()
        run = await rt.start(turn_message(i), session_id=session_id)
        async for _event in run.events():
            pass
        runtime.wall.append(time.perf_counter() - wall)
        runtime.cpu.append(time.process_time() - cpu)
        if profiler is not None:
            profiler.stop()
        if run.status != RunStatus.completed:
            raise RuntimeError(f"turn {i} ended {run.status}: {run.error}")
        session_id = run.session_id
        await floor_turn(client, base_url, floor)


def report(runtime: Samples, floor: Samples) -> dict[str, float]:
    figures = {
        "turns": len(runtime.wall),
        "runtime_median_ms": median_ms(runtime.wall),
        "floor_median_ms": median_ms(floor.wall),
        "ratio": median_ms(runtime.wall) / median_ms(floor.wall),
        "paired_ratio_median": statistics.median(
            r / f for r, f in zip(runtime.wall, floor.wall, strict=True)
        ),
        "runtime_growth": halves_growth(runtime.wall),
        "floor_growth": halves_growth(floor.wall),
        "runtime_cpu_median_ms": median_ms(runtime.cpu),
        "floor_cpu_median_ms": median_ms(floor.cpu),
        "runtime_cpu_growth": halves_growth(runtime.cpu),
        "floor_cpu_growth": halves_growth(floor.cpu),
        "runtime_first10_cpu_ms": median_ms(runtime.cpu[:10]),
        "runtime_last10_cpu_ms": median_ms(runtime.cpu[-10:]),
        "floor_first10_cpu_ms": median_ms(floor.cpu[:10]),
        "floor_last10_cpu_ms": median_ms(floor.cpu[-10:]),
        "runtime_last10_median_ms": median_ms(runtime.wall[-10:]),
        "floor_last10_median_ms": median_ms(floor.wall[-10:]),
    }
    print(f"turns in the session          {figures['turns']}")
    print(
        f"runtime median turn           {figures['runtime_median_ms']:.2f} ms  (cpu {figures['runtime_cpu_median_ms']:.2f} ms)"
    )
    print(
        f"floor (raw httpx) median      {figures['floor_median_ms']:.2f} ms  (cpu {figures['floor_cpu_median_ms']:.2f} ms)"
    )
    print(f"ratio of medians              {figures['ratio']:.2f}x   (target <= 1.5x)")
    print(f"median of per-turn ratios     {figures['paired_ratio_median']:.2f}x")
    print(
        f"growth 2nd/1st half (wall)    runtime {figures['runtime_growth']:.3f}  floor {figures['floor_growth']:.3f}"
        "   (target: runtime <= floor)"
    )
    print(
        f"growth 2nd/1st half (cpu)     runtime {figures['runtime_cpu_growth']:.3f}  "
        f"floor {figures['floor_cpu_growth']:.3f}"
    )
    print(
        f"last 10 turns median          runtime {figures['runtime_last10_median_ms']:.2f} ms  "
        f"floor {figures['floor_last10_median_ms']:.2f} ms"
    )
    print(
        f"cpu first/last 10 turns       runtime {figures['runtime_first10_cpu_ms']:.2f} / "
        f"{figures['runtime_last10_cpu_ms']:.2f} ms  floor {figures['floor_first10_cpu_ms']:.2f} / "
        f"{figures['floor_last10_cpu_ms']:.2f} ms"
    )
    return figures


def _telemetry_config(home: Path) -> str:
    return f'[telemetry]\nenabled = true\nexporter = "jsonl"\npath = "{home / "traces.jsonl"}"\n'


async def compare_telemetry(dirs: BenchDirs, base_url: str, turns: int) -> dict[str, Any]:
    """Telemetry off vs on, turn by turn alternately (the order flips every turn)."""
    from agent_core import AgentRuntime, RunStatus

    home_on = dirs.home.parent / "home_telemetry"
    home_on.mkdir()
    write_config(dirs.home, base_url)
    write_config(home_on, base_url, extra=_telemetry_config(home_on))
    samples = {"off": Samples(), "on": Samples()}
    sessions: dict[str, str | None] = {"off": None, "on": None}
    async with (
        AgentRuntime(project_dir=dirs.project, home_dir=dirs.home) as off,
        AgentRuntime(project_dir=dirs.project, home_dir=home_on) as on,
    ):
        runtimes = {"off": off, "on": on}
        for i in range(turns):
            for key in ("off", "on") if i % 2 == 0 else ("on", "off"):
                wall, cpu = time.perf_counter(), time.process_time()
                run = await runtimes[key].start(turn_message(i), session_id=sessions[key])
                async for _event in run.events():
                    pass
                samples[key].wall.append(time.perf_counter() - wall)
                samples[key].cpu.append(time.process_time() - cpu)
                if run.status != RunStatus.completed:
                    raise RuntimeError(f"turn {i} ({key}) ended {run.status}: {run.error}")
                sessions[key] = run.session_id
    off_s, on_s = samples["off"], samples["on"]
    spans = (home_on / "traces.jsonl").read_text(encoding="utf-8").count("\n")
    figures: dict[str, Any] = {
        "turns": turns,
        "off_median_ms": median_ms(off_s.wall),
        "on_median_ms": median_ms(on_s.wall),
        "off_cpu_median_ms": median_ms(off_s.cpu),
        "on_cpu_median_ms": median_ms(on_s.cpu),
        "paired_overhead_median": statistics.median(
            n / f - 1 for n, f in zip(on_s.wall, off_s.wall, strict=True)
        ),
        "spans": spans,
    }
    figures["median_overhead"] = figures["on_median_ms"] / figures["off_median_ms"] - 1
    print(f"turns per session             {turns} (alternating, order flipped every turn)")
    print(
        f"telemetry off median turn     {figures['off_median_ms']:.2f} ms  (cpu {figures['off_cpu_median_ms']:.2f} ms)"
    )
    print(
        f"telemetry on  median turn     {figures['on_median_ms']:.2f} ms  (cpu {figures['on_cpu_median_ms']:.2f} ms)"
    )
    print(f"overhead of medians           {figures['median_overhead'] * 100:+.1f} %   (target <= 10 %)")
    print(f"median per-turn overhead      {figures['paired_overhead_median'] * 100:+.1f} %")
    print(f"spans exported (JSONL)        {spans}")
    return figures


async def main_async(args: argparse.Namespace) -> None:
    dirs = private_home()
    if args.compare:
        from benchmarks._compare import compare

        with scripted_server() as base_url:
            write_config(dirs.home, base_url)
            table = await compare(dirs, base_url, args.turns)
        if args.json:
            Path(args.json).write_text(json.dumps(table, indent=2), encoding="utf-8")
        return
    if args.telemetry == "compare":
        with scripted_server() as base_url:
            compared = await compare_telemetry(dirs, base_url, args.turns)
        if args.json:
            Path(args.json).write_text(json.dumps(compared, indent=2), encoding="utf-8")
        return
    profiler = None
    if args.profile:
        from pyinstrument import Profiler

        profiler = Profiler(async_mode="disabled", interval=0.0005)
    with scripted_server() as base_url:
        extra = _telemetry_config(dirs.home) if args.telemetry == "jsonl" else ""
        write_config(dirs.home, base_url, extra=extra)
        runtime, floor = await interleaved(dirs, base_url, args.turns, profiler, args.beside_writes_ms)
    if profiler is not None:
        Path(args.profile).write_text(profiler.output_html(), encoding="utf-8")
        Path(args.profile).with_suffix(".txt").write_text(
            profiler.output_text(unicode=False, color=False, show_all=False), encoding="utf-8"
        )
    figures: dict[str, Any] = {**report(runtime, floor), "telemetry": args.telemetry}
    if args.telemetry != "off":
        spans = (dirs.home / "traces.jsonl").read_text(encoding="utf-8").count("\n")
        print(f"telemetry                     {args.telemetry}: {spans} spans exported")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument(
        "--profile", help="pyinstrument profile of the runtime turns: writes PATH (html) and .txt"
    )
    parser.add_argument("--json", help="also write the figures as JSON here")
    parser.add_argument(
        "--telemetry",
        choices=("off", "jsonl", "compare"),
        default="off",
        help="OpenTelemetry spans of every run (JSONL exporter in the private home)",
    )
    parser.add_argument(
        "--beside-writes-ms",
        type=float,
        default=0,
        help="a second process commits to the same database every N ms while the session runs (issue 40)",
    )
    parser.add_argument(
        "--compare",
        action="store_true",
        help="also run the peers (OpenAI Agents SDK, pydantic-ai; the bench extra) and print the table",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
