"""Target 5 — streaming: 100,000 one-character text deltas through the runtime to a consumer.

One run: the scripted OpenAI server (own process) answers the tool result with ``--deltas`` SSE chunks of
one character each. The run's stream is consumed twice in separate runs: by a fast consumer (``events()``
as fast as possible) and by a slow one (``--slow-ms`` of sleep per delivered event). Prints the deltas per
second from ``model_started`` of the streaming call to the end of the run, how many ``message_delta``
events reached the consumer (coalescing merges undelivered deltas), checks that the concatenated text is
exactly the model's text, and samples the channel's queue length and the process RSS every 20 ms to show
that memory stays bounded while the consumer lags.

Run: ``.venv/bin/python -m benchmarks.streaming [--deltas 100000] [--slow-ms 5]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

from benchmarks._common import BenchDirs, private_home, rss_mb, scripted_server, turn_message, write_config


async def one_run(dirs: BenchDirs, deltas: int, slow_s: float) -> dict[str, Any]:
    from agent_core import AgentRuntime, RunStatus
    from agent_core.types.enums import EventType
    from agent_core.types.events import MessageDelta

    async with AgentRuntime(project_dir=dirs.project) as runtime:
        run = await runtime.start(turn_message(0))
        channel = run._state.channel  # sampled read-only: queue length under backpressure
        peak = {"queue": 0, "rss_mb": rss_mb()}
        base_rss = peak["rss_mb"]

        async def sample() -> None:
            while True:
                peak["queue"] = max(peak["queue"], len(channel._buffer))
                peak["rss_mb"] = max(peak["rss_mb"], rss_mb())
                await asyncio.sleep(0.02)

        sampler = asyncio.create_task(sample())
        text: list[str] = []
        delivered = 0
        started: float | None = None
        turn = 0
        async for event in run.events(debug=True):
            if event.event_type == EventType.model_started:
                turn += 1
                if turn == 2:
                    started = time.perf_counter()
            elif turn == 2 and isinstance(payload := event.payload, MessageDelta):
                text.append(payload.text)  # the typed payload, as a consumer reads it
                delivered += 1
            if slow_s and turn == 2:
                await asyncio.sleep(slow_s)
        ended = time.perf_counter()
        sampler.cancel()
        if run.status != RunStatus.completed or started is None:
            raise RuntimeError(f"run ended {run.status}: {run.error}")
        joined = "".join(text)
        if joined != "x" * deltas:
            raise AssertionError(f"delivered text differs: {len(joined)} characters, expected {deltas}")
    seconds = ended - started
    return {
        "deltas": deltas,
        "seconds": seconds,
        "deltas_per_s": deltas / seconds,
        "message_delta_events_delivered": delivered,
        "peak_queue": peak["queue"],
        "rss_growth_mb": peak["rss_mb"] - base_rss,
    }


def show(label: str, figures: dict[str, Any]) -> None:
    print(
        f"{label:<22} {figures['deltas']} deltas in {figures['seconds']:.2f} s = "
        f"{figures['deltas_per_s']:,.0f} deltas/s; {figures['message_delta_events_delivered']} message_delta "
        f"events delivered; peak queue {figures['peak_queue']}; RSS growth {figures['rss_growth_mb']:.1f} MiB"
    )


async def main_async(args: argparse.Namespace) -> None:
    dirs = private_home()
    with scripted_server("--text-deltas", str(args.deltas)) as base_url:
        write_config(dirs.home, base_url)
        fast = await one_run(dirs, args.deltas, 0.0)
        show("fast consumer", fast)
        slow = await one_run(dirs, args.deltas, args.slow_ms / 1000)
        show(f"slow consumer ({args.slow_ms} ms/ev)", slow)
    print(
        "text check                 the delivered deltas concatenate to exactly the model's text (both runs)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps({"fast": fast, "slow": slow}, indent=2), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=100_000)
    parser.add_argument("--slow-ms", type=float, default=5.0)
    parser.add_argument("--json", help="also write the figures as JSON here")
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
