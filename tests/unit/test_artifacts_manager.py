"""The artifact store: layout, atomic writes, redaction, registry rows, deletion (docs/storage.md#artifacts,
docs/storage.md#deleting-and-cleaning-up)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core._artifacts import cleanup as cleanup_mod
from agent_core._artifacts.manager import sanitize_filename
from agent_core._storage.drafts import NodeDraft
from agent_core._storage.sqlite import StorageManager
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.types.content import ArtifactRefBlock
from tests.fixtures.storage_env import db_bytes, opened_store, set_test_secret


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


async def test_create_text_artifact_layout_row_and_redaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        text = "line 1\n" + f"token={secret}\n" * 3
        ref = await env.artifacts.create(
            text,
            filename="std out.txt",
            summary=f"summary {secret}",
            kind="tool_output",
            session_id=sid,
            agent_id=aid,
            run_id=rid,
            tool_call_id="call_1",
            metadata={"source": "code.run_command", "note": secret},
        )
        assert isinstance(ref, ArtifactRefBlock) and ref.mime_type == "text/plain"
        assert ref.summary == "summary [REDACTED]"
        record = await env.artifacts.get(ref.artifact_id)
        expected = env.home / "sessions" / sid / "artifacts" / ref.artifact_id / "std_out.txt"
        assert Path(record.path) == expected and Path(record.path).is_absolute()
        assert record.filename == "std_out.txt"
        assert (record.session_id, record.agent_id, record.run_id, record.tool_call_id) == (
            sid,
            aid,
            rid,
            "call_1",
        )
        body = expected.read_bytes()
        assert secret.encode() not in body and body.count(b"[REDACTED]") == 3
        assert record.size_bytes == len(body)
        meta = json.loads(record.metadata_json or "{}")
        assert meta == {
            "source": "code.run_command",
            "note": "[REDACTED]",
            "kind": "tool_output",
            "redacted": True,
        }
        assert await env.artifacts.read_bytes(ref.artifact_id) == body
        assert _files(expected.parent) == [expected], "no temp file is left behind"
        ref_view = await env.artifacts.get_ref(ref.artifact_id)
        assert ref_view.metadata["kind"] == "tool_output" and ref_view.size_bytes == len(body)
    assert secret.encode() not in db_bytes(env.db_path)


async def test_binary_bytes_are_stored_as_is_and_utf8_bytes_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        png = b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe" + bytes(range(256))
        ref = await env.artifacts.create(png, filename="shot.png", kind="attachment", session_id=sid)
        record = await env.artifacts.get(ref.artifact_id)
        assert Path(record.path).read_bytes() == png and record.mime_type == "image/png"
        assert json.loads(record.metadata_json or "{}")["redacted"] is False
        text_ref = await env.artifacts.create(
            f"out {secret}".encode(), filename="log", kind="tool_output", session_id=sid
        )
        text_record = await env.artifacts.get(text_ref.artifact_id)
        assert Path(text_record.path).read_bytes() == b"out [REDACTED]"
        assert text_record.mime_type == "text/plain"


async def test_json_artifact_is_compact_utf8_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        data = {"rows": [{"k": "ü"}, {"k": secret}], "n": 2}
        ref = await env.artifacts.create(data, filename="data.json", kind="child_output", session_id=sid)
        raw = await env.artifacts.read_bytes(ref.artifact_id)
        assert json.loads(raw) == {"rows": [{"k": "ü"}, {"k": "[REDACTED]"}], "n": 2}
        assert raw == '{"rows":[{"k":"ü"},{"k":"[REDACTED]"}],"n":2}'.encode()
        assert ref.mime_type == "application/json"
        with pytest.raises(AgentCoreError) as info:
            await env.artifacts.create({"x": object()}, filename="d.json", kind="debug", session_id=sid)
        assert info.value.code == ErrorCode.validation_error


async def test_invalid_kind_and_session_are_rejected(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        for kwargs in ({"kind": "nonsense", "session_id": sid}, {"kind": "debug", "session_id": "../../etc"}):
            with pytest.raises(AgentCoreError) as info:
                await env.artifacts.create("x", filename="a.txt", **kwargs)
            assert info.value.code == ErrorCode.validation_error
        assert _files(env.home / "sessions") == []


async def test_failed_registry_insert_removes_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()

        async def broken_insert(self: StorageManager, record: object) -> None:
            raise StorageError(ErrorCode.storage_error, "insert failed (injected)")

        monkeypatch.setattr(StorageManager, "insert_artifact", broken_insert)
        with pytest.raises(StorageError):
            await env.artifacts.create("payload", filename="a.txt", kind="debug", session_id=sid)
        assert _files(env.home / "sessions" / sid) == []
        assert list((env.home / "sessions" / sid / "artifacts").iterdir()) == []
        assert env.query("SELECT COUNT(*) FROM artifacts") == [(0,)]


async def test_register_file_copies_and_leaves_the_original(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    source = tmp_path / "report.csv"
    source.write_text(f"a,b\n1,{secret}\n")
    original = source.read_bytes()
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        ref = await env.artifacts.register_file(source, session_id=sid, agent_id=aid, summary="csv")
        record = await env.artifacts.get(ref.artifact_id)
        assert record.filename == "report.csv" and record.mime_type == "text/csv"
        assert json.loads(record.metadata_json or "{}")["kind"] == "tool_output"
        assert Path(record.path).read_bytes() == b"a,b\n1,[REDACTED]\n"
        assert source.read_bytes() == original
        with pytest.raises(AgentCoreError) as info:
            await env.artifacts.register_file(tmp_path / "missing.txt", session_id=sid)
        assert info.value.code == ErrorCode.file_not_found
        with pytest.raises(AgentCoreError) as info:
            await env.artifacts.register_file(tmp_path, session_id=sid)
        assert info.value.code == ErrorCode.validation_error


async def test_get_and_read_unknown_or_missing_artifact(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        with pytest.raises(AgentCoreError) as info:
            await env.artifacts.get("artifact_unknown")
        assert info.value.code == ErrorCode.file_not_found
        ref = await env.artifacts.create("x", filename="a.txt", kind="debug", session_id=sid)
        Path((await env.artifacts.get(ref.artifact_id)).path).unlink()
        with pytest.raises(AgentCoreError) as info:
            await env.artifacts.read_bytes(ref.artifact_id)
        assert info.value.code == ErrorCode.file_not_found


async def test_delete_artifact_removes_file_and_row_and_node_still_loads(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        ref = await env.artifacts.create("big output", filename="out.txt", kind="tool_output", session_id=sid)
        node = NodeDraft(agent_id=aid, role="tool", content=[ref])
        await env.storage.append(sid, nodes=[node])
        record = await env.artifacts.get(ref.artifact_id)
        result = await env.artifacts.delete(ref.artifact_id)
        assert result.dry_run is False and not result.partial_failure and result.failures == []
        assert [i.id for i in result.deleted] == [ref.artifact_id] and result.freed_bytes == len(
            b"big output"
        )
        assert not Path(record.path).exists() and not Path(record.path).parent.exists()
        assert await env.storage.get_artifact(ref.artifact_id) is None
        loaded = await env.storage.get_node(sid, node.node_id)
        assert loaded is not None and loaded.content == [ref]
        unknown = await env.artifacts.delete("artifact_unknown")
        assert unknown.partial_failure and unknown.deleted == []
        assert unknown.failures[0].error.code == ErrorCode.file_not_found
        assert unknown.failures[0].item.id == "artifact_unknown"


async def test_delete_failure_is_reported_not_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        ref = await env.artifacts.create("x", filename="a.txt", kind="debug", session_id=sid)

        def refuse(path: Path) -> None:
            raise OSError(5, "Input/output error (injected)")

        monkeypatch.setattr(cleanup_mod, "unlink_path", refuse)
        result = await env.artifacts.delete(ref.artifact_id)
        assert result.partial_failure and result.deleted == [] and result.freed_bytes == 0
        assert result.failures[0].error.code == ErrorCode.storage_error
        assert result.failures[0].error.redacted is True
        assert await env.storage.get_artifact(ref.artifact_id) is not None, "the row stays for a retry"


async def test_delete_session_files(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        keep, _ = await env.new_session()
        await env.artifacts.create("x", filename="a.txt", kind="debug", session_id=sid)
        kept = await env.artifacts.create("y", filename="b.txt", kind="debug", session_id=keep)
        assert await env.artifacts.delete_session_files(sid) == []
        assert not (env.home / "sessions" / sid).exists()
        assert Path((await env.artifacts.get(kept.artifact_id)).path).exists()
        assert await env.artifacts.delete_session_files(sid) == [], "a missing directory is fine"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("stdout.txt", "stdout.txt"),
        ("../../etc/passwd", "passwd"),
        ("C:\\temp\\x y.log", "x_y.log"),
        (".env", "_env"),
        ("..", "output.txt"),
        ("", "output.txt"),
        (None, "output.txt"),
        ("ünï©ode.md", "_n__ode.md"),
    ],
)
def test_sanitize_filename(name: str | None, expected: str) -> None:
    assert sanitize_filename(name) == expected


def test_sanitize_filename_length_keeps_extension() -> None:
    long = sanitize_filename("a" * 300 + ".json")
    assert len(long) == 128 and long.endswith(".json")
    assert len(sanitize_filename("b" * 300)) == 128


async def test_artifact_of_unknown_session_is_rejected_and_leaves_no_file(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        with pytest.raises(AgentCoreError) as info:
            await env.artifacts.create("x", filename="a.txt", kind="debug", session_id="sess_missing")
        assert info.value.code == ErrorCode.validation_error
        assert _files(env.home / "sessions") == []
        assert env.query("SELECT COUNT(*) FROM artifacts") == [(0,)]
