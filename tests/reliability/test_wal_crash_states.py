"""Task WAL states a SIGKILL can leave behind, built deterministically (issue 10 item 1,
docs/task-board.md#restore-and-replay).

A create is ``open(O_CREAT|O_EXCL)`` followed by one write of the first commit: a kill in between leaves an
empty file, a kill inside the write a single unterminated line. Neither holds a committed record, so the
restore treats both as a create that never happened (the file goes away and the name is free again), while
a torn final line after committed records is truncated and the Task restored from the complete lines.
"""

from __future__ import annotations

import json
from typing import Any

from agent_core import RunStatus
from agent_core.types.enums import EventType
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.fixtures.orchestrator import result_for
from tests.fixtures.runtime import collect, open_runtime

STEPS = [
    {"step_id": "s1", "title": "One", "summary": "Do one", "depends_on_step_ids": []},
    {"step_id": "s2", "title": "Two", "summary": "Do two", "depends_on_step_ids": ["s1"]},
]


def create(task_id: str, wal_name: str) -> tuple[str, dict[str, Any], str]:
    args = {"task_id": task_id, "wal_name": wal_name, "title": task_id, "summary": "work", "steps": STEPS}
    return ("agent.task_create", args, f"call_{task_id}")


class Script:
    """Orchestrator turns: the queued tool calls, one turn each, then a closing text."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest) -> Turn:
        self.requests.append(request)
        return self.turns.pop(0) if self.turns else text("ok")


def outcome(requests: list[ModelRequest], call_id: str) -> str | None:
    """``None`` for a successful result of ``call_id``, else its error code."""
    block = result_for(requests, call_id)
    return block.error.code.value if block.is_error and block.error else None


async def test_wal_states_left_by_a_kill_resume_cleanly(soong_env: SoongEnv) -> None:
    script = Script()
    fake = FakeProvider(strict=False).route(script)
    script.turns = [tool_calls(create("real", "real"))]
    config = {"model": {"context_window": 200_000}, "compact": {"enabled": False}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        first = await rt.start("plan", mode="orchestrator")
        await collect(first)
    assert first.status == RunStatus.completed, first.error
    session_dir = soong_env.project / ".soong-agent" / "tasks" / first.session_id
    real = session_dir / "real.wal.jsonl"
    committed = real.read_bytes()
    last_line = committed.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    with real.open("ab") as fh:  # a torn append after the committed records
        fh.write(last_line[: len(last_line) // 2])
    (session_dir / "empty.wal.jsonl").write_bytes(b"")  # killed between create and write
    torn_create = json.dumps({"wal_seq": 1, "session_id": first.session_id, "event_type": "task_created"})
    (session_dir / "torn.wal.jsonl").write_bytes(torn_create.encode()[:40])  # killed inside the first write

    script.turns = [tool_calls(create("again", "empty")), tool_calls(create("more", "torn"))]
    async with open_runtime(soong_env, fake, write_config=False) as rt:
        before = await rt.replay_session(first.session_id)
        assert [v.task_id for v in before.tasks if v.error is None] == ["real"]
        run = await rt.start("continue", session_id=first.session_id, mode="orchestrator")
        await collect(run)
        after = await rt.replay_session(first.session_id)
    assert run.status == RunStatus.completed, run.error
    assert real.read_bytes() == committed
    failed = [e for e in after.events if e.event_type == EventType.task_wal_failed]
    assert failed == [], [e.data for e in failed]
    [replayed] = [e for e in after.events if e.event_type == EventType.task_wal_replayed]
    assert replayed.data["torn_tail_truncated"] is True and replayed.data["task_id"] == "real"
    # both names are free again: the model's retries of the cut creates succeed
    assert outcome(script.requests, "call_again") is None and outcome(script.requests, "call_more") is None
    views = {v.task_id: v for v in after.tasks}
    assert set(views) == {"real", "again", "more"} and all(v.error is None for v in views.values())
    assert sorted(p.name for p in session_dir.iterdir()) == [
        "empty.wal.jsonl",
        "real.wal.jsonl",
        "torn.wal.jsonl",
    ]
