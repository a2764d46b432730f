"""Scheduling, failure policy and cancellation of one turn (docs/tools.md#scheduling,
docs/tools.md#cancellation; docs/runs.md#tool-calls-within-a-turn, docs/runs.md#cancellation)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._scheduler import CallGroup, call_class, plan_groups
from agent_core.tools.context import RunScope, ToolContext
from agent_core.tools.registry import ToolRegistry
from agent_core.types.enums import EventType
from agent_core.types.events import ToolResultEvent
from agent_core.types.model import ToolCall
from agent_core.types.permissions import PermissionRequest
from agent_core.types.tools import ToolDefinition, ToolResult
from tests.fixtures.tool_pipeline import (
    FakeHooks,
    PermissionRecorder,
    StandInFileTools,
    make_executor,
    tool_call,
)
from tests.fixtures.tool_sink import RecordingSink, make_scope

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def defn(
    name: str, permission: str = "readonly", tags: list[str] | None = None, **meta: Any
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="d",
        input_schema=OBJ,
        permission=permission,
        tags=tags or [],
        metadata=meta,  # type: ignore[arg-type]
    )


def test_plan_groups_and_classes() -> None:
    assert call_class(defn("a.b")) == "parallel"
    assert call_class(defn("a.b", "write")) == "serial"
    assert call_class(defn("a.b", tags=["dangerous"])) == "serial"
    assert call_class(defn("a.b", concurrency="serial")) == "serial"
    assert call_class(defn("a.b", "write", concurrency="agent")) == "agent"
    assert call_class(None) == "parallel"
    groups = plan_groups(["parallel", "parallel", "serial", "serial", "agent", "agent", "parallel"])
    assert groups == [
        CallGroup("parallel", (0, 1)),
        CallGroup("serial", (2,)),
        CallGroup("serial", (3,)),
        CallGroup("agent", (4, 5)),
        CallGroup("parallel", (6,)),
    ]
    assert plan_groups([]) == []


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    (p / "a.txt").write_text("alpha")
    return p


@pytest.fixture
def sink(tmp_path: Path) -> RecordingSink:
    return RecordingSink(tmp_path / "artifacts")


def scope_of(project: Path, *names: str) -> RunScope:
    return make_scope(
        project, project.parent, effective_tools=frozenset(names or ("test.read", "test.write", "test.run"))
    )


def overlaps(a: tuple[str, float, float], b: tuple[str, float, float]) -> bool:
    return a[1] < b[2] and b[1] < a[2]


async def test_readonly_calls_run_concurrently(project: Path, sink: RecordingSink) -> None:
    tools = StandInFileTools(read_delay=0.1)
    reg = ToolRegistry()
    reg.register_adapter(tools)
    executor, _ = make_executor(reg)
    outcome = await executor.execute_turn(
        [tool_call("test.read", path="a.txt"), tool_call("test.read", path="a.txt")], scope_of(project), sink
    )
    assert tools.max_active == 2
    assert overlaps(tools.intervals[0], tools.intervals[1])
    assert len(sink.committed) == 2 and len(outcome.results) == 2  # both finished before returning


async def test_write_is_a_boundary(project: Path, sink: RecordingSink) -> None:
    tools = StandInFileTools(read_delay=0.05)
    reg = ToolRegistry()
    reg.register_adapter(tools)
    executor, _ = make_executor(reg, callback=PermissionRecorder.always("allow_once"))
    calls = [
        tool_call("test.read", "r1", path="a.txt"),
        tool_call("test.read", "r2", path="a.txt"),
        tool_call("test.write", "w", path="b.txt", content="b"),
        tool_call("test.read", "r3", path="b.txt"),
    ]
    outcome = await executor.execute_turn(calls, scope_of(project), sink)
    assert [r.tool_call_id for r in outcome.results] == ["r1", "r2", "w", "r3"]
    assert not any(r.is_error for r in outcome.results)
    reads = [i for i in tools.intervals if i[0] == "test.read"]
    [write] = [i for i in tools.intervals if i[0] == "test.write"]
    assert overlaps(reads[0], reads[1])
    assert not any(overlaps(write, r) for r in reads)
    last_read = max(reads, key=lambda i: i[1])
    assert last_read[1] >= write[2]
    assert outcome.results[3].content[0].data["content"] == "b"  # type: ignore[union-attr]


class AgentTools:
    """Stand-ins for agent.* tools with concurrency ``agent``."""

    def __init__(self) -> None:
        self.active = 0
        self.max_active = 0
        self.order: list[str] = []

    def definitions(self) -> list[ToolDefinition]:
        tags = ["agent", "internal"]
        return [
            defn("agent.create_sub_agent", tags=tags, concurrency="agent"),
            defn("agent.fork_agent", tags=tags, concurrency="agent"),
        ]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        self.order.append(call.tool_call_id)
        try:
            await asyncio.sleep(0.05 if call.arguments.get("fail") else 0.1)
            if call.arguments.get("fail"):
                raise AgentCoreError(ErrorCode.child_agent_limit_exceeded, "too many children")
            return {"child": call.tool_call_id}
        finally:
            self.active -= 1

    async def close(self) -> None:
        return None


async def test_agent_group_wait_all(project: Path, sink: RecordingSink) -> None:
    agents = AgentTools()
    reg = ToolRegistry()
    reg.register_adapter(agents, internal=True)
    reg.register_adapter(StandInFileTools())
    executor, _ = make_executor(reg)
    calls = [
        tool_call("agent.create_sub_agent", "a1", fail=True),
        tool_call("agent.fork_agent", "a2"),
        tool_call("test.read", "r", path="a.txt"),
    ]
    outcome = await executor.execute_turn(
        calls, scope_of(project, "agent.create_sub_agent", "agent.fork_agent", "test.read"), sink
    )
    failed, ok, after = outcome.results
    assert failed.error is not None and failed.error.code == ErrorCode.child_agent_limit_exceeded
    assert ok.content[0].data == {"child": "a2"}  # type: ignore[union-attr]
    assert not after.is_error  # agent-group failures do not stop later groups
    assert agents.max_active == 2


async def test_failing_write_skips_the_rest(project: Path, sink: RecordingSink) -> None:
    tools = StandInFileTools()
    reg = ToolRegistry()
    reg.register_adapter(tools)
    (project / "dir").mkdir()
    executor, _ = make_executor(reg, callback=PermissionRecorder.always("allow_once"))
    calls = [
        tool_call("test.read", "r0", path="a.txt"),
        tool_call("test.write", "w1", path="missing/../dir", content="x"),
        tool_call("test.read", "r2", path="a.txt"),
        tool_call("test.write", "w3", path="b.txt", content="b"),
    ]
    outcome = await executor.execute_turn(calls, scope_of(project), sink)
    assert [r.error.code.value if r.error else None for r in outcome.results] == [
        None,
        "path_conflict",
        "cancelled",
        "cancelled",
    ]
    for skipped in outcome.results[2:]:
        assert skipped.metadata == {"skipped": True, "skip_reason": "previous_write_failed"}
    skip_events = [p for _, t, p in sink.committed if t == EventType.tool_failed and p.get("skipped")]
    assert [p["reason"] for p in skip_events] == ["previous_write_failed"] * 2
    assert all(p["aborted"] is False for p in skip_events)
    assert [n for n, _ in tools.executed] == ["test.read"]
    assert not outcome.aborted


async def test_failing_readonly_does_not_stop_later_calls(project: Path, sink: RecordingSink) -> None:
    tools = StandInFileTools()
    reg = ToolRegistry()
    reg.register_adapter(tools)
    executor, _ = make_executor(reg, callback=PermissionRecorder.always("allow_once"))
    calls = [
        tool_call("test.read", path="missing.txt"),
        tool_call("test.write", path="b.txt", content="b"),
        tool_call("test.read", path="b.txt"),
    ]
    outcome = await executor.execute_turn(calls, scope_of(project), sink)
    assert [r.error.code.value if r.error else None for r in outcome.results] == [
        "file_not_found",
        None,
        None,
    ]


async def test_serial_metadata_failure_skips_rest(project: Path, sink: RecordingSink) -> None:
    reg = ToolRegistry()
    reg.register_tool(
        defn("x.mutate", concurrency="serial"),
        lambda a, c: ToolResult(tool_call_id="", tool_name="", content=[], is_error=True),
    )
    reg.register_tool(defn("x.after"), lambda a, c: "ran")
    executor, _ = make_executor(reg)
    outcome = await executor.execute_turn(
        [tool_call("x.mutate"), tool_call("x.after")], scope_of(project, "x.mutate", "x.after"), sink
    )
    assert outcome.results[1].metadata.get("skipped") is True


# -- cancellation -----------------------------------------------------------------------------------


class Blocking:
    """A tool that blocks until cancelled; ``cooperative`` ones return partial output on cancel_event."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cancelled = 0
        self.ran: list[str] = []

    def definitions(self) -> list[ToolDefinition]:
        return [defn("x.block", "write"), defn("x.coop", "write"), defn("x.read")]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> Any:
        self.ran.append(call.tool_call_id)
        if call.name == "x.read":
            return "read"
        self.started.set()
        if call.name == "x.coop":
            await ctx.cancel_event.wait()
            return {"partial_stdout": "half"}
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return "never"

    async def close(self) -> None:
        return None


