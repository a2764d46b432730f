"""Task WAL calls on postgres do not block the event loop: while a claim waits for the server, other
coroutines keep running; the claim then commits exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.task_harness import claim, create, step
from tests.postgres._nonblocking import pg_task_harness, waits_without_blocking

pytestmark = pytest.mark.postgres


@pytest.mark.timeout(120)
async def test_a_claim_waiting_for_the_server_leaves_the_event_loop_free(
    postgres_dsn: str, tmp_path: Path
) -> None:
    harness = pg_task_harness(tmp_path, "sess_nonblock")
    await create(harness, step("a"), step("b"))
    await waits_without_blocking(postgres_dsn, lambda: claim(harness, "a", name="w1"), "Task WAL claim")
    timeline = harness.writer.read_timeline(harness.wal())
    claims = [e["step_id"] for e in timeline if e["event_type"] == "task_step_claimed"]
    assert claims == ["a"], "claimed exactly once"
    assert [e["wal_seq"] for e in timeline] == list(range(1, len(timeline) + 1))
    harness.writer.close()  # type: ignore[attr-defined]
