"""Prefix reuse: how much of each model request a provider's prompt cache can reuse (issue 33).

``python -m benchmarks.prefix_reuse [--turns 30] [--file-lines 1] [--json out.json] [--skip-peers]``

One scripted OpenAI Chat Completions server in this process (``benchmarks/_cache_scenarios.py``) keeps
every request body; each harness runs one growing session of ``--turns`` tool-using user turns (user →
the model calls a tool → the result → the model answers):

* ours (soong-agent, normal mode, ``runtime.start`` per turn);
* the OpenAI Agents SDK and pydantic-ai (the ``bench`` extra; ``benchmarks/_peers.py``), same turns;
* ours in orchestrator mode: the model creates a Task at the first turn and updates it at every later
  turn (the task board changes every turn);
* ours with memory on: the model reads ``AGENTS.md`` (an instruction file) at turn 10 and recalls a
  memory at turn 20.

``benchmarks/_prefix.py`` reduces each body to its prompt (tools, then messages) and gives the cacheable
fraction (the common prefix with the previous request, summed over the requests after the first, over
their summed sizes), the reuse of the previous request at each new user turn (median / min) and the last
request's size. Then the plain session against the scripted Anthropic server with the kit's prompt-cache
emulation (``AnthropicPromptCache``, 1024-token minimum): the share of input tokens read from the cache
and the input cost with the cache (writes 1.25x, reads 0.1x) and without it (every token at the input
price), at $3 per million input tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from benchmarks._cache_scenarios import ScenarioServer, anthropic_answer, seed_recall, turn_message
from benchmarks._common import API_KEY_ENV, BenchDirs, private_home
from benchmarks._prefix import Reuse, measure

INPUT_PRICE = 3.0
"""USD per million input tokens for the Anthropic cost figures."""


def config_text(provider: str, base_url: str, *, memory: bool = False, prices: bool = False) -> str:
    price = f"price_input_per_mtok = {INPUT_PRICE}\nprice_output_per_mtok = 15.0\n" if prices else ""
    return f"""
[model]
provider = "{provider}"
base_url = "{base_url}"
api_key_env = "{API_KEY_ENV}"
name = "bench-model"
context_window = 1000000
max_output_tokens = 1024
temperature = 0.0
timeout_ms = 60000
{price}
[model.retry]
max_attempts = 1

[context]
reserve_output_tokens = 1024

[compact]
enabled = false

[memory]
enabled = {"true" if memory else "false"}

[[agents.worker_pools]]
pool_id = "default"

