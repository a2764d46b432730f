"""Dual-threshold artifactisation of json blocks (docs/storage.md#automatic-artifactisation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_core._artifacts.artifactize import (
    artifactize_json_block,
    compact_json,
    estimate_tokens,
    json_summary,
    should_artifactize,
)
from agent_core.types.content import JsonBlock
from tests.fixtures.storage_env import opened_store, set_test_secret


def test_token_estimate_and_dual_threshold() -> None:
    assert [estimate_tokens(s) for s in ("", "a", "abcd", "abcde")] == [0, 1, 1, 2]
    assert not should_artifactize("x" * 100, limit_bytes=100, limit_tokens=25)
    assert should_artifactize("x" * 101, limit_bytes=1000, limit_tokens=25), "token threshold alone"
    assert should_artifactize("é" * 60, limit_bytes=100, limit_tokens=1000), "byte threshold alone (UTF-8)"
    assert not should_artifactize("é" * 50, limit_bytes=100, limit_tokens=1000)


def test_json_summary_shape_and_preview() -> None:
    data = {"alpha": list(range(300)), "beta": "x" * 10}
    text = compact_json(data)
    summary = json_summary(data)
    first, preview = summary.split("\n", 1)
    assert first == f"JSON object with 2 keys [alpha, beta], {len(text.encode())} bytes"
    assert preview == text[:500] + "…"
    assert json_summary([1, 2, 3]).startswith("JSON array with 3 items, 7 bytes\n[1,2,3]")
    assert json_summary(5).startswith("JSON int value, 1 bytes")
    many = {f"k{i}": i for i in range(60)}
    assert ", …]" in json_summary(many).split("\n")[0]


async def test_large_json_block_becomes_an_artifact(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, aid = await env.new_session()
        rid = await env.new_run(sid, aid)
        data = {"items": [{"id": i, "name": f"item-{i}"} for i in range(4000)]}
        block = JsonBlock(data=data)
        out = await artifactize_json_block(
            block,
            env.artifacts,
            session_id=sid,
            agent_id=aid,
            run_id=rid,
            tool_call_id="call_9",
            limit_bytes=65536,
        )
        assert out.data is None and out.summary and out.artifact_id
        assert out.summary.startswith("JSON object with 1 keys [items]")
        record = await env.artifacts.get(out.artifact_id)
        path = Path(record.path)
        assert path.parent == env.home / "sessions" / sid / "artifacts" / out.artifact_id and path.is_file()
        assert record.size_bytes == path.stat().st_size == len(compact_json(data).encode())
        assert (record.session_id, record.run_id, record.tool_call_id) == (sid, rid, "call_9")
        assert json.loads(path.read_bytes()) == data
        assert record.mime_type == "application/json" and record.filename == "data.json"


async def test_small_json_block_stays_inline(tmp_path: Path) -> None:
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        block = JsonBlock(data={"ok": True, "n": [1, 2, 3]})
        out = await artifactize_json_block(block, env.artifacts, session_id=sid)
        assert out is block and out.data == {"ok": True, "n": [1, 2, 3]} and out.artifact_id is None
        assert await env.storage.list_artifacts(session_id=sid) == []
        # the token threshold alone also triggers
        tokens = await artifactize_json_block(
            JsonBlock(data="y" * 400), env.artifacts, session_id=sid, limit_bytes=10**6, limit_tokens=50
        )
        assert tokens.data is None and tokens.artifact_id is not None
        forced = await artifactize_json_block(block, env.artifacts, session_id=sid, force=True)
        assert forced.artifact_id is not None and forced.data is None
        already = JsonBlock(data=None, summary="s", artifact_id=forced.artifact_id)
        assert await artifactize_json_block(already, env.artifacts, session_id=sid, force=True) is already


async def test_artifactized_json_and_summary_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = set_test_secret(monkeypatch)
    async with opened_store(tmp_path) as env:
        sid, _ = await env.new_session()
        out = await artifactize_json_block(
            JsonBlock(data={"key": secret, "pad": "z" * 200}), env.artifacts, session_id=sid, limit_bytes=64
        )
        assert out.summary is not None and secret not in out.summary and "[REDACTED]" in out.summary
        assert out.artifact_id is not None
        assert secret.encode() not in await env.artifacts.read_bytes(out.artifact_id)
