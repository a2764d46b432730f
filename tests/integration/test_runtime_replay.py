"""Replay, node paths, branch switching, deletion, cleanup and secrets through the public API (cases E2–E4,
E6, E7, E11; docs/runs.md; docs/storage.md)."""

from __future__ import annotations

import gc
import itertools
import json
import logging
import secrets
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_core import AgentCoreError, ErrorCode, RunStatus, ToolDefinition
from agent_core._artifacts import cleanup as cleanup_module
from agent_core._ids import new_id
from agent_core.types.content import ArtifactRefBlock, ToolResultBlock
from tests.fixtures.env import SoongEnv
from tests.fixtures.fake_provider import FakeProvider, fail, hang, text, tool_calls
from tests.fixtures.runtime import collect, db_bytes, open_runtime, rows
from tests.fixtures.tool_pipeline import PermissionRecorder


def tool_def(name: str, permission: str = "readonly") -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"{name} test tool.",
        input_schema={"type": "object", "properties": {}},
        permission=permission,  # type: ignore[arg-type]
    )


def node_rows(env: SoongEnv, sid: str) -> list[dict[str, Any]]:
    return [dict(r) for r in rows(env, f'SELECT * FROM "nodes_{sid}" ORDER BY node_seq')]


def tables(env: SoongEnv) -> set[str]:
    return {r["name"] for r in rows(env, "SELECT name FROM sqlite_master WHERE type = 'table'")}


def count(env: SoongEnv, table: str, sid: str) -> int:
    return int(rows(env, f"SELECT count(*) AS n FROM {table} WHERE session_id = ?", sid)[0]["n"])


