"""SIGKILL crash harness (issue 10 item 1): kill a working child at random points, then resume in a new
runtime.

Each kill: a pre-started :mod:`tests.reliability.crash_worker` child gets ``GO`` for a session (new or one
that survived earlier kills), works for a seeded random time and is SIGKILLed. A fresh in-process runtime then
opens the session: ``replay_session`` must succeed, the next run must complete, no provider request may
contain an unpaired tool call, every run row must be terminal, seqs stay contiguous and each Task WAL
restores to exactly the last committed DAG (a torn final line — natural or injected — is truncated).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_core import RunStatus
from agent_core._tasks.views import inspect_task
from agent_core._tasks.wal import replay_wal
from agent_core.types.enums import EventType
from agent_core.types.model import ModelRequest
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, Turn, text
from tests.fixtures.runtime import collect, open_runtime, rows
from tests.reliability.crash_worker import CONFIG_OVERRIDES
from tests.reliability.invariants import pairing_problems, path_pairing_problems, seq_problems

ROOT = Path(__file__).resolve().parents[2]
TERMINAL_WAL_EVENTS = {"task_completed", "task_failed", "task_cancelled"}


@dataclass
class CrashStats:
    kills: int = 0
    survived: int = 0
    sessions: int = 0
    orphaned_runs_closed: int = 0
    dangling_calls_closed: int = 0
    kills_with_dangling_calls: int = 0
    kills_mid_run: int = 0
    child_runs_completed: int = 0
    wal_checks: int = 0
    wal_exact_snapshot_matches: int = 0
    torn_tails_natural: int = 0
    torn_tails_injected: int = 0
    provider_requests_checked: int = 0
    seconds_to_session: float = 0.0
    seconds_resuming: float = 0.0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "failures"} | {"failures": self.failures[:20]}


def proc_state(pid: int) -> str:
    """State and wait channel of a process (diagnostics for a kill that does not complete)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()[:3]
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError as exc:
        return f"gone ({exc.strerror})"
    return f"{status} wchan={wchan}"


