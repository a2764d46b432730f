"""SIGKILL and the inbox (issue 36): an entry delivered to a run that is killed before its next model step
is read by the session's next run, exactly once; an entry whose note committed before the kill is not read
again. Real subprocesses, killed with SIGKILL; the restarted runtime opens the same home."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agent_core import AgentRuntime, ProviderRegistry, RunStatus
from agent_core.testing import FunctionModel, ModelRequest
from agent_core.types.content import TextBlock

ROOT = Path(__file__).resolve().parents[2]


def crash(home: Path, project: Path, point: str) -> tuple[str, str]:
    """Runs the child until it reached ``point``, SIGKILLs it; returns ``(session_id, entry_id)``."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.fixtures.inbox_crash_child", str(home), str(project), point],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("READY "), line
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    _, session_id, entry_id = line.split()
    return session_id, entry_id


def notes(request: ModelRequest) -> list[str]:
    texts = ["".join(b.text for b in m.content if isinstance(b, TextBlock)) for m in request.messages]
    return [t for t in texts if t.startswith("<inbox>")]


@pytest.mark.parametrize("point", ["before_drain", "after_drain"])
async def test_sigkill_redelivers_an_unread_entry_exactly_once(tmp_path: Path, point: str) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    session_id, entry_id = crash(home, project, point)
    model = FunctionModel(lambda r: "resumed")
    runtime = AgentRuntime(
        project_dir=project, home_dir=home, provider_registry=ProviderRegistry({"testing": model.factory})
    )
    async with runtime:
        for message in ("what happened?", "anything else?"):
            run = await runtime.start(message, session_id=session_id)
            assert await run.wait() == RunStatus.completed
        replay = await runtime.replay_session(session_id)
    first, second = model.requests
    carried = [n for n in replay.nodes if entry_id in (n.metadata.get("entry_ids") or [])]
    drained = [
        e for e in replay.events if e.event_type == "inbox_drained" and entry_id in e.payload["entry_ids"]
    ]
    assert len(carried) == 1 and len(drained) == 1, "the entry reached a model exactly once"
    (note,) = notes(first)  # in the conversation once: written before the kill, or redelivered now
    assert "crash-entry" in note
    assert notes(second) == [note]  # the next run sees that same note in its history, no second one
    if point == "before_drain":  # unread at the kill: the first run after the restart reads it
        assert first.metadata["run_id"] == carried[0].run_id == drained[0].run_id
    else:  # read (and acknowledged) by the killed run: not read again
        assert first.metadata["run_id"] != carried[0].run_id
