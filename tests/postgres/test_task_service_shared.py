"""The Task service of two processes on one postgres Task WAL table: each catches up with the other's
records under its Task lock, so a step claimed in one process is not claimed again in the other."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_core._storage.postgres.task_wal import PgTaskWal
from agent_core.errors import ErrorCode
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.task_harness import ManualClock, TaskHarness, claim, create, step

pytestmark = pytest.mark.postgres


async def test_a_step_claimed_in_one_process_is_seen_claimed_in_the_other(
    postgres_dsn: str, tmp_path: Path
) -> None:
    project = tmp_path.resolve()
    one = TaskHarness(
        project=project, session_id="sess_two_procs", clock=ManualClock(), writer=PgTaskWal(dsn_env=DSN_ENV)
    )
    two = TaskHarness(
        project=project, session_id="sess_two_procs", clock=ManualClock(), writer=PgTaskWal(dsn_env=DSN_ENV)
    )
    await create(one, step("a"), step("b"))
    views = await two.service.load()  # the second process restores the Task from the table
    assert [v.task_id for v in views] == ["t1"]
    await claim(one, "a", name="w1")
    late = two.worker("t1", name="w2")
    exc = await two.err(late, "agent.task_claim_step", task_id="t1", step_id="a")
    assert exc.code == ErrorCode.step_already_claimed  # decided on the caught-up DAG
    await claim(two, "b", name="w3")
    timeline = one.writer.read_timeline(one.wal())
    claims = [(e["step_id"], e["actor_agent_id"]) for e in timeline if e["event_type"] == "task_step_claimed"]
    assert claims == [("a", "agent_w1"), ("b", "agent_w3")]
    assert [e["wal_seq"] for e in timeline] == list(range(1, len(timeline) + 1))
    one.writer.close()  # type: ignore[attr-defined]
    two.writer.close()  # type: ignore[attr-defined]
