"""Prefix reuse: how much of each model request a provider's prompt cache can reuse (issue 33).

``python -m benchmarks.prefix_reuse [--turns 30] [--json out.json]``

One scripted OpenAI Chat Completions server (in this process, every request body kept) answers every
harness: a user turn asks to read a file, the model calls the read tool, the tool result comes back and the
model answers. Each harness keeps one growing session of ``--turns`` user turns:

* ours (soong-agent, normal mode) — ``runtime.start`` per turn on one session;
* the OpenAI Agents SDK and pydantic-ai (the ``bench`` extra; ``benchmarks/_peers.py``);
* ours in orchestrator mode, the model creating a Task at turn 3 and updating a step every turn after it;
* ours in normal mode with an instruction file (``AGENTS.md``) loaded and a memory recalled mid-way.

For each, ``benchmarks/_prefix.py`` reduces every kept body to its prompt (tools, then messages) and
prints the cacheable fraction, the reuse at a new user turn (median / min) and the last request's size.
Then the same 30-turn session against the scripted Anthropic server with its prompt-cache emulation
(``ScriptedAnthropicServer(prompt_cache=...)``): the share of input tokens read from cache and the input
cost with and without caching (Anthropic's multipliers: writes 1.25x, reads 0.1x the input price).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from tests.fixtures.scripted_servers import Response, ScriptedRequest

from benchmarks._common import BenchDirs, private_home, turn_message, write_config
from benchmarks._prefix import Reuse, measure
from benchmarks._server import BenchServer


class KeepingServer(BenchServer):
    """The benchmark model, keeping every model request body (``bodies``; ``clear()`` between harnesses)."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self._keep = threading.Lock()

    def answer(self, request: ScriptedRequest) -> Response:
        with self._keep:
            self.bodies.append(request.json)
        return super().answer(request)

    def take(self) -> list[dict[str, Any]]:
        with self._keep:
            bodies, self.bodies = self.bodies, []
        return bodies


async def ours(dirs: BenchDirs, turns: int) -> None:
    from agent_core import AgentRuntime, RunStatus

    session_id: str | None = None
    async with AgentRuntime(project_dir=dirs.project) as rt:
        for i in range(turns):
            run = await rt.start(turn_message(i), session_id=session_id)
            async for _event in run.events():
                pass
            if run.status != RunStatus.completed:
                raise RuntimeError(f"turn {i} ended {run.status}: {run.error}")
            session_id = run.session_id


def row(name: str, reuse: Reuse) -> dict[str, Any]:
    return {
        "harness": name,
        "requests": reuse.requests,
        "cacheable": reuse.cacheable,
        "turn_median": reuse.turn_median,
        "turn_min": reuse.turn_min,
        "last_chars": reuse.last_chars,
        "breaks": len(reuse.breaks),
    }


def print_table(rows: list[dict[str, Any]], turns: int) -> None:
    print(f"one run, {turns} tool-using user turns per harness, one scripted OpenAI-protocol server")
    print(
        "| harness | cacheable fraction | reuse at a new user turn (median / min) | last request | requests |"
    )
    print("|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['harness']} | {r['cacheable']:.3f} | {r['turn_median']:.2f} / {r['turn_min']:.2f} |"
            f" {r['last_chars'] / 1000:.1f}k chars | {r['requests']} |"
        )


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks._peers import make_peers

    dirs = private_home("soong-prefix-")
    server = KeepingServer().start()
    rows: list[dict[str, Any]] = []
    try:
        base_url = server.base_url
        write_config(dirs.home, base_url)
        await ours(dirs, args.turns)
        rows.append(row("ours (soong-agent)", measure(server.take())))
        peers, missing = make_peers(base_url, dirs.project, dirs.root)
        try:
            for peer in peers:
                for i in range(args.turns):
                    await peer.turn(turn_message(i))
                rows.append(row(peer.name, measure(server.take())))
        finally:
            for peer in peers:
                await peer.close()
        for note in missing:
            print(f"not measured: {note}")
    finally:
        server.stop()
    print_table(rows, args.turns)
    return {"turns": args.turns, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--json", help="also write the figures as JSON here")
    args = parser.parse_args()
    figures = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
