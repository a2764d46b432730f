"""The Task WAL table shared by processes: conditional appends, a step claimed exactly once cluster-wide."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from agent_core._storage.postgres.task_wal import PgTaskWal, WalConflictError
from agent_core._tasks.dag import Actor
from agent_core._tasks.decide import decide_claim
from tests.conformance.task_wal_support import T0, create_records
from tests.fixtures.postgres_server import DSN_ENV

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
SID = "sess_claims"


def test_a_stale_append_is_refused_and_writes_nothing(postgres_dsn: str, tmp_path: Path) -> None:
    path = tmp_path / SID / "t.wal.jsonl"
    a, b = PgTaskWal(dsn_env=DSN_ENV), PgTaskWal(dsn_env=DSN_ENV)
    try:
        a.create(path, create_records(SID, path, steps=2))
        dag_a = a.replay(path, session_id=SID, repair=False).dag
        dag_b = b.replay(path, session_id=SID, repair=False).dag
        a.append(
            path,
            decide_claim(
                dag_a, "s0000", actor=Actor(agent_id="agent_a", run_id="run_a"), now=T0, lease_ms=1000
            ),
        )
        stale = decide_claim(
            dag_b, "s0000", actor=Actor(agent_id="agent_b", run_id="run_b"), now=T0, lease_ms=1000
        )
        with pytest.raises(WalConflictError) as info:
            b.append(path, stale)
        assert info.value.details["conflict"] is True
        for record in b.records_after(path, dag_b.last_wal_seq):
            dag_b.apply(record)
        step = dag_b.step("s0000")
        assert step is not None and step.claimed_by_run_id == "run_a"
        claims = [e for e in a.read_timeline(path) if e["event_type"] == "task_step_claimed"]
        assert len(claims) == 1
    finally:
        a.close()
        b.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_sixteen_processes_race_for_a_thousand_steps_and_each_is_claimed_once(
    postgres_dsn: str, tmp_path: Path
) -> None:
    """16 processes x 1,000 claim attempts: 50 Tasks of 20 ready steps, every process tries every step."""
    procs, tasks, steps = 16, 50, 20
    session_dir = tmp_path / SID
    paths = [session_dir / f"t{t}.wal.jsonl" for t in range(tasks)]
    wal = PgTaskWal(dsn_env=DSN_ENV)
    try:
        for t, path in enumerate(paths):
            wal.create(path, create_records(SID, path, steps=steps, task_id=f"task-{t}"))
        children = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tests.postgres.claim_child",
                SID,
                str(session_dir),
                str(tasks),
                str(steps),
                str(k),
                cwd=ROOT,
                env=dict(os.environ),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            for k in range(procs)
        ]
        won = attempts = 0
        for child in children:
            out, err = await child.communicate()
            assert child.returncode == 0, err.decode()
            _, w, _, a = out.decode().split()
            won, attempts = won + int(w), attempts + int(a)
        assert won == tasks * steps, f"{won} claims won for {tasks * steps} steps"
        assert attempts >= won
        winners: set[str] = set()
        for path in paths:
            outcome = wal.replay(path, session_id=SID, repair=False)  # validates transitions and wal_seq
            claimed = Counter(
                e["step_id"] for e in wal.read_timeline(path) if e["event_type"] == "task_step_claimed"
            )
            assert len(claimed) == steps and set(claimed.values()) == {1}, (
                f"a step of {path.name} claimed twice"
            )
            winners |= {str(s.claimed_by_agent_id) for s in outcome.dag.steps()}
        assert len(winners) > 1, "the processes did race"
    finally:
        wal.close()
