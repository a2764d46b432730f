"""Target 3 — replay: ``replay_session`` of a 10,000-node session and Task WAL replay of 100,000 lines.

Session: 2,500 turns of the turn benchmark's shape (user message, assistant ``read_file`` call, tool result,
final answer = 4 nodes; a run row and 13 persisted events per turn, as the runtime writes them) are
written through the runtime's own :class:`StorageManager` (the single writer, one transaction per turn),
then a fresh :class:`AgentRuntime` opens the database and ``replay_session`` is timed (first call = cold,
then the median of ``--repeat`` calls, each made after the previous call's result was freed, so that
freeing is not timed as part of the replay). ``context_built`` reports list the last 200 included node ids (a
long session keeps its prompt inside the context window through compaction).

Task WAL: a Task with 5,000 independent steps; each step is claimed, started, updated and completed by a
worker; 100,000 lines in all, written as the WAL writer writes them. ``replay_wal`` rebuilds the DAG.

Run: ``.venv/bin/python -m benchmarks.replay [--turns 2500] [--wal-lines 100000] [--profile out.html]
[--only session|wal]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._common import BenchDirs, private_home, write_config

TS = "2026-06-12T15:30:00.000Z"
LEASE = "2026-06-12T16:30:00.000Z"
READ_FILE_TEXT = "File {k}.\n" + "lorem ipsum dolor sit amet, consectetur adipiscing elit\n" * 6


# -- the session ------------------------------------------------------------------------------------
async def build_session(dirs: BenchDirs, turns: int) -> str:
    """Writes ``turns`` turns (4 nodes each) into a new session; returns its id."""
    from agent_core import AgentRuntime
    from agent_core._ids import new_id
    from agent_core._storage.drafts import EventDraft, NodeDraft
    from agent_core.types.base import format_ts, utc_now
    from agent_core.types.content import JsonBlock, TextBlock, ToolCallBlock, ToolResultBlock
    from agent_core.types.enums import EventType, RunMode, RunStatus
    from agent_core.types.storage import RunRecord

    write_config(dirs.home, "http://127.0.0.1:9/v1")  # never contacted: no model call is made
    async with AgentRuntime(project_dir=dirs.project) as runtime:
        manager = await runtime._open()
        session = await manager._new_session(RunMode.normal)
        storage = manager.services.storage
        sid, agent = session.session_id, session.root_agent_id
        path: list[str] = []
        tip: str | None = None
        for turn in range(turns):
            run_id = new_id("run_")
            now = format_ts()
            await storage.insert_run(
                RunRecord(
                    run_id=run_id,
                    session_id=sid,
                    agent_id=agent,
                    status=RunStatus.pending,
                    metadata_json='{"mode":"normal"}',
                    created_at=now,
                    updated_at=now,
                )
            )
            ids = [new_id("node_") for _ in range(4)]
            call_id = f"call_{turn}"
            k = turn % 10
            contents = [
                [TextBlock(text=f"turn {turn}: please read notes/file_{k}.txt and summarise it")],
                [
                    ToolCallBlock(
                        tool_call_id=call_id, name="code.read_file", arguments={"path": f"notes/file_{k}.txt"}
                    )
                ],
                [
                    ToolResultBlock(
                        tool_call_id=call_id,
                        content=[
                            JsonBlock(
                                data={"path": f"/p/notes/file_{k}.txt", "content": READ_FILE_TEXT.format(k=k)}
                            )
                        ],
                    )
                ],
                [TextBlock(text=f"Read it ({len(path) + 4} messages).")],
            ]
            roles = ["user", "assistant", "tool", "assistant"]
            nodes = []
            for node_id, role, content in zip(ids, roles, contents, strict=True):
                nodes.append(
                    NodeDraft(
                        node_id=node_id,
                        parent_id=tip,
                        agent_id=agent,
                        run_id=run_id,
                        role=role,
                        node_type="message",
                        content=content,
                        metadata={"tool_name": "code.read_file"} if role == "tool" else {},
                        token_count=40,
                        created_at=utc_now(),
                    )
                )
                tip = node_id
                path.append(node_id)
            report = {
                "run_id": run_id,
                "agent_id": agent,
                "turn": 1,
                "provider": "openai",
                "model": "bench-model",
                "token_budget": {"context_window": 1_000_000, "total_tokens": 4000},
                "included_node_ids": path[-200:],
                "excluded_node_ids": [],
                "compaction_node_id": None,
            }
            usage = {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}
            spec: list[tuple[EventType, dict[str, Any], str | None, int | None]] = [
                (
                    EventType.loop_started,
                    {"mode": "normal", "agent_type": "main", "max_turns": 50},
                    None,
                    None,
                ),
                (EventType.message_created, {"role": "user", "text_preview": "turn"}, None, 0),
                (EventType.context_built, report, None, None),
                (
                    EventType.model_started,
                    {"provider": "openai", "model": "bench-model", "turn": 1},
                    None,
                    None,
                ),
                (
                    EventType.model_completed,
                    {"stop_reason": "tool_use", "usage": usage, "tool_call_count": 1},
                    None,
                    1,
                ),
                (
                    EventType.message_completed,
                    {"role": "assistant", "text": "", "has_tool_calls": True},
                    None,
                    1,
                ),
                (
                    EventType.tool_started,
                    {"tool_name": "code.read_file", "args_summary": "notes"},
                    call_id,
                    None,
                ),
                (EventType.tool_completed, {"tool_name": "code.read_file", "duration_ms": 1}, call_id, 2),
                (EventType.context_built, report, None, None),
                (
                    EventType.model_started,
                    {"provider": "openai", "model": "bench-model", "turn": 2},
                    None,
                    None,
                ),
                (
                    EventType.model_completed,
                    {"stop_reason": "end_turn", "usage": usage, "tool_call_count": 0},
                    None,
                    3,
                ),
                (EventType.loop_completed, {"end_reason": "completed", "turn_count": 2}, None, None),
                (
                    EventType.run_completed,
                    {"end_reason": "completed", "turn_count": 2, "usage": usage},
                    None,
                    None,
                ),
            ]
            events = [
                EventDraft(
                    event_id=new_id("evt_"),
                    agent_id=agent,
                    run_id=run_id,
                    level="info",
                    event_type=event_type,
                    node_id=ids[index] if index is not None else None,
                    tool_call_id=call,
                    payload=payload,
                    created_at=utc_now(),
                )
                for event_type, payload, call, index in spec
            ]
            await storage.append(
                sid,
                nodes=nodes,
                events=events,
                active_node_id=tip,
                run_update=(run_id, {"status": "completed", "end_reason": "completed", "turn_count": 2}),
            )
        return sid


@contextlib.contextmanager
def host_gc_pause(enabled: bool) -> Iterator[None]:
    """What an application that owns its process may do around a large replay (``--host-gc-pause``): the
    library leaves the collector alone (issue 35), the host can switch it off for the call."""
    if not enabled:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def time_replay(
    dirs: BenchDirs, session_id: str, repeat: int, profile: str | None, gc_pause: bool = False
) -> dict[str, float]:
    from agent_core import AgentRuntime

    async with AgentRuntime(project_dir=dirs.project) as runtime:
        profiler = _profiler(profile)
        started = time.perf_counter()
        with host_gc_pause(gc_pause):
            result = await runtime.replay_session(session_id)
        cold = time.perf_counter() - started
        if profiler is not None:
            profiler.stop()
            _write_profile(profiler, profile)
        samples = []
        for _ in range(repeat):
            del result  # the previous result is freed before, not inside, the timed call
            started = time.perf_counter()
            with host_gc_pause(gc_pause):
                result = await runtime.replay_session(session_id)
            samples.append(time.perf_counter() - started)
    return {
        "nodes": len(result.nodes),
        "events": len(result.events),
        "runs": len(result.runs),
        "cold_s": cold,
        "median_s": statistics.median(samples) if samples else cold,
    }


# -- the Task WAL -----------------------------------------------------------------------------------
def write_wal(path: Path, session_id: str, lines: int, steps: int) -> int:
    """A 100k-line style WAL: create, ready, running, then claim/start/update…/complete per step."""
    common = {"session_id": session_id, "task_id": "bench", "created_at": TS}
    orchestrator = {"actor_agent_id": "agent_o", "actor_run_id": "run_o"}
    worker = {"actor_agent_id": "agent_w", "actor_run_id": "run_w"}
    step_ids = [f"s{i}" for i in range(steps)]
    snapshot = {
        "task_id": "bench",
        "wal_path": str(path),
        "title": "Benchmark task",
        "summary": "Many independent steps",
        "status": "pending",
        "root_step_ids": step_ids,
        "steps": [
            {
                "step_id": s,
                "title": f"Step {s}",
                "summary": f"Do part {s}",
                "status": "pending",
                "depends_on_step_ids": [],
                "required": True,
                "worker_pool_id": None,
                "claimed_by_agent_id": None,
                "claimed_by_run_id": None,
                "lease_expires_at": None,
                "result_summary": None,
                "artifact_ids": [],
                "updated_at": TS,
            }
            for s in step_ids
        ],
        "created_by_agent_id": "agent_o",
        "created_by_run_id": "run_o",
        "created_at": TS,
        "updated_at": TS,
    }
    records: list[dict[str, Any]] = [
        {**orchestrator, "event_type": "task_created", "step_id": None, "payload": {"task": snapshot}}
    ]
    records += [
        {
            **orchestrator,
            "event_type": "task_step_ready",
            "step_id": s,
            "payload": {"previous_status": "pending", "status": "ready", "depends_on_step_ids": []},
        }
        for s in step_ids
    ]
    records.append(
        {
            **orchestrator,
            "event_type": "task_running",
            "step_id": None,
            "payload": {"previous_status": "pending", "status": "running", "reason": "auto_advance"},
        }
    )
    per_step = max(3, (lines - len(records)) // steps)
    updates = per_step - 3
    out = [
        json.dumps({**common, "wal_seq": i + 1, "event_id": f"evt_{i + 1}", **r})
        for i, r in enumerate(records)
    ]

    def add(record: dict[str, Any]) -> None:
        seq = len(out) + 1
        out.append(json.dumps({**common, "wal_seq": seq, "event_id": f"evt_{seq}", **worker, **record}))

    for index, s in enumerate(step_ids):
        worker["actor_run_id"] = f"run_w{index}"  # one worker run per step (a run holds one claim)
        extra = lines - len(out) - (steps - index) * per_step if index == steps - 1 else 0
        add(
            {
                "event_type": "task_step_claimed",
                "step_id": s,
                "payload": {
                    "previous_status": "ready",
                    "claimed_by_agent_id": "agent_w",
                    "claimed_by_run_id": f"run_w{index}",
                    "lease_expires_at": LEASE,
                },
            }
        )
        add(
            {
                "event_type": "task_step_started",
                "step_id": s,
                "payload": {"previous_status": "claimed", "status": "running", "lease_expires_at": LEASE},
            }
        )
        for n in range(updates + max(0, extra)):
            add(
                {
                    "event_type": "task_step_updated",
                    "step_id": s,
                    "payload": {
                        "previous_status": "running",
                        "status": "running",
                        "result_summary": f"progress {n} on {s}",
                        "artifact_ids": [],
                        "lease_expires_at": LEASE,
                    },
                }
            )
        add(
            {
                "event_type": "task_step_completed",
                "step_id": s,
                "payload": {"previous_status": "running", "result_summary": f"{s} done", "artifact_ids": []},
            }
        )
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return len(out)


def time_wal(
    dirs: BenchDirs, lines: int, steps: int, repeat: int, gc_pause: bool = False
) -> dict[str, float]:
    from agent_core._tasks.wal import replay_wal

    path = dirs.root / "bench.wal.jsonl"
    written = write_wal(path, "sess_bench", lines, steps)
    samples = []
    outcome = None
    for _ in range(max(1, repeat)):
        started = time.perf_counter()
        with host_gc_pause(gc_pause):
            outcome = replay_wal(path, session_id="sess_bench", repair=False)
        samples.append(time.perf_counter() - started)
    assert outcome is not None and outcome.records == written
    done = sum(1 for s in outcome.dag.steps() if s.status.value == "completed")
    return {
        "lines": written,
        "steps_completed": done,
        "median_s": statistics.median(samples),
        "best_s": min(samples),
    }


def _profiler(path: str | None) -> Any:
    if not path:
        return None
    from pyinstrument import Profiler

    profiler = Profiler(async_mode="disabled", interval=0.0005)
    profiler.start()
    return profiler


def _write_profile(profiler: Any, path: str | None) -> None:
    assert path is not None
    Path(path).write_text(profiler.output_html(), encoding="utf-8")
    Path(path).with_suffix(".txt").write_text(
        profiler.output_text(unicode=False, color=False), encoding="utf-8"
    )


async def main_async(args: argparse.Namespace) -> None:
    dirs = private_home()
    if args.only == "wal":
        _report_wal(dirs, args)
        return
    started = time.perf_counter()
    session_id = await build_session(dirs, args.turns)
    print(f"built a {args.turns * 4}-node session in {time.perf_counter() - started:.1f} s")
    session = await time_replay(dirs, session_id, args.repeat, args.profile, args.host_gc_pause)
    print(
        f"replay_session: {session['nodes']} nodes, {session['events']} events, {session['runs']} runs"
        f"  cold {session['cold_s'] * 1000:.0f} ms  median {session['median_s'] * 1000:.0f} ms   (target <= 300 ms)"
    )
    if args.only == "session":
        if args.json:
            Path(args.json).write_text(json.dumps({"session": session}, indent=2), encoding="utf-8")
        return
    wal = _report_wal(dirs, args)
    if args.json:
        Path(args.json).write_text(json.dumps({"session": session, "wal": wal}, indent=2), encoding="utf-8")


def _report_wal(dirs: BenchDirs, args: argparse.Namespace) -> dict[str, float]:
    wal = time_wal(dirs, args.wal_lines, args.wal_steps, args.repeat, args.host_gc_pause)
    print(
        f"Task WAL replay: {wal['lines']} lines ({wal['steps_completed']} steps completed)"
        f"  median {wal['median_s'] * 1000:.0f} ms  best {wal['best_s'] * 1000:.0f} ms   (target <= 500 ms)"
    )
    if args.json and args.only == "wal":
        Path(args.json).write_text(json.dumps({"wal": wal}, indent=2), encoding="utf-8")
    return wal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=2500, help="4 nodes per turn (default: 10,000 nodes)")
    parser.add_argument("--wal-lines", type=int, default=100_000)
    parser.add_argument("--wal-steps", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", help="pyinstrument profile of the cold replay_session call")
    parser.add_argument("--json", help="also write the figures as JSON here")
    parser.add_argument("--only", choices=["session", "wal"], help="run one of the two measurements")
    parser.add_argument(
        "--host-gc-pause",
        action="store_true",
        help="the benchmark, as the host application, switches the cyclic collector off around each call",
    )
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
