"""The crash-harness child: runs tool-using sessions back to back until it is SIGKILLed.

Usage: ``python -m tests.reliability.crash_worker <home> <project> <workdir>``. The process is a small fork
server: it imports the SDK once, prints ``IMPORTED`` and reads commands from stdin. ``GO <session_id|new>
<normal|orchestrator> <seed>`` forks a worker (``PID <pid>``) that prints ``SESSION <pid> <id>`` once the
session exists and keeps running turns on it: code tools (read, list, search, write, edit, run_command), a slow
tool, a tool with artifactised output and, in orchestrator sessions, Task creation/updates/cancellation.
``KILL <pid>`` SIGKILLs that worker and reaps it (``DEAD <pid>``). Forking keeps a kill cycle cheap.

Evidence for the harness, written with single ``write`` calls so a kill never tears a line:

- ``<workdir>/violations.txt``: every provider request with a tool call lacking its result (must stay empty);
- ``<workdir>/snapshots-<session>.jsonl``: before each model request (no Task commit in flight), the
  in-memory DAG of every active Task with its ``last_wal_seq`` — the last committed state the restore must
  reproduce.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

from agent_core import AgentRuntime, PermissionDecision, PermissionRequest, ProviderRegistry, ToolDefinition
from agent_core._tasks.views import inspect_task
from agent_core.types.model import ModelRequest
from tests.fixtures.fake_provider import FakeProvider, Turn, text, tool_calls
from tests.reliability.invariants import pairing_problems

CONFIG_OVERRIDES: dict[str, Any] = {
    "model": {"context_window": 200_000},
    "compact": {"enabled": False},
    "runtime": {"max_turns": 12},
}
"""Config shared by the child and the harness (no compaction: the fake model scripts only the workload)."""

BIG_OUTPUT = "x" * 70_000
"""Above ``tools.result_limit_bytes`` (64 KiB): the result is moved into an artifact."""


def say(line: str) -> None:
    """One line to stdout in a single ``write`` (a kill never leaves half a line in the shared pipe)."""
    os.write(1, (line + "\n").encode())


def append_line(path: Path, obj: Any) -> None:
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


class Workload:
    """Routes the fake model: a few tool turns per run, then a streamed answer."""

    def __init__(self, runtime: AgentRuntime, mode: str, seed: int, workdir: Path) -> None:
        self.runtime = runtime
        self.mode = mode
        self.rng = random.Random(seed)
        self.workdir = workdir
        self.turns: dict[str, int] = {}
        self.plans: dict[str, int] = {}
        self.run_tasks: dict[str, str] = {}
        self.counter = 0
        self.token = f"{seed % 100_000:05d}"

    def __call__(self, request: ModelRequest) -> Turn:
        problems = pairing_problems(request)
        if problems:
            append_line(self.workdir / "violations.txt", {"where": "child", "problems": problems})
        session_id = str(request.metadata.get("session_id"))
        run_id = str(request.metadata.get("run_id"))
        if self.mode == "orchestrator":
            self.snapshot(session_id)
        turn = self.turns.get(run_id, 0)
        self.turns[run_id] = turn + 1
        planned = self.plans.setdefault(run_id, self.rng.randint(1, 4))
        if turn >= planned:
            reply = "done " + "word " * self.rng.randint(1, 40)
            return text(reply, chunks=self.rng.randint(1, 8), delay=self.rng.choice([0.0, 0.001, 0.003]))
        if self.mode == "orchestrator":
            return self.task_turn(session_id, run_id, turn)
        return self.code_turn()

    # ---- normal sessions --------------------------------------------------------------------------
    def code_turn(self) -> Turn:
        self.counter += 1
        n = self.counter
        options: list[tuple[str, dict[str, Any]]] = [
            ("code.read_file", {"path": "notes.txt"}),
            ("code.list_dir", {"path": ".", "recursive": True, "limit": 50}),
            ("code.search", {"query": "line", "limit": 20}),
            (
                "code.write_file",
                {"path": f"work/f{n % 7}.txt", "content": f"line {n}\n" * 20, "overwrite": True},
            ),
            ("code.edit_file", {"path": "notes.txt", "edits": [{"old": "line 1\n", "new": "line 1\n"}]}),
            ("code.run_command", {"argv": ["sleep", "0.02"]}),
            ("demo.slow", {"ms": self.rng.randint(1, 40)}),
            ("demo.big", {}),
        ]
        picks = self.rng.sample(options, self.rng.randint(1, 3))
        return tool_calls(*picks, lead_text=self.rng.choice(["", "Let me look."]))

    # ---- orchestrator sessions --------------------------------------------------------------------
    def registry_service(self, session_id: str) -> Any:
        return self.runtime._features().tasks.load().task_registry.peek(session_id)

    def snapshot(self, session_id: str) -> None:
        service = self.registry_service(session_id)
        if service is None:
            return
        tasks = {
            dag.task_id: {"last_wal_seq": dag.last_wal_seq, "task": inspect_task(dag)}
            for dag in service.active_dags()
        }
        append_line(self.workdir / f"snapshots-{session_id}.jsonl", {"tasks": tasks})

    def task_turn(self, session_id: str, run_id: str, turn: int) -> Turn:
        self.counter += 1
        n = self.counter
        service = self.registry_service(session_id)
        active = sorted(dag.task_id for dag in service.active_dags()) if service is not None else []
        task_id = self.run_tasks.get(run_id)
        if task_id is None or task_id not in active:
            if active and self.rng.random() < 0.5:
                task_id = self.rng.choice(active)
            else:
                task_id = f"t{self.token}-{n}"
                self.run_tasks[run_id] = task_id
                steps = [
                    {"step_id": "s1", "title": "First", "summary": "Do one", "depends_on_step_ids": []},
                    {"step_id": "s2", "title": "Second", "summary": "Do two", "depends_on_step_ids": ["s1"]},
                    {"step_id": "s3", "title": "Third", "summary": "Do three", "depends_on_step_ids": []},
                ]
                create = {
                    "task_id": task_id,
                    "wal_name": f"w{self.token}-{n}",
                    "title": f"Task {n}",
                    "summary": "Crash-harness work",
                    "steps": steps,
                }
                return tool_calls(("agent.task_create", create))
            self.run_tasks[run_id] = task_id
        roll = self.rng.random()
        if roll < 0.12:
            return tool_calls(("agent.task_cancel", {"task_id": task_id, "reason": "harness"}))
        step = f"x{n}"
        ops: list[dict[str, Any]] = [
            {
                "op": "add_step",
                "step": {"step_id": step, "title": "Extra", "summary": "More", "depends_on_step_ids": ["s1"]},
            },
            {"op": "update_step", "step_id": "s3", "fields": {"title": f"Third v{n}"}},
        ]
        if roll < 0.5:
            ops.append({"op": "cancel_step", "step_id": step, "reason": "not needed"})
        calls: list[tuple[str, dict[str, Any]]] = [
            ("agent.task_update", {"task_id": task_id, "operations": ops})
        ]
        if roll > 0.8:
            calls.append(("code.read_file", {"path": "notes.txt"}))
        return tool_calls(*calls)


async def allow(request: PermissionRequest) -> PermissionDecision:
    return PermissionDecision(decision="allow_once")


def register_tools(runtime: AgentRuntime) -> None:
    async def slow(args: dict[str, Any], ctx: Any) -> str:
        await asyncio.sleep(int(args.get("ms", 10)) / 1000)
        return "slept"

    async def big(args: dict[str, Any], ctx: Any) -> str:
        return BIG_OUTPUT

    schema = {"type": "object", "properties": {"ms": {"type": "integer"}}}
    runtime.register_tool(
        ToolDefinition(name="demo.slow", description="Sleeps.", input_schema=schema, permission="readonly"),
        slow,
    )
    runtime.register_tool(
        ToolDefinition(
            name="demo.big",
            description="Large output.",
            input_schema={"type": "object", "properties": {}},
            permission="readonly",
        ),
        big,
    )


async def work(home: str, project: str, workdir: str, session_arg: str, mode: str, seed: int) -> None:
    """Runs turns on one session forever (the forked child's whole life)."""
    pid = os.getpid()
    fake = FakeProvider(strict=False)
    runtime = AgentRuntime(
        home_dir=home,
        project_dir=project,
        permission_callback=allow,
        provider_registry=ProviderRegistry({"fake": fake.factory}),
    )
    register_tools(runtime)
    fake.route(Workload(runtime, mode, seed, Path(workdir)))
    run_mode: Any = mode
    async with runtime:
        session_id = None if session_arg == "new" else session_arg
        first = True
        while True:
            run = await runtime.start("work on it", session_id=session_id, mode=run_mode)
            if first:
                say(f"SESSION {pid} {run.session_id}")
                first = False
            session_id = run.session_id
            async for _ in run.events():
                pass
            say(f"RUN {pid} {run.status.value}")


def serve(home: str, project: str, workdir: str) -> None:
    """The fork server: imports once, then forks one worker per ``GO`` and SIGKILLs it on ``KILL``."""
    say("IMPORTED")
    for line in sys.stdin:
        command, *args = line.split()
        if command == "GO":
            session_arg, mode, seed = args
            pid = os.fork()
            if pid == 0:
                try:
                    asyncio.run(work(home, project, workdir, session_arg, mode, int(seed)))
                finally:
                    os._exit(1)
            say(f"PID {pid}")
        elif command == "KILL":
            pid = int(args[0])
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            say(f"DEAD {pid}")


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], sys.argv[3])