class ForkServer:
    """The :mod:`tests.reliability.crash_worker` fork server (started and stopped by the harness)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.runs_finished = 0
        self.pending: list[str] = []
        self.recent: list[str] = []

    @classmethod
    async def start(cls, env: SoongEnv, workdir: Path) -> ForkServer:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.reliability.crash_worker",
            str(env.home),
            str(env.project),
            str(workdir),
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=(workdir / "worker-stderr.txt").open("ab"),
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        server = cls(proc)
        await server.expect("IMPORTED")
        return server

    async def _line(self, timeout: float = 60.0) -> str:
        assert self.proc.stdout is not None
        raw = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not raw:
            raise AssertionError(f"crash fork server exited (rc={self.proc.returncode})")
        line = raw.decode(errors="replace").strip()
        self.recent = [*self.recent[-20:], line]
        self.runs_finished += line.count("RUN ")
        return line

    async def expect(self, token: str) -> list[str]:
        """Reads lines until one contains ``token`` (worker lines may interleave); returns the fields from the
        token on."""
        for i, line in enumerate(self.pending):
            if token in line:
                del self.pending[i]
                return line[line.index(token) :].split()
        while True:
            line = await self._line()
            if token in line:
                return line[line.index(token) :].split()
            if not line.startswith("RUN "):
                self.pending.append(line)

    async def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def go(self, session_id: str | None, mode: str, seed: int) -> tuple[int, str]:
        await self.send(f"GO {session_id or 'new'} {mode} {seed}")
        pid = int((await self.expect("PID "))[1])
        session = (await self.expect(f"SESSION {pid} "))[2]
        return pid, session

    async def kill(self, pid: int) -> None:
        await self.send(f"KILL {pid}")
        try:
            await self.expect(f"DEAD {pid}")
        except TimeoutError as exc:
            raise AssertionError(
                f"worker {pid} not reaped: {proc_state(pid)}; server: {proc_state(self.proc.pid)}; "
                f"last lines: {self.recent}; pending: {self.pending}"
            ) from exc

    async def stop(self) -> None:
        if self.proc.returncode is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


# -- Task WAL evidence ----------------------------------------------------------------------------------


@dataclass
class WalFile:
    path: Path
    committed: bytes
    """Everything up to the last newline: the committed records."""
    torn: bool
    terminal: bool
    last_wal_seq: int


def read_wal(path: Path) -> WalFile:
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1
    committed = data[:cut]
    lines = [json.loads(line) for line in committed.splitlines() if line]
    terminal = bool(lines) and lines[-1]["event_type"] in TERMINAL_WAL_EVENTS
    last = lines[-1]["wal_seq"] if lines else 0
    return WalFile(path, committed, torn=cut < len(data), terminal=terminal, last_wal_seq=last)


def wal_files(env: SoongEnv, session_id: str) -> list[WalFile]:
    directory = env.project / ".soong-agent" / "tasks" / session_id
    if not directory.is_dir():
        return []
    return [read_wal(p) for p in sorted(directory.glob("*.wal.jsonl"))]


def last_snapshot(workdir: Path, session_id: str) -> dict[str, Any]:
    path = workdir / f"snapshots-{session_id}.jsonl"
    if not path.exists():
        return {}
    lines = path.read_bytes().split(b"\n")
    complete = [line for line in lines[:-1] if line]
    if not complete:
        return {}
    tasks: dict[str, Any] = json.loads(complete[-1])["tasks"]
    return tasks


def expected_dag(wal: WalFile, session_id: str, scratch: Path) -> dict[str, Any]:
    """The DAG of the committed records, replayed from a private copy (the original is not touched)."""
    copy = scratch / wal.path.name
    copy.write_bytes(wal.committed)
    outcome = replay_wal(copy, session_id=session_id, repair=False)
    copy.unlink()
    task = inspect_task(outcome.dag) | {"wal_path": str(wal.path)}
    return {"last_wal_seq": outcome.dag.last_wal_seq, "task": task}


# -- one kill -------------------------------------------------------------------------------------------


def answer_everything(fake: FakeProvider, stats: CrashStats) -> None:
    def route(request: ModelRequest) -> Turn:
        stats.provider_requests_checked += 1
        problems = pairing_problems(request)
        if problems:
            stats.failures.append(f"unpaired request after resume: {problems}")
        return text("resumed fine", chunks=2)

    fake.route(route)


async def verify_resume(
    env: SoongEnv,
    session_id: str,
    mode: str,
    workdir: Path,
    rng: random.Random,
    stats: CrashStats,
) -> None:
    """Everything a fresh runtime must guarantee after the kill; problems go to ``stats.failures``."""
    failures_before = len(stats.failures)
    wals = wal_files(env, session_id)
    stats.torn_tails_natural += sum(1 for w in wals if w.torn)
    live = [w for w in wals if not w.terminal and w.committed]
    if live and not any(w.torn for w in live) and rng.random() < 0.3:
        victim = rng.choice(live)
        last_line = victim.committed.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        with victim.path.open("ab") as fh:
            fh.write(last_line[: max(1, len(last_line) // 2)])
        stats.torn_tails_injected += 1
    snapshot = last_snapshot(workdir, session_id)
    fake = FakeProvider(strict=False)
    answer_everything(fake, stats)
    async with open_runtime(env, fake, write_config=False) as rt:
        before = await rt.replay_session(session_id)
        orphans = [r for r in before.runs if not r.status.terminal]
        stats.orphaned_runs_closed += len(orphans)
        stats.kills_mid_run += 1 if orphans else 0
        [session_row] = rows(env, "SELECT active_node_id FROM sessions WHERE session_id = ?", session_id)
        if session_row["active_node_id"]:
            dangling = path_pairing_problems(await rt.get_node_path(session_row["active_node_id"]))
            stats.dangling_calls_closed += len(dangling)
            stats.kills_with_dangling_calls += 1 if dangling else 0
        run = await rt.start("continue after the crash", session_id=session_id, mode=mode)  # type: ignore[arg-type]
        await collect(run, timeout=30)
        if run.status != RunStatus.completed:
            stats.failures.append(f"resumed run ended {run.status}: {run.error}")
        after = await rt.replay_session(session_id)
        not_terminal = [r.run_id for r in after.runs if not r.status.terminal]
        if not_terminal:
            stats.failures.append(f"non-terminal runs after resume: {not_terminal}")
        stats.failures.extend(seq_problems(after.events))
        [session_row] = rows(env, "SELECT active_node_id FROM sessions WHERE session_id = ?", session_id)
        path = await rt.get_node_path(session_row["active_node_id"])
        stats.failures.extend(path_pairing_problems(path))
        last_seq = max((e.seq or 0 for e in before.events), default=0)
        replayed = [
            e for e in after.events if e.event_type == EventType.task_wal_replayed and (e.seq or 0) > last_seq
        ]
        check_wals(env, session_id, wals, snapshot, after.tasks, replayed, workdir, stats)
    if len(stats.failures) == failures_before:
        stats.survived += 1


def check_wals(
    env: SoongEnv,
    session_id: str,
    wals: list[WalFile],
    snapshot: dict[str, Any],
    views: list[Any],
    replayed: list[Any],
    workdir: Path,
    stats: CrashStats,
) -> None:
    by_path = {Path(v.wal_path): v for v in views}
    for wal in wals:
        stats.wal_checks += 1
        view = by_path.get(wal.path)
        if not wal.committed:
            # The create itself was cut before its first record: no Task, the name is free again.
            if wal.path.exists() or view is not None:
                stats.failures.append(f"{wal.path.name}: an uncommitted create left a WAL behind")
            continue
        if view is None or view.task is None:
            stats.failures.append(f"{wal.path.name}: no restored Task ({view.error if view else 'no view'})")
            continue
        expected = expected_dag(wal, session_id, workdir)
        if view.task != ({**expected["task"], "read_only": True} if wal.terminal else expected["task"]):
            stats.failures.append(
                f"{wal.path.name}: restored DAG differs from the committed records: "
                f"{view.task} != {expected['task']}"
            )
            continue
        if wal.terminal:
            continue
        if wal.path.read_bytes() != wal.committed:
            stats.failures.append(f"{wal.path.name}: the torn tail was not truncated exactly")
        noted = [e for e in replayed if e.data.get("wal_path") == str(wal.path)]
        if len(noted) != 1 or noted[0].data["last_wal_seq"] != wal.last_wal_seq:
            stats.failures.append(f"{wal.path.name}: task_wal_replayed missing or wrong: {noted}")
        task_id = expected["task"]["task_id"]
        if task_id in snapshot:
            committed = snapshot[task_id]
            if committed["last_wal_seq"] > wal.last_wal_seq:
                stats.failures.append(f"{wal.path.name}: acknowledged records lost")
            elif committed["last_wal_seq"] == wal.last_wal_seq:
                if committed["task"] != view.task:
                    stats.failures.append(f"{wal.path.name}: restored DAG differs from the live DAG")
                else:
                    stats.wal_exact_snapshot_matches += 1


async def crash_campaign(
    env: SoongEnv,
    workdir: Path,
    *,
    kills: int,
    seed: int,
    max_delay_s: float,
    rotate_every: int = 5,
) -> CrashStats:
    """Runs ``kills`` kill/resume cycles; returns the figures (failures listed, never raised mid-way)."""
    env.write_config(**CONFIG_OVERRIDES)
    env.write_project("notes.txt", "".join(f"line {i}\n" for i in range(1, 40)))
    rng = random.Random(seed)
    stats = CrashStats()
    server = await ForkServer.start(env, workdir)
    session_id: str | None = None
    mode = "normal"
    try:
        for i in range(kills):
            if i % rotate_every == 0:
                session_id = None
                mode = "orchestrator" if (i // rotate_every) % 2 else "normal"
                stats.sessions += 1
            started = time.monotonic()
            pid, session_id = await server.go(session_id, mode, rng.randrange(1 << 30))
            stats.seconds_to_session += time.monotonic() - started
            await asyncio.sleep(rng.uniform(0.0, max_delay_s))
            await server.kill(pid)
            stats.kills += 1
            started = time.monotonic()
            seen = len(stats.failures)
            try:
                await verify_resume(env, session_id, mode, workdir, rng, stats)
            except Exception as exc:  # a crash of the check itself is a failure of the kill, not a hang
                stats.failures.append(f"kill {i}: resume raised {type(exc).__name__}: {exc}")
            stats.seconds_resuming += time.monotonic() - started
            with (workdir / "progress.log").open("a") as log:
                log.write(f"kill {i} session {session_id} {mode} failures={len(stats.failures)}\n")
                log.writelines(f"  {failure}\n" for failure in stats.failures[seen:])
    finally:
        await server.stop()
    stats.child_runs_completed = server.runs_finished
    violations = workdir / "violations.txt"
    if violations.exists() and violations.read_text().strip():
        stats.failures.append(f"child saw unpaired requests: {violations.read_text()[:500]}")
    return stats