def blocking_setup(**kw: Any) -> tuple[Blocking, Any, Any]:
    tool = Blocking()
    reg = ToolRegistry()
    reg.register_adapter(tool)
    executor, gate = make_executor(
        reg, callback=kw.pop("callback", PermissionRecorder.always("allow_once")), **kw
    )
    return tool, executor, gate


async def test_cancel_during_handler_aborts_in_flight_and_skips_rest(
    project: Path, sink: RecordingSink
) -> None:
    tool, executor, _ = blocking_setup()
    scope = scope_of(project, "x.block", "x.read")
    calls = [tool_call("x.read", "c0"), tool_call("x.block", "c1"), tool_call("x.read", "c2")]
    task = asyncio.create_task(executor.execute_turn(calls, scope, sink))
    await asyncio.wait_for(tool.started.wait(), 2)
    scope.cancel_event.set()
    outcome = await asyncio.wait_for(task, 2)
    assert outcome.aborted and outcome.aborted_call_ids == ["c1", "c2"]
    done, aborted, skipped = outcome.results
    assert not done.is_error
    assert aborted.error is not None and aborted.error.code == ErrorCode.cancelled
    assert aborted.metadata == {"aborted": True, "partial": False, "abort_reason": "run_cancelled"}
    assert skipped.metadata == {
        "aborted": True,
        "partial": False,
        "abort_reason": "run_cancelled",
        "skipped": True,
    }
    assert tool.cancelled == 1 and tool.ran == ["c0", "c1"]
    payloads = {
        p["tool_name"] + str(i): p for i, (_, t, p) in enumerate(sink.committed) if t == EventType.tool_failed
    }
    assert all(p["aborted"] is True for p in payloads.values())
    assert len(sink.committed) == 3


