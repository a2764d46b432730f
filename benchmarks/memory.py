"""Target 4 — memory: RSS of a runtime after a 1,000-turn session vs after 10 turns.

One session of ``--turns`` turns (the turn benchmark's shape: user → ``code.read_file`` → tool result →
answer) against the scripted OpenAI server in its own process. Prints this process's resident set size
after turn 10 and after the last turn (after a ``gc.collect()``), their ratio (target ≤ 1.5×) and the
SQLite file size.

Run: ``.venv/bin/python -m benchmarks.memory [--turns 1000]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
from pathlib import Path

from benchmarks._common import private_home, rss_mb, scripted_server, turn_message, write_config


async def main_async(args: argparse.Namespace) -> dict[str, float]:
    from agent_core import AgentRuntime, RunStatus

    dirs = private_home()
    marks: dict[int, float] = {}
    with scripted_server() as base_url:
        write_config(dirs.home, base_url)
        async with AgentRuntime(project_dir=dirs.project) as runtime:
            session_id: str | None = None
            for i in range(1, args.turns + 1):
                run = await runtime.start(turn_message(i), session_id=session_id)
                async for _event in run.events():
                    pass
                if run.status != RunStatus.completed:
                    raise RuntimeError(f"turn {i} ended {run.status}: {run.error}")
                session_id = run.session_id
                if i in (10, args.turns) or i % 250 == 0:
                    gc.collect()
                    marks[i] = rss_mb()
    db = dirs.home / "sessions.sqlite"
    figures = {
        "turns": args.turns,
        "rss_after_10_mb": marks[10],
        "rss_after_last_mb": marks[args.turns],
        "ratio": marks[args.turns] / marks[10],
        "db_mb": db.stat().st_size / 2**20 if db.exists() else 0.0,
    }
    for turn, value in sorted(marks.items()):
        print(f"RSS after turn {turn:5d}   {value:7.1f} MiB")
    print(f"ratio last/10              {figures['ratio']:.2f}x   (target <= 1.5x)")
    print(f"sessions.sqlite            {figures['db_mb']:.1f} MiB")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--json", help="also write the figures as JSON here")
    args = parser.parse_args()
    figures = asyncio.run(main_async(args))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
