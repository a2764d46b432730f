"""Result normalisation, exception mapping, redaction and output limiting (docs/tools.md#results,
docs/tools.md#output-limits)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agent_core._redaction import REDACTED, Redactor
from agent_core.errors import AgentCoreError, ErrorCode, ToolError
from agent_core.tools._normalize import (
    artifact_ids,
    estimate_tokens,
    exception_result,
    json_summary,
    limit_output,
    normalize_return,
    redact_result,
    result_summary,
)
from agent_core.types.content import ArtifactRefBlock, ErrorPayload, JsonBlock, TextBlock
from agent_core.types.tools import ToolResult
from tests.fixtures.tool_sink import RecordingSink


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("x", [TextBlock(text="x")]),
        ({"a": 1}, [JsonBlock(data={"a": 1})]),
        ([1], [JsonBlock(data=[1])]),
        (5, [JsonBlock(data=5)]),
        (True, [JsonBlock(data=True)]),
        (2.5, [JsonBlock(data=2.5)]),
        (None, []),
    ],
)
def test_return_values_are_wrapped(value: Any, expected: list[Any]) -> None:
    result = normalize_return(value, "call_1", "my.tool")
    assert result.content == expected
    assert (result.tool_call_id, result.tool_name, result.is_error, result.error) == (
        "call_1",
        "my.tool",
        False,
        None,
    )


class Out(BaseModel):
    when: datetime
    n: int


def test_models_and_non_json_values() -> None:
    ts = datetime(2026, 1, 2, tzinfo=UTC)
    assert normalize_return(Out(when=ts, n=1), "c", "t").content == [
        JsonBlock(data={"when": "2026-01-02T00:00:00Z", "n": 1})
    ]
    assert normalize_return({"p": Path("/x")}, "c", "t").content == [JsonBlock(data={"p": "/x"})]


@pytest.mark.parametrize("value", [object(), b"bytes", {1, 2}, (1, 2)])
def test_unsupported_return_type_is_internal_error(value: Any) -> None:
    result = normalize_return(value, "c", "t")
    assert result.is_error
    assert result.error is not None and result.error.code == ErrorCode.internal_error
    assert result.error.message == "unsupported handler return type"


def test_handler_tool_call_id_is_overwritten() -> None:
    handler = ToolResult(
        tool_call_id="wrong", tool_name="other", content=[TextBlock(text="t")], metadata={"k": 1}
    )
    result = normalize_return(handler, "call_right", "my.tool")
    assert result.tool_call_id == "call_right" and result.tool_name == "my.tool"
    assert result.metadata == {"k": 1, "handler_tool_call_id": "wrong"}
    same = normalize_return(
        handler.model_copy(update={"tool_call_id": "call_right"}), "call_right", "my.tool"
    )
    assert "handler_tool_call_id" not in same.metadata


def test_error_result_without_payload_gets_one() -> None:
    handler = ToolResult(tool_call_id="c", tool_name="t", content=[], is_error=True)
    result = normalize_return(handler, "c", "t")
    assert result.error is not None and result.error.code == ErrorCode.internal_error
    assert result.content == [TextBlock(text=result.error.message)]


def test_exceptions_become_error_results_without_traceback() -> None:
    try:
        raise ValueError("bad value")
    except ValueError as exc:
        result = exception_result(exc, "c", "t")
    assert result.is_error and result.error is not None
    assert result.error.code == ErrorCode.internal_error and result.error.type == "tool_error"
    dumped = json.dumps(result.model_dump(mode="json"))
    assert "Traceback" not in dumped and "line " not in dumped
    assert result.content == [TextBlock(text="ValueError: bad value")]

    coded = exception_result(
        ToolError(ErrorCode.file_not_found, "missing", details={"path": "/x"}, retryable=True), "c", "t"
    )
    assert coded.error is not None
    assert (coded.error.code, coded.error.type, coded.error.details, coded.error.retryable) == (
        ErrorCode.file_not_found,
        "file_not_found",
        {"path": "/x"},
        True,
    )
    assert (
        exception_result(AgentCoreError(ErrorCode.timeout, "slow"), "c", "t").error.code == ErrorCode.timeout
    )  # type: ignore[union-attr]


def test_redact_result_replaces_secrets_everywhere() -> None:
    secret = "s3cr3t-value-123"
    redactor = Redactor(["MY_API_KEY"], environ={"MY_API_KEY": secret})
    result = ToolResult(
        tool_call_id="c",
        tool_name="t",
        content=[TextBlock(text=f"key={secret}"), JsonBlock(data={"nested": [secret]})],
        is_error=True,
        error=ErrorPayload(code=ErrorCode.internal_error, message=f"failed {secret}", details={"k": secret}),
        metadata={"m": secret},
    )
    redacted = redact_result(result, redactor)
    assert secret not in json.dumps(redacted.model_dump(mode="json"))
    assert REDACTED in redacted.content[0].text  # type: ignore[union-attr]
    assert redacted.error is not None and redacted.error.redacted


async def test_large_json_block_becomes_artifact(tmp_path: Path) -> None:
    sink = RecordingSink(tmp_path)
    data = {"rows": [{"i": i, "text": "x" * 50} for i in range(200)]}
    result = ToolResult(
        tool_call_id="c", tool_name="t", content=[TextBlock(text="small"), JsonBlock(data=data)]
    )
    limited = await limit_output(result, limit_bytes=4096, limit_tokens=100_000, sink=sink)
    assert limited.content[0] == TextBlock(text="small")
    block = limited.content[1]
    assert isinstance(block, JsonBlock) and block.data is None and block.artifact_id
    assert block.summary is not None and block.summary.startswith("object with 1 keys [rows]")
    assert json.loads(sink.artifacts[block.artifact_id].read_text()) == data
    assert artifact_ids(limited) == [block.artifact_id]


async def test_large_text_keeps_a_preview_and_artifact_ref(tmp_path: Path) -> None:
    sink = RecordingSink(tmp_path)
    text = "line\n" * 10_000
    limited = await limit_output(
        ToolResult(tool_call_id="c", tool_name="t", content=[TextBlock(text=text)]),
        limit_bytes=65536,
        limit_tokens=8000,
        sink=sink,
    )
    preview, ref = limited.content
    assert isinstance(preview, TextBlock) and isinstance(ref, ArtifactRefBlock)
    assert len(preview.text) < 3000 and "truncated" in preview.text
    assert sink.artifacts[ref.artifact_id].read_text() == text
    assert ref.mime_type == "text/plain"


async def test_token_threshold_alone_triggers_and_small_results_untouched(tmp_path: Path) -> None:
    sink = RecordingSink(tmp_path)
    result = ToolResult(tool_call_id="c", tool_name="t", content=[TextBlock(text="y" * 2000)])
    assert await limit_output(result, limit_bytes=65536, limit_tokens=8000, sink=sink) is result
    limited = await limit_output(result, limit_bytes=65536, limit_tokens=100, sink=sink)
    assert any(isinstance(b, ArtifactRefBlock) for b in limited.content)
    assert estimate_tokens("abcde") == 2


async def test_artifactize_flag_forces_artifacts(tmp_path: Path) -> None:
    sink = RecordingSink(tmp_path)
    result = ToolResult(
        tool_call_id="c", tool_name="t", content=[JsonBlock(data={"a": 1})], metadata={"artifactize": True}
    )
    limited = await limit_output(result, limit_bytes=65536, limit_tokens=8000, sink=sink, force=True)
    assert isinstance(limited.content[0], JsonBlock) and limited.content[0].artifact_id in sink.artifacts


async def test_many_small_blocks_fall_back_to_one_artifact(tmp_path: Path) -> None:
    sink = RecordingSink(tmp_path)
    refs = [ArtifactRefBlock(artifact_id=f"artifact_{i}", summary="s" * 40) for i in range(100)]
    result = ToolResult(tool_call_id="c", tool_name="t", content=list(refs))
    limited = await limit_output(result, limit_bytes=1000, limit_tokens=8000, sink=sink)
    assert len(limited.content) == 2 and isinstance(limited.content[1], ArtifactRefBlock)
    assert len(sink.artifacts) == 1


def test_summaries() -> None:
    assert json_summary([1, 2, 3]).startswith("array of 3 items, 7 bytes: [1,2,3]")
    result = ToolResult(tool_call_id="c", tool_name="t", content=[TextBlock(text="  a\n b  " + "z" * 300)])
    summary = result_summary(result)
    assert summary.startswith("a b") and len(summary) == 200
    assert result_summary(ToolResult(tool_call_id="c", tool_name="t", content=[])) == ""
