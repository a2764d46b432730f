"""cleanup_artifacts and cleanup_task_wals (docs/storage.md#deleting-and-cleaning-up; E5, E10, E12)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_core._artifacts import cleanup as cleanup_mod
from agent_core._artifacts.cleanup import cleanup_artifacts
from agent_core._tasks import wal_cleanup as wal_cleanup_mod
from agent_core._tasks.wal_cleanup import cleanup_task_wals, read_last_complete_line
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.types.base import format_ts_ms, parse_ts
from tests.fixtures.storage_env import StoreEnv, opened_store

DEBUG = ["provider_raw", "hook_log", "traceback", "context_report", "debug"]
ORDINARY = ["tool_output", "child_output", "compact", "attachment", "context_degradation"]


async def _make_artifacts(env: StoreEnv, sid: str, kinds: list[str], size: int = 10) -> dict[str, str]:
    ids = {}
    for kind in kinds:
        ref = await env.artifacts.create("x" * size, filename=f"{kind}.txt", kind=kind, session_id=sid)
        ids[kind] = ref.artifact_id
    return ids


def _exists(env: StoreEnv, artifact_id: str) -> bool:
    return any(env.home.glob(f"sessions/*/artifacts/{artifact_id}/*"))


async def test_default_cleanup_is_a_dry_run_of_debug_kinds(tmp_path: Path) -> None:
    """Case E5."""
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        other, _ = await env.new_session()
        ids = await _make_artifacts(env, sid, DEBUG + ORDINARY)
        other_ids = await _make_artifacts(env, other, ["debug", "tool_output"])
        dry = await cleanup_artifacts(env.storage)
        assert dry.dry_run and dry.deleted == [] and dry.freed_bytes == 0 and not dry.partial_failure
        assert {c.id for c in dry.candidates} == {ids[k] for k in DEBUG} | {other_ids["debug"]}
        assert {c.reason for c in dry.candidates} == {"debug_artifact"}
        assert all(
            c.kind == "artifact" and c.size_bytes == 10 and Path(c.path).is_file() for c in dry.candidates
        )
        assert all(_exists(env, i) for i in [*ids.values(), *other_ids.values()]), "dry run deletes nothing"

        scoped = await cleanup_artifacts(env.storage, session_id=sid)
        assert {c.id for c in scoped.candidates} == {ids[k] for k in DEBUG}

        real = await cleanup_artifacts(env.storage, session_id=sid, dry_run=False)
        assert {d.id for d in real.deleted} == {ids[k] for k in DEBUG} and real.freed_bytes == 50
        assert not any(_exists(env, ids[k]) for k in DEBUG)
        assert all(_exists(env, ids[k]) for k in ORDINARY)
        assert {r.artifact_id for r in await env.storage.list_artifacts(session_id=sid)} == {
            ids[k] for k in ORDINARY
        }

        everything = await cleanup_artifacts(env.storage, session_id=sid, dry_run=False, include_all=True)
        assert {d.id for d in everything.deleted} == {ids[k] for k in ORDINARY}
        assert {d.reason for d in everything.deleted} == {"include_all"}
        assert await env.storage.list_artifacts(session_id=sid) == []
        assert all(_exists(env, i) for i in other_ids.values()), "other sessions untouched"


async def test_older_than_and_max_bytes(tmp_path: Path) -> None:
    """Case E5."""
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        sizes = [100, 200, 300, 400]
        ids = []
        for size in sizes:
            ref = await env.artifacts.create(
                "d" * size, filename="r.json", kind="provider_raw", session_id=sid
            )
            ids.append(ref.artifact_id)
        records = {r.artifact_id: r for r in await env.storage.list_artifacts(session_id=sid)}
        cutoff = parse_ts(records[ids[2]].created_at)
        older = await cleanup_artifacts(env.storage, older_than=cutoff)
        assert [c.id for c in older.candidates] == ids[:2], "created at or after the cutoff is never selected"
        future = await cleanup_artifacts(env.storage, older_than=datetime.now(UTC) + timedelta(days=1))
        assert [c.id for c in future.candidates] == ids
        past = await cleanup_artifacts(env.storage, older_than=datetime(2000, 1, 1))  # naive = UTC
        assert past.candidates == []

        # total 1000, keep <= 600: dropping 100 and 200 leaves 700 > 600, so 300 goes too
        limited = await cleanup_artifacts(env.storage, max_bytes=600)
        assert [c.id for c in limited.candidates] == ids[:3]
        assert [c.id for c in (await cleanup_artifacts(env.storage, max_bytes=700)).candidates] == ids[:2]
        assert (await cleanup_artifacts(env.storage, max_bytes=1000)).candidates == []
        deleted = await cleanup_artifacts(env.storage, max_bytes=0, dry_run=False)
        assert [d.id for d in deleted.deleted] == ids and deleted.freed_bytes == 1000
        with pytest.raises(AgentCoreError) as info:
            await cleanup_artifacts(env.storage, max_bytes=-1)
        assert info.value.code == ErrorCode.validation_error


async def test_injected_unlink_failure_is_a_partial_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        ids = await _make_artifacts(env, sid, ["debug", "traceback", "hook_log"])
        victim = await env.artifacts.get(ids["traceback"])
        real_unlink = cleanup_mod.unlink_path

        def flaky(path: Path) -> None:
            if path == Path(victim.path):
                raise OSError(5, "Input/output error (injected)")
            real_unlink(path)

        monkeypatch.setattr(cleanup_mod, "unlink_path", flaky)
        result = await cleanup_artifacts(env.storage, dry_run=False)
        assert result.partial_failure is True
        assert [f.item.id for f in result.failures] == [ids["traceback"]]
        assert result.failures[0].error.code == ErrorCode.storage_error
        assert "Input/output error" in result.failures[0].error.message
        assert {d.id for d in result.deleted} == {ids["debug"], ids["hook_log"]}
        assert result.freed_bytes == 20
        assert Path(victim.path).exists() and await env.storage.get_artifact(ids["traceback"]) is not None


async def test_directory_in_place_of_file_is_reported(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        ids = await _make_artifacts(env, sid, ["debug"])
        record = await env.artifacts.get(ids["debug"])
        path = Path(record.path)
        path.unlink()
        path.mkdir()
        (path / "inner").write_text("keep")
        result = await cleanup_artifacts(env.storage, dry_run=False)
        assert result.partial_failure and result.deleted == [] and result.failures[0].item.id == ids["debug"]
        assert (path / "inner").exists()


def _wal(root: Path, session: str, name: str, *types: str, created: datetime | None = None) -> Path:
    folder = root / session
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.wal.jsonl"
    stamp = format_ts_ms(created or datetime.now(UTC))
    lines = []
    for i, event_type in enumerate(types, start=1):
        record = {
            "wal_seq": i,
            "session_id": session,
            "event_id": f"evt_{i}",
            "event_type": event_type,
            "actor_agent_id": "agent_o",
            "actor_run_id": "run_o",
            "task_id": name,
            "step_id": None,
            "payload": {"pad": "p" * 50},
            "created_at": stamp,
        }
        lines.append(json.dumps(record) + "\n")
    path.write_text("".join(lines))
    return path


@pytest.fixture
def wal_root(tmp_path: Path) -> Path:
    root = tmp_path / "project" / ".soong-agent" / "tasks"
    old = datetime(2026, 1, 1, tzinfo=UTC)
    _wal(root, "sess_a", "done", "task_created", "task_running", "task_completed", created=old)
    _wal(root, "sess_a", "broke", "task_created", "task_failed", created=old)
    _wal(root, "sess_a", "stopped", "task_created", "task_cancelled", created=old)
    _wal(root, "sess_a", "active", "task_created", "task_running", "task_step_completed", created=old)
    _wal(root, "sess_b", "fresh-done", "task_created", "task_completed")
    return root


async def test_task_wal_cleanup(wal_root: Path) -> None:
    """Case E10."""
    before = {p: p.read_bytes() for p in wal_root.rglob("*.wal.jsonl")}
    dry = await cleanup_task_wals(wal_root)
    assert dry.dry_run and dry.deleted == [] and dry.failures == [] and not dry.partial_failure
    assert sorted((Path(c.path).name, c.reason, c.id) for c in dry.candidates) == [
        ("done.wal.jsonl", "completed_task_wal", "done"),
        ("fresh-done.wal.jsonl", "completed_task_wal", "fresh-done"),
    ]
    assert all(c.kind == "task_wal" and c.size_bytes > 0 for c in dry.candidates)
    assert {p: p.read_bytes() for p in wal_root.rglob("*.wal.jsonl")} == before

    flags = await cleanup_task_wals(wal_root, include_failed=True, include_cancelled=True)
    assert sorted(Path(c.path).stem for c in flags.candidates) == [
        "broke.wal", "done.wal", "fresh-done.wal", "stopped.wal",
    ]  # fmt: skip
    only_failed = await cleanup_task_wals(wal_root, include_failed=True)
    assert {c.reason for c in only_failed.candidates} == {"completed_task_wal", "failed_task_wal"}

    aged = await cleanup_task_wals(wal_root, older_than=datetime(2026, 2, 1, tzinfo=UTC))
    assert [Path(c.path).name for c in aged.candidates] == ["done.wal.jsonl"]

    real = await cleanup_task_wals(wal_root, dry_run=False, include_failed=True)
    assert sorted(Path(d.path).name for d in real.deleted) == [
        "broke.wal.jsonl",
        "done.wal.jsonl",
        "fresh-done.wal.jsonl",
    ]
    assert real.freed_bytes == sum(d.size_bytes for d in real.deleted) > 0
    remaining = sorted(p.name for p in wal_root.rglob("*.wal.jsonl"))
    assert remaining == ["active.wal.jsonl", "stopped.wal.jsonl"]
    assert not (wal_root / "sess_b").exists(), "an emptied session directory is removed"
    assert (wal_root / "sess_a").is_dir()


async def test_active_and_unreadable_wals_are_never_candidates(tmp_path: Path, wal_root: Path) -> None:
    """Case E10."""
    done = wal_root / "sess_a" / "done.wal.jsonl"
    result = await cleanup_task_wals(wal_root, active_wal_paths={done})
    assert done not in {Path(c.path) for c in result.candidates}
    corrupt = wal_root / "sess_c" / "bad.wal.jsonl"
    corrupt.parent.mkdir()
    corrupt.write_text(
        '{"event_type": "task_completed", "created_at": "2026-01-01T00:00:00.000Z"}\nnot json\n'
    )
    empty = wal_root / "sess_c" / "empty.wal.jsonl"
    empty.write_text("")
    as_dir = wal_root / "sess_c" / "dir.wal.jsonl"
    as_dir.mkdir()
    result = await cleanup_task_wals(wal_root, dry_run=False)
    failed = sorted(Path(f.item.path).name for f in result.failures)
    assert failed == ["bad.wal.jsonl", "dir.wal.jsonl", "empty.wal.jsonl"]
    assert {f.error.code for f in result.failures} == {ErrorCode.task_wal_unavailable}
    assert result.partial_failure and corrupt.exists() and empty.exists()
    assert sorted(Path(d.path).name for d in result.deleted) == ["done.wal.jsonl", "fresh-done.wal.jsonl"]
    missing = await cleanup_task_wals(tmp_path / "nowhere")
    assert missing.candidates == [] and missing.failures == []


async def test_torn_tail_uses_last_complete_line_and_unlink_failure_is_reported(
    wal_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case E10."""
    torn = wal_root / "sess_a" / "done.wal.jsonl"
    with torn.open("a") as fh:
        fh.write('{"wal_seq": 9, "event_type": "task_reop')  # an unterminated, torn final write
    assert json.loads(read_last_complete_line(torn) or b"")["event_type"] == "task_completed"

    def refuse(path: Path) -> None:
        raise OSError(16, "Device or resource busy (injected)")

    monkeypatch.setattr(wal_cleanup_mod, "unlink_path", refuse)
    result = await cleanup_task_wals(wal_root, dry_run=False)
    assert result.partial_failure and result.deleted == [] and result.freed_bytes == 0
    assert {Path(f.item.path).name for f in result.failures} == {"done.wal.jsonl", "fresh-done.wal.jsonl"}
    assert all(f.error.code == ErrorCode.storage_error for f in result.failures)
    assert torn.exists()


