"""Load (issue 10 item 5): many concurrent tool-using sessions on one runtime.

Every event a run persisted is delivered live exactly once and equals what replay returns (no lost or
duplicated event); each session's seqs are 1..n and each run's ``run_seq`` is 1..n; no run fails and nothing
logs ``database is locked``; the runtime keeps no finished run and its memory stays bounded (the second half of
the turns adds far less RSS than the first half).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentRuntime, PermissionDecision, PermissionRequest, RunHandle, RunStatus
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.fixtures.runtime import collect, open_runtime
from tests.reliability.invariants import pairing_problems, seq_problems

CONFIG = {"model": {"context_window": 200_000}, "compact": {"enabled": False}}


def rss_bytes() -> int:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * 4096


async def allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


@dataclass
class Load:
    sessions: int
    turns: int
    runs: list[RunHandle] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    """Runs whose live persisted events differ from their replay (lost, duplicated or reordered)."""
    requests: int = 0
    events_checked: int = 0
    fake: FakeProvider | None = None

    def attach(self, fake: FakeProvider) -> FakeProvider:
        self.fake = fake.route(self.route)
        return fake

    def route(self, request: ModelRequest) -> Turn:
        self.requests += 1
        self.unpaired += pairing_problems(request)
        if self.fake is not None:
            self.fake.requests.clear()  # checked here; the fake's log must not count as runtime memory
        last = request.messages[-1]
        if last.role == "user" and not any(b.type == "tool_result" for b in last.content):
            n = self.requests
            picks: list[tuple[str, dict[str, Any]]] = [
                ("code.read_file", {"path": "shared.txt"}),
                (
                    "code.write_file",
                    {"path": f"out/{n % 50}.txt", "content": f"turn {n}\n", "overwrite": True},
                ),
                ("code.list_dir", {"path": "."}),
            ]
            return tool_calls(picks[n % 3], lead_text="Working.")
        return text("Done with this turn.", chunks=4)


async def drive(rt: AgentRuntime, load: Load, turns: range, sessions: list[str | None], index: int) -> None:
    for turn in turns:
        run = await rt.start(f"session {index} turn {turn}", session_id=sessions[index])
        sessions[index] = run.session_id
        live = await collect(run, debug=True, timeout=300)
        delivered = [e.event_id for e in live if e.seq is not None]
        persisted = [e.event_id for e in (await rt.replay_run(run.run_id)).events]
        if delivered != persisted:
            load.mismatched.append(run.run_id)
        load.events_checked += len(persisted)
        load.runs.append(run)  # the handle only: the events are not kept, so RSS reflects the runtime


async def run_load(
    soong_env: SoongEnv, n_sessions: int, n_turns: int, caplog: pytest.LogCaptureFixture
) -> dict[str, Any]:
    soong_env.write_project("shared.txt", "shared content\n" * 20)
    load = Load(n_sessions, n_turns)
    fake = load.attach(FakeProvider(strict=False))
    sessions: list[str | None] = [None] * n_sessions
    half = n_turns // 2
    caplog.set_level(logging.WARNING, logger="agent_core")
    started = time.monotonic()
    async with open_runtime(soong_env, fake, config=CONFIG, permission_callback=allow) as rt:
        rss_start = rss_bytes()
        await asyncio.gather(*(drive(rt, load, range(0, half), sessions, i) for i in range(n_sessions)))
        rss_half = rss_bytes()
        await asyncio.gather(*(drive(rt, load, range(half, n_turns), sessions, i) for i in range(n_sessions)))
        rss_end = rss_bytes()
        elapsed = time.monotonic() - started
        manager = rt._manager
        assert manager is not None
        assert manager.runs == {}, "finished runs are still held by the runtime"
        failed = [(r.run_id, r.status, r.error) for r in load.runs if r.status != RunStatus.completed]
        assert failed == []
        assert len(load.runs) == n_sessions * n_turns
        assert load.mismatched == []
        seq_issues: list[str] = []
        for session_id in set(sessions):
            assert session_id is not None
            replay = await rt.replay_session(session_id)
            assert len(replay.runs) == n_turns
            seq_issues += seq_problems(replay.events)
        assert seq_issues == []
    assert load.unpaired == []
    assert "database is locked" not in caplog.text.lower()
    first_half_growth = max(rss_half - rss_start, 1)
    figures = {
        "sessions": n_sessions,
        "turns_per_session": n_turns,
        "runs": len(load.runs),
        "model_requests": load.requests,
        "events_checked": load.events_checked,
        "seconds": round(elapsed, 1),
        "rss_start_mb": round(rss_start / 2**20, 1),
        "rss_growth_first_half_mb": round((rss_half - rss_start) / 2**20, 1),
        "rss_growth_second_half_mb": round((rss_end - rss_half) / 2**20, 1),
    }
    print(json.dumps(figures))
    assert rss_end - rss_half <= max(first_half_growth, 32 * 2**20), figures
    return figures


async def test_load_10_sessions_x_5_turns(soong_env: SoongEnv, caplog: pytest.LogCaptureFixture) -> None:
    await run_load(soong_env, 10, 5, caplog)


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_load_50_sessions_x_20_turns(soong_env: SoongEnv, caplog: pytest.LogCaptureFixture) -> None:
    await run_load(soong_env, 50, 20, caplog)
