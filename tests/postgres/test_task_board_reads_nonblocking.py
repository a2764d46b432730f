"""Task board reads on postgres do not block the event loop: while a read of a terminal Task
(``task_get`` → the WAL search and its read-only replay, ``task_list`` with terminal Tasks, the inspect
views of ``replay_session``) waits for the server, other coroutines keep running; the read then answers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.task_harness import TaskHarness, create, step
from tests.postgres._nonblocking import pg_task_harness, waits_without_blocking

pytestmark = pytest.mark.postgres


async def _task_get(h: TaskHarness) -> Any:
    return await h.ok(h.orchestrator(), "agent.task_get", task_id="t1")


async def _task_list(h: TaskHarness) -> Any:
    return await h.ok(h.orchestrator(), "agent.task_list", include_terminal=True)


async def _inspect(h: TaskHarness) -> Any:
    return await h.service.inspect_views()


READS: dict[str, Callable[[TaskHarness], Awaitable[Any]]] = {
    "task_get": _task_get,
    "task_list": _task_list,
    "inspect_views": _inspect,
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("read", sorted(READS))
async def test_a_board_read_waiting_for_the_server_leaves_the_event_loop_free(
    postgres_dsn: str, tmp_path: Path, read: str
) -> None:
    harness = pg_task_harness(tmp_path, f"sess_reads_{read}")
    await create(harness, step("a"))
    await harness.ok(harness.orchestrator(), "agent.task_cancel", task_id="t1", reason="done with it")
    harness.restart()  # a new process: the terminal Task is known only from its WAL rows
    await harness.service.load()
    result = await waits_without_blocking(postgres_dsn, lambda: READS[read](harness), "board read")
    if read == "task_get":
        assert result["status"] == "cancelled" and result["read_only"] is True
    elif read == "task_list":
        assert [(t["task_id"], t["status"]) for t in result["tasks"]] == [("t1", "cancelled")]
    else:
        assert [(v.task_id, v.status) for v in result] == [("t1", "cancelled")]
    harness.writer.close()  # type: ignore[attr-defined]