def test_read_last_complete_line_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "x.wal.jsonl"
    path.write_bytes(b"a" * 50 + b"\n" + b"b" * 30 + b"\n")
    assert read_last_complete_line(path, chunk=7) == b"b" * 30
    path.write_bytes(b"only line\n")
    assert read_last_complete_line(path, chunk=3) == b"only line"
    path.write_bytes(b"no newline")
    assert read_last_complete_line(path) is None


async def test_cleanup_never_touches_memory(tmp_path: Path, wal_root: Path) -> None:
    """Case E12."""
    async with opened_store(tmp_path) as env:
        memory = env.home / "memory"
        memory.mkdir(parents=True)
        (memory / "MEMORY.md").write_text("# Memory\n- [a](a.md)\n")
        (memory / "a.md").write_text("---\nname: a\n---\nfact\n")
        snapshot = {p: p.read_bytes() for p in memory.rglob("*")}
        sid, _ = await env.new_session()
        await _make_artifacts(env, sid, DEBUG + ORDINARY)
        result = await cleanup_artifacts(env.storage, dry_run=False, include_all=True)
        assert len(result.deleted) == 10
        await cleanup_task_wals(wal_root, dry_run=False, include_failed=True, include_cancelled=True)
        assert {p: p.read_bytes() for p in memory.rglob("*")} == snapshot
