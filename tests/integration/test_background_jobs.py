"""Background offload of slow tool calls (docs/jobs-and-schedules.md#background-jobs, issue 22): the
placeholder is the call's paired result, the job's result arrives through the session's inbox (a
``job_result`` entry of an ``<inbox>`` note, issue 36), an idle session is woken with a new run,
``internal.job_status`` / ``internal.job_cancel``, run cancel / runtime close / SIGKILL semantics, and
behaviour unchanged with offload off. Every provider request is checked for unpaired tool calls."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent_core.types.content import ToolCallBlock, ToolResultBlock, text_of
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, hang, text, tool_calls
from tests.fixtures.runtime import open_runtime, rows, wait_for
from tests.fixtures.tool_pipeline import PermissionRecorder

PLACEHOLDER = re.compile(r"^\[background job (job_\w+) started; its result will arrive as a message\]$")
OFFLOAD = {"tools": {"offload_after_ms": 800}}  # roomy: a fast call must finish in time under load


def assert_paired(requests: list[ModelRequest]) -> None:
    """No provider request carries a tool call without its result."""
    for request in requests:
        calls = [b.tool_call_id for m in request.messages for b in m.content if isinstance(b, ToolCallBlock)]
        results = [
            b.tool_call_id for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)
        ]
        assert sorted(calls) == sorted(results), (calls, results)


def result_block(request: ModelRequest, call_id: str) -> ToolResultBlock:
    for message in request.messages:
        for block in message.content:
            if isinstance(block, ToolResultBlock) and block.tool_call_id == call_id:
                return block
    raise AssertionError(f"no result for {call_id}")


def job_id_in(request: ModelRequest, call_id: str = "call_cmd") -> str:
    block = result_block(request, call_id)
    match = PLACEHOLDER.match(text_of(block.content))  # type: ignore[arg-type]
    assert match, block
    return match.group(1)


def slow(pid_file: Path, seconds: int = 30) -> dict[str, Any]:
    return {"argv": ["sh", "-c", f"echo $$ > {pid_file}; exec sleep {seconds}"]}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


async def wait_dead(pid_file: Path) -> None:
    await wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
    pid = int(pid_file.read_text())
    await wait_for(lambda: not alive(pid), timeout=10)


def job_rows(env: SoongEnv) -> list[dict[str, Any]]:
    return [dict(r) for r in rows(env, "SELECT * FROM background_jobs ORDER BY created_at")]


def event_types(env: SoongEnv, session_id: str) -> list[str]:
    return [r["event_type"] for r in rows(env, f'SELECT event_type FROM "events_{session_id}" ORDER BY seq')]


class Route:
    """Answers request n with ``turns[n](request)`` (a turn may depend on what the request carries)."""

    def __init__(self, fake: FakeProvider, *turns: Callable[[ModelRequest], Turn]) -> None:
        self.turns = list(turns)
        fake.route(self)

    def __call__(self, request: ModelRequest) -> Turn | None:
        return self.turns.pop(0)(request) if self.turns else None


ALLOW = PermissionRecorder.always("allow_once")


async def test_placeholder_then_result_message_wakes_the_idle_session(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    cmd = {"argv": ["sh", "-c", "sleep 2; echo finished-output"]}
    Route(
        fake,
        lambda r: tool_calls(
            ("code.run_command", cmd, "call_cmd"),
            ("code.run_command", {"argv": ["echo", "quick"]}, "call_fast"),
        ),
        lambda r: text("I will wait for the job."),
        lambda r: text("The job printed finished-output."),
    )
    async with open_runtime(soong_env, fake, config=OFFLOAD, permission_callback=ALLOW) as rt:
        run = await rt.start("run the slow build")
        assert (await run.wait()).value == "completed"
        second = fake.requests[1]
        job_id = job_id_in(second)
        assert "quick" in json.dumps(result_block(second, "call_fast").model_dump())  # fast call unchanged
        assert not result_block(second, "call_cmd").is_error
        await wait_for(lambda: len(fake.requests) == 3, timeout=15)
        woken = fake.requests[2]
        note = text_of(woken.messages[-1].content)
        assert note.startswith("<inbox>") and 'kind="job_result"' in note and f'from="job:{job_id}"' in note
        assert "finished-output" in note
        assert "completed" in note
        await wait_for(
            lambda: (
                len(
                    rows(
                        soong_env,
                        "SELECT 1 FROM runs WHERE session_id = ? AND status = 'completed'",
                        run.session_id,
                    )
                )
                == 2
            ),
            timeout=15,
        )
    assert_paired(fake.requests)
    (job,) = job_rows(soong_env)
    assert (job["job_id"], job["status"], job["delivered"]) == (job_id, "completed", 1)
    assert job["run_id"] == run.run_id and job["tool_call_id"] == "call_cmd" and job["artifact_id"]
    artifact = rows(soong_env, "SELECT path FROM artifacts WHERE artifact_id = ?", job["artifact_id"])
    assert artifact and "finished-output" in Path(artifact[0]["path"]).read_text()
    types = event_types(soong_env, run.session_id)
    assert types.count("job_started") == 1 and types.count("job_completed") == 1
    assert types.index("job_started") < types.index("job_completed")


async def test_offload_off_keeps_todays_behaviour(soong_env: SoongEnv) -> None:
    fake = FakeProvider()
    Route(
        fake,
        lambda r: tool_calls(
            ("code.run_command", {"argv": ["sh", "-c", "sleep 0.4; echo real"]}, "call_cmd")
        ),
        lambda r: text("done"),
    )
    async with open_runtime(soong_env, fake, permission_callback=ALLOW) as rt:
        run = await rt.start("go")
        assert (await run.wait()).value == "completed"
        tools = {t.name for t in fake.requests[0].tools}
    block = result_block(fake.requests[1], "call_cmd")
    assert "real" in json.dumps(block.model_dump()) and "background job" not in json.dumps(block.model_dump())
    assert "internal.job_status" not in tools and len(fake.requests) == 2
    assert_paired(fake.requests)


async def test_job_status_and_job_cancel(soong_env: SoongEnv) -> None:
    pid_file = soong_env.project / "pid"
    fake = FakeProvider()
    seen: dict[str, Any] = {}

    def status_call(request: ModelRequest) -> Turn:
        seen["job_id"] = job_id_in(request)
        return tool_calls(("internal.job_status", {"job_id": seen["job_id"]}, "call_status"))

    Route(
        fake,
        lambda r: tool_calls(("code.run_command", slow(pid_file), "call_cmd")),
        status_call,
        lambda r: tool_calls(("internal.job_cancel", {"job_id": seen["job_id"]}, "call_cancel")),
        lambda r: tool_calls(("internal.job_status", {"job_id": "job_unknown"}, "call_unknown")),
        lambda r: text("cancelled it"),
    )
    async with open_runtime(soong_env, fake, config=OFFLOAD, permission_callback=ALLOW) as rt:
        run = await rt.start("start and stop a job")
        assert (await run.wait()).value == "completed"
        await wait_dead(pid_file)
        await asyncio.sleep(0.3)
    status = json.loads(json.dumps(result_block(fake.requests[2], "call_status").model_dump()))
    assert '"status": "running"' in json.dumps(status) or "'status': 'running'" in str(status)
    cancel = result_block(fake.requests[3], "call_cancel")
    assert not cancel.is_error and '"cancelled": true' in json.dumps(cancel.model_dump())
    assert '"status": "cancelled"' in json.dumps(cancel.model_dump())
    assert result_block(fake.requests[4], "call_unknown").is_error
    assert len(fake.requests) == 5, "a cancelled job wakes nobody"
    (job,) = job_rows(soong_env)
    assert (job["status"], job["delivered"]) == ("cancelled", 1)
    assert "job_failed" in event_types(soong_env, run.session_id)
    assert_paired(fake.requests)


async def test_cancelling_the_run_cancels_its_jobs(soong_env: SoongEnv) -> None:
    pid_file = soong_env.project / "pid"
    gate = asyncio.Event()
    fake = FakeProvider()
    Route(fake, lambda r: tool_calls(("code.run_command", slow(pid_file), "call_cmd")), lambda r: hang(gate))
    async with open_runtime(soong_env, fake, config=OFFLOAD, permission_callback=ALLOW) as rt:
        run = await rt.start("go")
        await wait_for(lambda: len(fake.requests) == 2, timeout=10)
        job_id_in(fake.requests[1])
        await run.cancel()
        await run.wait()
        await wait_dead(pid_file)
        await wait_for(lambda: job_rows(soong_env)[0]["status"] == "cancelled")
    assert_paired(fake.requests)
    assert len(fake.requests) == 2


async def test_closing_the_runtime_cancels_running_jobs(soong_env: SoongEnv) -> None:
    pid_file = soong_env.project / "pid"
    fake = FakeProvider()
    Route(fake, lambda r: tool_calls(("code.run_command", slow(pid_file), "call_cmd")), lambda r: text("ok"))
    async with open_runtime(soong_env, fake, config=OFFLOAD, permission_callback=ALLOW) as rt:
        run = await rt.start("go")
        assert (await run.wait()).value == "completed"
        await wait_for(lambda: pid_file.exists() and pid_file.read_text().strip() != "")
        assert job_rows(soong_env)[0]["status"] == "running"
    await wait_dead(pid_file)
    (job,) = job_rows(soong_env)
    assert job["status"] == "cancelled" and job["delivered"] == 1
    assert_paired(fake.requests)


def start_child(env: SoongEnv, pid_file: Path) -> subprocess.Popen[str]:
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.fixtures.job_crash_child",
            str(env.home),
            str(env.project),
            str(pid_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )


async def test_sigkill_marks_running_jobs_failed_and_tells_the_model(soong_env: SoongEnv) -> None:
    soong_env.write_config(**OFFLOAD)
    pid_file = soong_env.project / "pid"
    child = start_child(soong_env, pid_file)
    command_pid = None
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("READY "), line
        session_id = line.split()[1]
        child.send_signal(signal.SIGKILL)
        child.wait(10)
        command_pid = int(pid_file.read_text())
        assert job_rows(soong_env)[0]["status"] == "running"  # nobody finished it
        fake = FakeProvider(text("noted"))
        async with open_runtime(soong_env, fake, write_config=False) as rt:
            run = await rt.start("what happened to the build?", session_id=session_id)
            assert (await run.wait()).value == "completed"
        (job,) = job_rows(soong_env)
        assert job["status"] == "failed" and job["delivered"] == 1
        (request,) = fake.requests
        note, last = (text_of(m.content) for m in request.messages[-2:])
        assert note.startswith("<inbox>") and job["job_id"] in note and "failed" in note
        assert last == "what happened to the build?"  # the job's note came first
        assert_paired(fake.requests)
        assert "job_failed" in event_types(soong_env, session_id)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if command_pid is not None and alive(command_pid):
            os.kill(command_pid, signal.SIGKILL)


async def test_declarative_tool_offloaded_without_wake_tells_the_next_run(soong_env: SoongEnv) -> None:
    script = Path(__file__).resolve().parents[1] / "fixtures" / "declarative_tool.py"
    spec = {
        "name": "demo.slow",
        "description": "A slow declarative tool.",
        "permission": "readonly",
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
        "command": sys.executable,
        "args": [str(script), "--sleep", "2", "--", "{{args.who}}"],
    }
    soong_env.write_home("tools/slow.json", json.dumps(spec))
    fake = FakeProvider()
    Route(
        fake,
        lambda r: tool_calls(("demo.slow", {"who": "declarative-arg"}, "call_cmd")),
        lambda r: text("started it"),
        lambda r: text("I see the job result"),
    )
    config = {"tools": {"offload_after_ms": 800, "wake_on_completion": False}}
    async with open_runtime(soong_env, fake, config=config) as rt:
        run = await rt.start("use the slow tool")
        assert (await run.wait()).value == "completed"
        job_id = job_id_in(fake.requests[1])
        await wait_for(lambda: job_rows(soong_env)[0]["status"] == "completed", timeout=15)
        await asyncio.sleep(0.3)
        assert len(fake.requests) == 2, "no wake-up with wake_on_completion = false"
        assert job_rows(soong_env)[0]["delivered"] == 1  # in the inbox, unread
        nxt = await rt.start("anything new?", session_id=run.session_id)
        assert (await nxt.wait()).value == "completed"
    note, last = (text_of(m.content) for m in fake.requests[2].messages[-2:])
    assert note.startswith("<inbox>") and job_id in note and "declarative-arg" in note
    assert last == "anything new?"
    assert_paired(fake.requests)


async def test_a_second_runtime_on_the_home_leaves_the_running_jobs_of_the_first_alone(
    soong_env: SoongEnv,
) -> None:
    """Several processes (here: runtimes) on one home (issue 40): the job recovery of a runtime's first run
    fails only the jobs of runtimes that are gone, not those another open runtime still runs."""
    first = FakeProvider()
    cmd = {"argv": ["sh", "-c", "sleep 2; echo finished-output"]}
    Route(first, lambda r: tool_calls(("code.run_command", cmd, "call_cmd")), lambda r: text("started it"))
    second = FakeProvider(text("hello from the second runtime"))
    config = {"tools": {"offload_after_ms": 800, "wake_on_completion": False}}
    async with open_runtime(soong_env, first, config=config, permission_callback=ALLOW) as rt:
        run = await rt.start("run the slow build")
        assert (await run.wait()).value == "completed"
        async with open_runtime(soong_env, second, write_config=False) as other:  # recovers jobs on its run
            assert (await (await other.start("hello")).wait()).value == "completed"

        async def job_events() -> list[str]:
            replay = await rt.replay_session(run.session_id)
            return [e.event_type.value for e in replay.events if e.event_type.value.startswith("job_")]

        deadline = asyncio.get_running_loop().time() + 20
        while len(await job_events()) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        assert await job_events() == ["job_started", "job_completed"]