async def test_cooperative_handler_partial_output(project: Path, sink: RecordingSink) -> None:
    tool, executor, _ = blocking_setup()
    scope = scope_of(project, "x.coop")
    task = asyncio.create_task(executor.execute_turn([tool_call("x.coop", "c1")], scope, sink))
    await asyncio.wait_for(tool.started.wait(), 2)
    scope.cancel_event.set()
    [result] = (await asyncio.wait_for(task, 2)).results
    assert result.metadata["partial"] is True and result.metadata["abort_reason"] == "run_cancelled"
    assert result.content[1].data == {"partial_stdout": "half"}  # type: ignore[union-attr]


async def test_cancel_abandons_pending_permission_callback(project: Path, sink: RecordingSink) -> None:
    asked = asyncio.Event()
    abandoned: list[bool] = []

    async def waiting(request: PermissionRequest) -> Any:
        asked.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            abandoned.append(True)
            raise

    tool, executor, _ = blocking_setup(callback=waiting)
    scope = scope_of(project, "x.block")
    task = asyncio.create_task(
        executor.execute_turn([tool_call("x.block", "c1"), tool_call("x.block", "c2")], scope, sink)
    )
    await asyncio.wait_for(asked.wait(), 2)
    scope.cancel_event.set()
    outcome = await asyncio.wait_for(task, 2)
    assert abandoned == [True] and tool.ran == []
    assert [r.metadata.get("skipped") for r in outcome.results] == [True, True]
    assert outcome.aborted_call_ids == ["c1", "c2"]


async def test_cancel_abandons_pending_pre_hook(project: Path, sink: RecordingSink) -> None:
    hooks = FakeHooks(pre_gate=asyncio.Event())
    tool, executor, _ = blocking_setup(hooks=hooks)
    scope = scope_of(project, "x.read")
    task = asyncio.create_task(
        executor.execute_turn([tool_call("x.read", "c1"), tool_call("x.read", "c2")], scope, sink)
    )
    for _ in range(100):
        if hooks.pre_calls:
            break
        await asyncio.sleep(0.01)
    scope.cancel_event.set()
    outcome = await asyncio.wait_for(task, 2)
    assert outcome.aborted and tool.ran == [] and hooks.pre_calls == ["c1"]


async def test_cancel_before_the_turn(project: Path, sink: RecordingSink) -> None:
    tool, executor, _ = blocking_setup()
    scope = scope_of(project, "x.read")
    scope.cancel_event.set()
    outcome = await executor.execute_turn([tool_call("x.read", "c1"), tool_call("nope.x", "c2")], scope, sink)
    assert outcome.aborted_call_ids == ["c1", "c2"] and tool.ran == []
    assert all(r.error is not None and r.error.code == ErrorCode.cancelled for r in outcome.results)