[[agents.worker_pools.workers]]
worker_id = "worker_general_1"
agent_definition_id = "default_worker_agent"
"""


async def ours(dirs: BenchDirs, turns: int, scenario: str = "plain") -> str:
    """One session of ``turns`` turns; returns its session id."""
    from agent_core import AgentRuntime, RunStatus

    mode = "orchestrator" if scenario == "orchestrator" else "normal"
    session_id: str | None = None
    async with AgentRuntime(project_dir=dirs.project, home_dir=dirs.home) as rt:
        for i in range(turns):
            run = await rt.start(turn_message(i, scenario), session_id=session_id, mode=mode)
            async for _event in run.events():
                pass
            if run.status != RunStatus.completed:
                raise RuntimeError(f"{scenario} turn {i} ended {run.status}: {run.error}")
            session_id = run.session_id
    assert session_id is not None
    return session_id


def row(name: str, reuse: Reuse) -> dict[str, Any]:
    return {
        "harness": name,
        "requests": reuse.requests,
        "cacheable": reuse.cacheable,
        "cacheable_all": reuse.cacheable_all,
        "lost_chars": reuse.lost,
        "turn_median": reuse.turn_median,
        "turn_min": reuse.turn_min,
        "last_chars": reuse.last_chars,
        "breaks": len(reuse.breaks),
    }


def print_table(rows: list[dict[str, Any]], turns: int) -> None:
    print(f"\none run, {turns} tool-using user turns per session, one scripted OpenAI-protocol server")
    print(
        "| harness | cacheable fraction (with the first request) | reuse at a new user turn (median / min) "
        "| previous-request chars not reused | last request | requests |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['harness']} | {r['cacheable']:.3f} ({r['cacheable_all']:.3f}) |"
            f" {r['turn_median']:.2f} / {r['turn_min']:.2f} | {r['lost_chars']:,} |"
            f" {r['last_chars'] / 1000:.1f}k chars | {r['requests']} |"
        )


async def openai_protocol(args: argparse.Namespace) -> list[dict[str, Any]]:
    from benchmarks._peers import make_peers

    server = ScenarioServer().start()
    rows: list[dict[str, Any]] = []
    try:
        for scenario, name in (
            ("plain", "ours (soong-agent)"),
            ("orchestrator", "ours, orchestrator: a Task update every turn"),
            ("recall", "ours, AGENTS.md loaded at turn 10, memory recalled at turn 20"),
        ):
            dirs = private_home(f"soong-prefix-{scenario}-")
            write_notes(dirs.project, args.file_lines)
            if scenario == "recall":
                seed_recall(dirs.home, dirs.project)
            (dirs.home / "config.toml").write_text(
                config_text("openai", server.base_url, memory=scenario == "recall"), encoding="utf-8"
            )
            await ours(dirs, args.turns, scenario)
            rows.append(row(name, measure(server.take())))
            if scenario != "plain" or args.skip_peers:
                continue
            peers, missing = make_peers(server.base_url, dirs.project, dirs.root)
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
    return rows


def write_notes(project: Path, lines: int) -> None:
    """The files the turns read: a title line and ``lines`` lines of text each."""
    for path in (project / "notes").glob("file_*.txt"):
        k = path.stem.split("_")[1]
        text = f"File {k}.\n" + "lorem ipsum dolor sit amet, consectetur adipiscing elit\n" * lines
        path.write_text(text, encoding="utf-8")


async def anthropic_emulation(turns: int, file_lines: int) -> dict[str, Any]:
    from agent_core import AgentRuntime
    from agent_core.testing import AnthropicPromptCache, ScriptedAnthropicServer

    cache = AnthropicPromptCache()
    server = ScriptedAnthropicServer(prompt_cache=cache)
    server.handler(anthropic_answer)
    server.start()
    try:
        dirs = private_home("soong-prefix-anthropic-")
        write_notes(dirs.project, file_lines)
        (dirs.home / "config.toml").write_text(
            config_text("anthropic", server.base_url, prices=True), encoding="utf-8"
        )
        session_id = await ours(dirs, turns)
        async with AgentRuntime(project_dir=dirs.project, home_dir=dirs.home) as rt:
            usage = (await rt.replay_session(session_id)).usage
    finally:
        server.stop()
    totals = cache.totals
    assert usage is not None and usage.input_tokens == totals.input_tokens
    with_cache = (
        totals.uncached_tokens * INPUT_PRICE
        + totals.cache_read_tokens * INPUT_PRICE * 0.1
        + totals.cache_write_tokens * INPUT_PRICE * 1.25
    ) / 1e6
    without = totals.input_tokens * INPUT_PRICE / 1e6
    figures = {
        "requests": totals.requests,
        "input_tokens": totals.input_tokens,
        "cache_read_tokens": totals.cache_read_tokens,
        "cache_write_tokens": totals.cache_write_tokens,
        "uncached_tokens": totals.uncached_tokens,
        "read_share": totals.read_share,
        "input_cost_with_cache_usd": with_cache,
        "input_cost_without_cache_usd": without,
        "run_cost_usd": usage.cost_usd,
    }
    print(f"\nAnthropic emulation, {turns} turns, {totals.requests} requests (input at ${INPUT_PRICE}/M):")
    print(
        f"input {totals.input_tokens:,} tokens: cache read {totals.cache_read_tokens:,} "
        f"({totals.read_share:.1%}), cache write {totals.cache_write_tokens:,}, uncached {totals.uncached_tokens:,}"
    )
    print(
        f"input cost with the cache ${with_cache:.4f}, without ${without:.4f} "
        f"({with_cache / without:.1%}); the runs' cost_usd (input and output) ${usage.cost_usd:.4f}"
    )
    return figures


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rows = await openai_protocol(args)
    print_table(rows, args.turns)
    try:
        anthropic: dict[str, Any] | None = await anthropic_emulation(args.turns, args.file_lines)
    except ImportError as exc:  # a tree from before the kit's emulation (--baseline runs)
        print(f"\nAnthropic emulation not measured: {exc}")
        anthropic = None
    return {"turns": args.turns, "file_lines": args.file_lines, "rows": rows, "anthropic": anthropic}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--json", help="also write the figures as JSON here")
    parser.add_argument("--skip-peers", action="store_true", help="measure ours only")
    parser.add_argument(
        "--file-lines",
        type=int,
        default=1,
        help="lines of text in each file the turns read (1: the workload of issue 33's table, the peers' "
        "last request ~13k characters; 6: the other benchmarks' files)",
    )
    args = parser.parse_args()
    figures = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