def write_wal(env: SoongEnv, sid: str, name: str, last_event: str, *, age_days: int = 0) -> Path:
    """A Task WAL whose last record is ``last_event`` (cleanup reads only the last line)."""
    created = (datetime.now(UTC) - timedelta(days=age_days)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    path = env.project / ".soong-agent" / "tasks" / sid / f"{name}.wal.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for seq, event_type in enumerate(["task_created", last_event], start=1):
        lines.append(
            json.dumps(
                {
                    "wal_seq": seq,
                    "session_id": sid,
                    "event_id": new_id("evt_"),
                    "event_type": event_type,
                    "actor_agent_id": "agent_x",
                    "actor_run_id": "run_x",
                    "task_id": name,
                    "step_id": None,
                    "payload": {},
                    "created_at": created,
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- E2 / E3 ----------------------------------------------------------------------------


async def test_replay_session_run_and_paths(soong_env: SoongEnv) -> None:
    """Cases E2, E3."""
    fake = FakeProvider(
        tool_calls(("code.list_dir", {"path": "."}, "call_1")),
        text("first done", chunks=3),
        text("second done"),
    )
    async with open_runtime(soong_env, fake) as rt:
        first = await rt.start("one")
        await collect(first)
        second = await rt.start("two", session_id=first.session_id)
        await collect(second)
        replay = await rt.replay_session(first.session_id)
        only_second = await rt.replay_run(second.run_id)
        bounded = await rt.replay_session(
            first.session_id, from_seq=replay.events[2].seq, to_seq=replay.events[5].seq
        )
        tail = await rt.replay_session(first.session_id, from_seq=replay.events[-2].seq)
        last_node = replay.nodes[-1]
        path = await rt.get_node_path(last_node.node_id)
        for bad in (
            rt.replay_session("sess_20260101_000000_000000000000"),
            rt.replay_run("run_unknown"),
            rt.get_node_path("node_unknown"),
        ):
            with pytest.raises(AgentCoreError) as info:
                await bad
            assert info.value.code == ErrorCode.validation_error
    sid = first.session_id
    # separate collections; nodes by node_seq, events by strictly increasing seq, no deltas
    assert [n.node_seq for n in replay.nodes] == list(range(1, len(replay.nodes) + 1))
    assert [n.role for n in replay.nodes] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    seqs = [e.seq for e in replay.events]
    assert all(s is not None for s in seqs) and seqs == sorted(set(seqs))  # type: ignore[type-var]
    assert not {e.event_type.value for e in replay.events} & {
        "message_delta",
        "model_text_delta",
        "tool_call_delta",
    }
    assert [e.event_id for e in replay.events] == [
        r["event_id"] for r in rows(soong_env, f'SELECT event_id FROM "events_{sid}" ORDER BY seq')
    ]
    assert {r.run_id for r in replay.runs} == {first.run_id, second.run_id} and replay.run_id is None
    assert replay.children == [] and replay.redacted is True
    tool_node = replay.nodes[2]
    assert isinstance(tool_node.content[0], ToolResultBlock) and tool_node.content[0].tool_call_id == "call_1"
    # replay_run: only the second run's nodes and events
    assert only_second.run_id == second.run_id and [r.run_id for r in only_second.runs] == [second.run_id]
    assert {n.run_id for n in only_second.nodes} == {second.run_id} and len(only_second.nodes) == 2
    assert {e.run_id for e in only_second.events} == {second.run_id}
    assert [e.run_seq for e in only_second.events] == list(range(1, len(only_second.events) + 1))
    # inclusive seq bounds filter events only
    lo, hi = replay.events[2].seq, replay.events[5].seq
    assert [e.seq for e in bounded.events] == [e.seq for e in replay.events if lo <= (e.seq or 0) <= hi]  # type: ignore[operator]
    assert len(bounded.events) == 4 and len(bounded.nodes) == len(replay.nodes)
    assert [e.seq for e in tail.events] == seqs[-2:]
    # node path: root first, the node last, following parent_id
    assert path[0].parent_id is None and path[-1].node_id == last_node.node_id
    assert [n.node_id for n in path] == [n.node_id for n in replay.nodes]
    for parent, child in itertools.pairwise(path):
        assert child.parent_id == parent.node_id


# ---- E2: secrets and read-time redaction -----------------------------------------------------


async def test_secret_never_persisted_sensitive_keys_redacted(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case E2."""
    secret = f"sk-test-{secrets.token_hex(16)}"
    monkeypatch.setenv("SOONG_TEST_API_KEY", secret)

    async def leaky(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"api_key": "x", "note": f"the key is {secret}", "nested": {"token": "tkn-visible"}}

    async def big(args: dict[str, Any], ctx: Any) -> str:
        return f"{secret} " + "y" * 70000  # over tools.result_limit_bytes: becomes an artifact

    fake = FakeProvider(
        tool_calls(("demo.leaky", {}, "call_leak"), ("demo.big", {}, "call_big")),
        text(f"echoing {secret}"),
    )
    config = {"model": {"api_key_env": "SOONG_TEST_API_KEY"}}
    async with open_runtime(soong_env, fake, config=config, debug=True) as rt:
        rt.register_tool(tool_def("demo.leaky"), leaky)
        rt.register_tool(tool_def("demo.big"), big)
        run = await rt.start(f"please use {secret}")
        live = await collect(run, debug=True)
        redacted = await rt.replay_session(run.session_id)
        sensitive = await rt.replay_session(run.session_id, include_sensitive=True)
        by_run = await rt.replay_run(run.run_id)
        by_run_sensitive = await rt.replay_run(run.run_id, include_sensitive=True)
    assert run.status == RunStatus.completed
    # never persisted, never delivered
    assert secret.encode() not in db_bytes(soong_env)
    for event in live:
        assert secret not in event.model_dump_json(), event.event_type
    artifact_files = [p for p in (soong_env.home / "sessions").rglob("*") if p.is_file()]
    assert artifact_files and all(secret.encode() not in p.read_bytes() for p in artifact_files)
    for result in (redacted, sensitive, by_run, by_run_sensitive):
        assert secret not in result.model_dump_json()

    def leak_block(result: Any) -> dict[str, Any]:
        node = next(n for n in result.nodes if n.role == "tool" and n.content[0].tool_call_id == "call_leak")
        return node.content[0].content[0].data  # type: ignore[no-any-return]

    assert leak_block(redacted)["api_key"] == "[REDACTED]"
    assert leak_block(redacted)["nested"]["token"] == "[REDACTED]"
    assert leak_block(by_run)["api_key"] == "[REDACTED]"
    assert (
        leak_block(sensitive)["api_key"] == "x" and leak_block(sensitive)["nested"]["token"] == "tkn-visible"
    )
    assert leak_block(by_run_sensitive)["api_key"] == "x"
    assert "[REDACTED]" in leak_block(sensitive)["note"]  # the env secret was redacted at write time
    assert redacted.redacted is True and sensitive.redacted is False
    big_node = next(
        n for n in sensitive.nodes if n.role == "tool" and n.content[0].tool_call_id == "call_big"
    )
    assert any(isinstance(b, ArtifactRefBlock) for b in big_node.content[0].content)  # type: ignore[union-attr]


# ---- E4 / E11: deletion ---------------------------------------------------------------------


async def test_delete_session(soong_env: SoongEnv) -> None:
    """Cases E4, E11."""
    gate = __import__("asyncio").Event()

    async def big(args: dict[str, Any], ctx: Any) -> str:
        return "z" * 70000

    fake = FakeProvider(
        tool_calls(("demo.big", {}, "call_big")),
        hang(gate),
    )
    memory_file = soong_env.write_home("memory/user/likes.md", "# Likes\ntea\n")
    plan_file = soong_env.write_project(".soong-agent/plans/plan.md", "# Plan\n")
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.big"), big)
        run = await rt.start("go")
        sid = run.session_id
        wal = write_wal(soong_env, sid, "work", "task_completed")
        await __import__("asyncio").wait_for(_until(lambda: len(fake.requests) == 2), 5)
        queued = await rt.start("queued", session_id=sid)
        artifact_dir = soong_env.home / "sessions" / sid
        before = {t: count(soong_env, t, sid) for t in ("runs", "agents", "artifacts")}
        assert before["artifacts"] == 1 and artifact_dir.is_dir()
        refused = await rt.delete_session(sid)  # one running, one queued run
        assert not refused.deleted and refused.error is not None and refused.error.code == "session_active"
        await queued.cancel()
        refused_running = await rt.delete_session(sid)
        assert refused_running.error is not None and refused_running.error.code == "session_active"
        assert {t: count(soong_env, t, sid) for t in ("runs", "agents", "artifacts")} == {**before, "runs": 2}
        assert f"nodes_{sid}" in tables(soong_env) and artifact_dir.is_dir()
        gate.set()
        await collect(run)
        nodes_before = len(node_rows(soong_env, sid))
        events_before = int(rows(soong_env, f'SELECT count(*) AS n FROM "events_{sid}"')[0]["n"])
        result = await rt.delete_session(sid)
        assert result.deleted and result.error is None and result.failures == []
        assert result.counts.model_dump() == {
            "nodes": nodes_before,
            "events": events_before,
            "runs": 2,
            "agents": 1,
            "artifacts": 1,
        }
        unknown = await rt.delete_session(sid)
        assert not unknown.deleted and unknown.error is not None and unknown.error.code == "validation_error"
        with pytest.raises(AgentCoreError):
            await rt.replay_session(sid)
    assert f"nodes_{sid}" not in tables(soong_env) and f"events_{sid}" not in tables(soong_env)
    assert all(count(soong_env, t, sid) == 0 for t in ("runs", "agents", "artifacts"))
    assert not rows(soong_env, "SELECT 1 FROM sessions WHERE session_id = ?", sid)
    assert not artifact_dir.exists()
    assert memory_file.read_text() == "# Likes\ntea\n" and plan_file.exists() and wal.exists()


async def _until(predicate: Any) -> None:
    import asyncio

    while not predicate():
        await asyncio.sleep(0.005)


# ----: switch_node ---------------------------------------------------------


async def test_switch_node(soong_env: SoongEnv) -> None:
    import asyncio

    gate = asyncio.Event()
    fake = FakeProvider(
        text("answer one"),
        fail(after_text="broken half"),
        text("answer three"),
        hang(gate),
        text("branch answer"),
    )
    async with open_runtime(soong_env, fake) as rt:
        r1 = await rt.start("question one")
        await collect(r1)
        sid = r1.session_id
        r2 = await rt.start("question two", session_id=sid)
        await collect(r2)
        r3 = await rt.start("question three", session_id=sid)
        await collect(r3)
        ns = node_rows(soong_env, sid)
        first_answer = ns[1]["node_id"]
        failed_node = next(n for n in ns if json.loads(n["metadata_json"] or "{}").get("failed"))
        for bad in (failed_node["node_id"], "node_unknown"):
            with pytest.raises(AgentCoreError) as info:
                await rt.switch_node(sid, bad)
            assert info.value.code == ErrorCode.validation_error
        busy = await rt.start("busy", session_id=sid)
        await _until(lambda: len(fake.requests) == 4)
        with pytest.raises(AgentCoreError) as active:
            await rt.switch_node(sid, first_answer)
        assert active.value.code == ErrorCode.session_active
        queued = await rt.start("queued", session_id=sid)
        await queued.cancel()
        gate.set()
        await collect(busy)
        moved = await rt.switch_node(sid, first_answer)
        assert moved.node_id == first_answer and moved.role == "assistant"
        assert (
            rows(soong_env, "SELECT active_node_id FROM sessions WHERE session_id = ?", sid)[0][0]
            == first_answer
        )
        branch = await rt.start("on a branch", session_id=sid)
        await collect(branch)
    ns = node_rows(soong_env, sid)
    branch_user = next(n for n in ns if n["run_id"] == branch.run_id and n["role"] == "user")
    assert branch_user["parent_id"] == first_answer
    sent = json.dumps([m.model_dump(mode="json") for m in fake.requests[-1].messages])
    assert "question one" in sent and "answer one" in sent
    for abandoned in ("question two", "question three", "answer three", "busy"):
        assert abandoned not in sent
    assert len(ns) == len({n["node_id"] for n in ns})  # abandoned nodes still exist
    assert any("answer three" in n["content_json"] for n in ns)


# ---- E6: large command output goes to a redacted artifact ----------------------------------


async def test_large_command_output_artifact(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Case E6."""
    caplog.set_level(logging.DEBUG, logger="agent_core")
    secret = f"sk-test-{secrets.token_hex(12)}"
    monkeypatch.setenv("SOONG_TEST_API_KEY", secret)
    argv = [sys.executable, "-c", f"print('x'*100000); print('{secret}')"]
    fake = FakeProvider(tool_calls(("code.run_command", {"argv": argv}, "call_cmd")), text("ok"))
    config = {"model": {"api_key_env": "SOONG_TEST_API_KEY"}, "tools": {"stdout_limit_bytes": 1024}}
    permissions = PermissionRecorder.always("allow_once")
    async with open_runtime(soong_env, fake, config=config, permission_callback=permissions) as rt:
        run = await rt.start("run it")
        await collect(run)
    assert run.status == RunStatus.completed
    (request,) = permissions.requests
    assert secret not in request.model_dump_json() and "[REDACTED]" in request.args_summary
    assert all(secret not in record.getMessage() for record in caplog.records)
    sent = json.dumps([m.model_dump(mode="json") for m in fake.requests[1].messages])
    assert secret not in sent  # the model sees the redacted result too
    sid = run.session_id
    tool_node = next(n for n in node_rows(soong_env, sid) if n["role"] == "tool")
    block = json.loads(tool_node["content_json"])[0]
    assert not block["is_error"]
    data = next(b for b in block["content"] if b["type"] == "json")["data"]
    assert data["truncated"] is True and data["stdout_artifact_id"] and len(data["stdout"]) <= 1024 + 200
    artifact = dict(
        rows(soong_env, "SELECT * FROM artifacts WHERE artifact_id = ?", data["stdout_artifact_id"])[0]
    )
    expected = (
        soong_env.home / "sessions" / sid / "artifacts" / artifact["artifact_id"] / artifact["filename"]
    )
    assert Path(artifact["path"]) == expected and expected.is_file()
    content = expected.read_bytes()
    assert b"x" * 1000 in content and secret.encode() not in content and b"[REDACTED]" in content
    assert artifact["run_id"] == run.run_id and artifact["tool_call_id"] == "call_cmd"
    assert secret.encode() not in db_bytes(soong_env)
    assert len(tool_node["content_json"]) < 20000  # a summary, not the full output


# ---- E7: read_file never artifactises -----------------------------------------------------------------


async def test_read_file_large_file_creates_no_artifact(soong_env: SoongEnv) -> None:
    """Case E7."""
    line = "abcdefghij" * 500 + "\n"  # 5001 bytes per line
    soong_env.write_project("big.txt", line * 1000)  # ~5 MB
    fake = FakeProvider(tool_calls(("code.read_file", {"path": "big.txt"}, "call_read")), text("read"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("read it")
        await collect(run)
    assert run.status == RunStatus.completed
    result = next(n for n in node_rows(soong_env, run.session_id) if n["role"] == "tool")
    block = json.loads(result["content_json"])[0]
    data = next(b for b in block["content"] if b["type"] == "json")["data"]
    assert data["truncated"] is True and data["truncated_lines"]
    assert all(len(line_text.encode()) <= 4096 for line_text in data["content"].splitlines())
    assert rows(soong_env, "SELECT count(*) AS n FROM artifacts")[0]["n"] == 0
    # the huge result is only shortened in the prompt view, pointing the model back at the file
    sent = json.dumps([m.model_dump(mode="json") for m in fake.requests[1].messages])
    assert "code.read_file output shortened for this prompt" in sent and "artifact_" not in sent
    assert not (soong_env.home / "sessions").exists() or not list(
        (soong_env.home / "sessions").rglob("*.txt")
    )


# ---- cleanup ---------------------------------------------------------------------------


async def test_cleanup_project_tasks(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as rt:
        sid = "sess_20260101_000000_aaaaaaaaaaaa"
        done = write_wal(soong_env, sid, "done", "task_completed", age_days=3)
        failed = write_wal(soong_env, sid, "failed", "task_failed", age_days=3)
        cancelled = write_wal(soong_env, sid, "cancelled", "task_cancelled", age_days=3)
        active = write_wal(soong_env, sid, "active", "task_step_started", age_days=3)
        default = await rt.cleanup_project_tasks(soong_env.project)
        assert default.dry_run and default.deleted == [] and default.freed_bytes == 0
        assert [(Path(c.path), c.reason) for c in default.candidates] == [(done, "completed_task_wal")]
        with_failed = await rt.cleanup_project_tasks(soong_env.project, include_failed=True)
        assert {Path(c.path) for c in with_failed.candidates} == {done, failed}
        recent = await rt.cleanup_project_tasks(
            soong_env.project, include_failed=True, older_than=datetime.now(UTC) - timedelta(days=5)
        )
        assert recent.candidates == []
        assert all(p.exists() for p in (done, failed, cancelled, active))
        real = await rt.cleanup_project_tasks(soong_env.project, dry_run=False, include_failed=True)
        assert {Path(c.path) for c in real.deleted} == {done, failed} and real.freed_bytes > 0
        assert not done.exists() and not failed.exists() and cancelled.exists() and active.exists()


async def test_cleanup_artifacts_and_partial_failure(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def big(args: dict[str, Any], ctx: Any) -> str:
        return "q" * 70000

    fake = FakeProvider(tool_calls(("demo.big", {}, "call_big")), text("ok"))
    async with open_runtime(soong_env, fake, debug=True) as rt:
        rt.register_tool(tool_def("demo.big"), big)
        run = await rt.start("go")
        await collect(run)
        kinds = {
            r["artifact_id"]: json.loads(r["metadata_json"])["kind"]
            for r in rows(soong_env, "SELECT artifact_id, metadata_json FROM artifacts")
        }
        debug_ids = {
            a for a, k in kinds.items() if k in {"context_report", "provider_raw", "traceback", "debug"}
        }
        ordinary = {a for a, k in kinds.items() if a not in debug_ids}
        assert debug_ids and ordinary
        dry = await rt.cleanup_artifacts()
        assert dry.dry_run and {c.id for c in dry.candidates} == debug_ids and dry.deleted == []
        assert all(c.reason == "debug_artifact" for c in dry.candidates)
        assert all(Path(r["path"]).exists() for r in rows(soong_env, "SELECT path FROM artifacts"))
        with_all = await rt.cleanup_artifacts(session_id=run.session_id, include_all=True)
        assert {c.id for c in with_all.candidates} == debug_ids | ordinary
        assert {c.reason for c in with_all.candidates if c.id in ordinary} == {"include_all"}
        future = await rt.cleanup_artifacts(older_than=datetime.now(UTC) + timedelta(hours=1))
        past = await rt.cleanup_artifacts(older_than=datetime.now(UTC) - timedelta(hours=1))
        assert {c.id for c in future.candidates} == debug_ids and past.candidates == []
        victim = sorted(debug_ids)[0]
        victim_path = Path(
            rows(soong_env, "SELECT path FROM artifacts WHERE artifact_id = ?", victim)[0]["path"]
        )
        real_unlink = cleanup_module.unlink_path

        def failing(path: Path) -> None:
            if path == victim_path:
                raise OSError("injected unlink failure")
            real_unlink(path)

        monkeypatch.setattr(cleanup_module, "unlink_path", failing)
        deleted = await rt.cleanup_artifacts(dry_run=False)
        assert deleted.partial_failure and [f.item.id for f in deleted.failures] == [victim]
        assert deleted.failures[0].error.code and {c.id for c in deleted.deleted} == debug_ids - {victim}
        remaining = {r["artifact_id"] for r in rows(soong_env, "SELECT artifact_id FROM artifacts")}
        assert remaining == ordinary | {victim} and victim_path.exists()
        replay = await rt.replay_session(run.session_id)  # ordinary artifacts stay inspectable
        assert {a.artifact_id for a in replay.artifacts} >= ordinary


# ---- ---------------------------------------------------------------------------


async def test_corrupt_task_wal_does_not_break_replay(soong_env: SoongEnv) -> None:
    fake = FakeProvider(text("hi"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await collect(run)
        wal = soong_env.project / ".soong-agent" / "tasks" / run.session_id / "broken.wal.jsonl"
        wal.parent.mkdir(parents=True)
        wal.write_text('{"wal_seq": 1, "event_type": "task_cre\n{not json\n', encoding="utf-8")
        replay = await rt.replay_session(run.session_id)
        assert [n.role for n in replay.nodes] == ["user", "assistant"]
        (view,) = [v for v in replay.tasks if Path(v.wal_path) == wal]
        assert view.task is None and view.error is not None
        assert view.error.code == "task_wal_unavailable" and view.error.message
        cleanup = await rt.cleanup_project_tasks(soong_env.project)
        assert [f.error.code for f in cleanup.failures] == ["task_wal_unavailable"]
        assert wal.exists()


# ---- debug tracebacks ------------------------------------------------------------------------


async def test_debug_boundary_error_stores_traceback_artifact(soong_env: SoongEnv) -> None:
    from tests.integration.test_runtime_queue_cancel import raising_turn

    fake = FakeProvider(raising_turn(RuntimeError("adapter exploded")))
    async with open_runtime(soong_env, fake, debug=True) as rt:
        run = await rt.start("hello")
        events = await collect(run, debug=True)
    error = next(e for e in events if e.event_type.value == "error")
    artifact_id = error.data["details"]["traceback_artifact_id"]
    row = dict(rows(soong_env, "SELECT * FROM artifacts WHERE artifact_id = ?", artifact_id)[0])
    assert json.loads(row["metadata_json"])["kind"] == "traceback"
    body = Path(row["path"]).read_text()
    assert "Traceback" in body and "adapter exploded" in body
    assert "Traceback" not in json.dumps(error.data)
    assert run.error is not None and run.error.details["traceback_artifact_id"] == artifact_id


async def test_no_traceback_artifact_without_debug(soong_env: SoongEnv) -> None:
    from tests.integration.test_runtime_queue_cancel import raising_turn

    fake = FakeProvider(raising_turn(RuntimeError("adapter exploded")))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await collect(run)
    assert run.error is not None and "traceback_artifact_id" not in run.error.details
    assert rows(soong_env, "SELECT count(*) AS n FROM artifacts")[0]["n"] == 0


# ---- E2 child part: child transcripts are not expanded ------------------------------------


async def test_replay_keeps_child_summaries_not_transcripts(soong_env: SoongEnv) -> None:
    """Case E2."""
    child_reply = (
        'Child transcript text.\n```json\n{"status": "completed", "summary": "child summary ok"}\n```'
    )

    def route(request: Any) -> Any:
        if request.metadata.get("agent_type") == "sub":
            return text(child_reply)
        return None

    fake = FakeProvider(
        tool_calls(("agent.create_sub_agent", {"task": "look at the child secret word"}, "call_child")),
        text("parent done"),
    ).route(route)
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("delegate")
        events = await collect(run)
        replay = await rt.replay_session(run.session_id)
        (child_id,) = [e.data["child_run_id"] for e in events if e.event_type.value == "child_agent_created"]
        child_replay = await rt.replay_run(child_id)
        inspected = await run.inspect_child(child_id)
    assert run.status == RunStatus.completed, run.error
    assert {n.agent_id for n in replay.nodes} == {run.agent_id}
    assert "Child transcript text" not in replay.model_dump_json().replace("child summary ok", "")
    assert {e.agent_id for e in replay.events} <= {run.agent_id, None}
    names = {e.event_type.value for e in replay.events}
    assert {"child_agent_created", "child_agent_completed"} <= names
    (child,) = replay.children
    assert child.child_run_id == child_id and child.agent_type == "sub" and child.status == "completed"
    assert child.result_summary == "child summary ok"
    # the child's own transcript is available through replay_run / inspect_child
    assert any("Child transcript text" in json.dumps(n.model_dump(mode="json")) for n in child_replay.nodes)
    assert {n.run_id for n in inspected.nodes} == {child_id} and inspected.run.run_id == child_id
    assert inspected.result is not None and inspected.result.summary == "child summary ok"
    parent_request = json.dumps([m.model_dump(mode="json") for m in fake.requests[-1].messages])
    assert "child summary ok" in parent_request and "Child transcript text" not in parent_request


async def test_cleanup_and_delete_artifact_argument_errors(soong_env: SoongEnv) -> None:
    async with open_runtime(soong_env, FakeProvider()) as rt:
        with pytest.raises(AgentCoreError) as missing:
            await rt.cleanup_project_tasks(soong_env.project / "does-not-exist")
        assert missing.value.code == ErrorCode.config_error
        file_target = soong_env.write_project("src/a.py", "x = 1\n")
        assert (await rt.cleanup_project_tasks(file_target)).candidates == []  # a file means its parent
        unknown = await rt.delete_artifact("artifact_20260101_000000_000000000000")
        assert unknown.partial_failure and unknown.failures[0].error.code == "file_not_found"
        with pytest.raises(AgentCoreError) as bad_session:
            await rt.cleanup_artifacts(session_id="x; DROP TABLE artifacts")
        assert bad_session.value.code == ErrorCode.validation_error


async def test_default_replay_keeps_token_counters_readable(soong_env: SoongEnv) -> None:
    """Case E2."""
    from agent_core import ContextBuildReport

    async def creds(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
        return {"token": "abc123", "access_tokens": ["t1"], "max_tokens": 5, "password": 1234}

    fake = FakeProvider(tool_calls(("demo.creds", {}, "call_c")), text("ok"))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.creds"), creds)
        run = await rt.start("hello")
        await collect(run)
        replay = await rt.replay_session(run.session_id)
    completed = [e for e in replay.events if e.event_type.value == "model_completed"]
    assert completed and all(e.data["usage"]["input_tokens"] == 10 for e in completed)
    done = next(e for e in replay.events if e.event_type.value == "run_completed")
    assert done.data["usage"]["total_tokens"] == 15 + 12
    for event in replay.events:
        if event.event_type.value == "context_built":
            ContextBuildReport.model_validate(event.data)  # still a valid report after redaction
    assistant = next(n for n in replay.nodes if n.role == "assistant")
    assert assistant.metadata["usage"]["output_tokens"] == 5
    data = next(n for n in replay.nodes if n.role == "tool").content[0].content[0].data  # type: ignore[union-attr]
    assert data == {
        "token": "[REDACTED]",
        "access_tokens": "[REDACTED]",
        "max_tokens": 5,
        "password": "[REDACTED]",
    }


async def test_replay_session_leaves_the_garbage_collector_alone(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library does not switch the host's collector off or freeze its objects, not even for a while
    (issue 35): a replay, also one that fails, calls none of gc's state changers."""
    calls: list[str] = []
    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold"):
        monkeypatch.setattr(gc, name, lambda *args, _name=name: calls.append(_name))
    fake = FakeProvider(text("ok"))
    async with open_runtime(soong_env, fake) as rt:
        run = await rt.start("hello")
        await collect(run)
        replay = await rt.replay_session(run.session_id)
        assert replay.nodes
        with pytest.raises(AgentCoreError) as err:
            await rt.replay_session("sess_20200101_000000_dead")
        assert err.value.code == ErrorCode.validation_error
    assert calls == []


# ---- docs/storage.md#deleting-and-cleaning-up: a deleted artifact renders as a marker ----------------------


async def test_deleted_artifact_renders_as_deleted_marker_in_the_next_request(soong_env: SoongEnv) -> None:
    async def big(args: dict[str, Any], ctx: Any) -> str:
        return "y" * 70000  # over tools.result_limit_bytes: becomes an artifact

    fake = FakeProvider(tool_calls(("demo.big", {}, "call_big")), text("first"), text("second"))
    async with open_runtime(soong_env, fake) as rt:
        rt.register_tool(tool_def("demo.big"), big)
        first = await rt.start("make something big")
        await collect(first)
        replay = await rt.replay_session(first.session_id, include_sensitive=True)
        big_node = next(n for n in replay.nodes if n.role == "tool")
        ref = next(b for b in big_node.content[0].content if isinstance(b, ArtifactRefBlock))  # type: ignore[union-attr]
        before = json.dumps([m.model_dump(mode="json") for m in fake.requests[-1].messages])
        assert f"[artifact {ref.artifact_id} (deleted)]" not in before
        deleted = await rt.delete_artifact(ref.artifact_id)
        assert [item.id for item in deleted.deleted] == [ref.artifact_id]
        second = await rt.start("and now?", session_id=first.session_id)
        await collect(second)
    assert second.status == RunStatus.completed
    request = fake.requests[-1]
    tool_message = next(m for m in request.messages if m.role == "tool")
    rendered = [b for b in tool_message.content[0].content]  # type: ignore[union-attr]
    assert not any(isinstance(b, ArtifactRefBlock) for b in rendered)
    assert any(getattr(b, "text", "") == f"[artifact {ref.artifact_id} (deleted)]" for b in rendered)
