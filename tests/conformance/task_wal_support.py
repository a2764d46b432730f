"""Task WAL builders shared by the conformance suite and the cross-process claim test."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from agent_core._tasks.dag import Actor
from agent_core._tasks.decide import decide_create
from agent_core._tasks.inputs import StepInput
from agent_core._tasks.models import TaskWalEvent
from agent_core._tasks.wal import WalWriter

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
ORCHESTRATOR = Actor(agent_id="agent_orch", run_id="run_orch")


def create_records(session_id: str, path: Path, steps: int, task_id: str = "task-one") -> list[TaskWalEvent]:
    """``task_created`` with ``steps`` independent steps, then their ``task_step_ready`` and ``task_running``."""
    return decide_create(
        session_id=session_id,
        task_id=task_id,
        wal_path=str(path),
        title="conformance",
        summary="a task for the conformance suite",
        steps=[
            StepInput(step_id=f"s{k:04d}", title=f"step {k}", summary="do it", depends_on_step_ids=[])
            for k in range(steps)
        ],
        actor=ORCHESTRATOR,
        now=T0,
        pool_ok=lambda pool: True,
    )


def make_pg_wal(dsn_env: str) -> WalWriter:
    from agent_core._storage.postgres.task_wal import PgTaskWal

    return PgTaskWal(dsn_env=dsn_env)