async def test_cancelling_the_executing_task_still_answers_every_call(
    project: Path, sink: RecordingSink
) -> None:
    tool, executor, _ = blocking_setup()
    scope = scope_of(project, "x.block", "x.read")
    task = asyncio.create_task(
        executor.execute_turn([tool_call("x.block", "c1"), tool_call("x.read", "c2")], scope, sink)
    )
    await asyncio.wait_for(tool.started.wait(), 2)
    task.cancel()
    outcome = await asyncio.wait_for(task, 2)
    assert outcome.aborted and outcome.aborted_call_ids == ["c1", "c2"]
    assert scope.cancel_event.is_set() and tool.cancelled == 1
    assert len(sink.committed) == 2
    assert asyncio.current_task() is not None and not task.cancelled()


async def test_every_call_gets_exactly_one_result_randomised(project: Path) -> None:
    tools = StandInFileTools()
    reg = ToolRegistry()
    reg.register_adapter(tools)
    for seed in range(25):
        rng = random.Random(seed)
        sink = RecordingSink(project.parent / f"art{seed}")
        calls = []
        for i in range(rng.randint(1, 7)):
            kind = rng.choice(["read_ok", "read_missing", "read_env", "write", "run", "unknown", "invalid"])
            call_id = f"s{seed}_{i}"
            if kind == "read_ok":
                calls.append(tool_call("test.read", call_id, path="a.txt"))
            elif kind == "read_missing":
                calls.append(tool_call("test.read", call_id, path="nope.txt"))
            elif kind == "read_env":
                calls.append(tool_call("test.read", call_id, path=".env"))
            elif kind == "write":
                calls.append(tool_call("test.write", call_id, path=f"w{seed}.txt", content="x"))
            elif kind == "run":
                calls.append(tool_call("test.run", call_id, argv=["python"]))
            elif kind == "unknown":
                calls.append(tool_call("no.tool", call_id))
            else:
                calls.append(tool_call("test.write", call_id, path=None, content=1))
        decisions = PermissionRecorder(
            lambda r, rng=rng: rng.choice(["allow_once", "deny", "allow_for_session"])
        )  # type: ignore[misc]
        executor, _ = make_executor(reg, callback=decisions)
        outcome = await executor.execute_turn(calls, scope_of(project), sink)
        assert [r.tool_call_id for r in outcome.results] == [c.tool_call_id for c in calls]
        committed_ids = [r.tool_call_id for r, _, _ in sink.committed]
        assert sorted(committed_ids) == sorted(c.tool_call_id for c in calls)
        assert all(
            t in (EventType.tool_completed, EventType.tool_failed, EventType.tool_denied)
            for _, t, _ in sink.committed
        )
        failed_write = next(
            (
                i
                for i, (c, r) in enumerate(zip(calls, outcome.results, strict=True))
                if c.name in ("test.write", "test.run") and r.is_error
            ),
            None,
        )
        if failed_write is not None:
            assert all(r.metadata.get("skipped") for r in outcome.results[failed_write + 1 :])
        assert not outcome.aborted


class SlowSink(RecordingSink):
    """Commits run on a separate writer task (like the SQLite writer queue) and take a while: cancelling
    the awaiting task does not stop a commit that was already handed over."""

    async def _write(self, result: ToolResult, event: ToolResultEvent) -> str:
        await asyncio.sleep(0.05)
        return await super().commit_tool_result(result, event=event)

    async def commit_tool_result(self, result: ToolResult, *, event: ToolResultEvent) -> str:
        writer = asyncio.ensure_future(self._write(result, event))
        return await asyncio.shield(writer)


async def test_cancellation_never_interrupts_or_duplicates_a_commit(project: Path, tmp_path: Path) -> None:
    reg = ToolRegistry()
    reg.register_tool(
        defn("x.fail", "write"),
        lambda a, c: ToolResult(tool_call_id="", tool_name="", content=[], is_error=True),
    )
    reg.register_tool(defn("x.read"), lambda a, c: "r")
    executor, _ = make_executor(reg)
    sink = SlowSink(tmp_path / "slow")
    scope = scope_of(project, "x.fail", "x.read")
    calls = [
        tool_call("x.fail", "c0"),
        tool_call("x.read", "c1"),
        tool_call("x.read", "c2"),
        tool_call("x.read", "c3"),
    ]
    task = asyncio.create_task(executor.execute_turn(calls, scope, sink))
    for _ in range(200):  # wait until the skip commits are under way
        if len(sink.committed) >= 2:
            break
        await asyncio.sleep(0.005)
    task.cancel()
    outcome = await asyncio.wait_for(task, 2)
    ids = [r.tool_call_id for r, _, _ in sink.committed]
    assert sorted(ids) == ["c0", "c1", "c2", "c3"]  # every call exactly once
    assert [r.tool_call_id for r in outcome.results] == ["c0", "c1", "c2", "c3"]
    assert outcome.results[1].metadata.get("skipped") is True
    assert scope.cancel_event.is_set()
