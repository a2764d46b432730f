"""Tool result normalisation (docs/tools.md#results), redaction and output limiting
(docs/tools.md#output-limits).

* :func:`normalize_return` wraps a handler's return value into a :class:`ToolResult` carrying the
  call's ``tool_call_id``/``tool_name`` (a differing handler id is kept in
  ``metadata.handler_tool_call_id``).
* :func:`exception_result` turns a handler exception into an error result without a traceback.
* :func:`redact_result` applies write-time secret redaction; every ``ErrorPayload`` leaves ``redacted``.
* :func:`limit_output` moves content above ``tools.result_limit_bytes`` / ``result_limit_tokens`` (or a
  result flagged ``metadata.artifactize``) into artifacts: large ``json`` blocks become
  ``JsonBlock(data=None, summary, artifact_id)``, large text becomes a preview plus an ``artifact_ref``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from agent_core._jsontext import compact_json
from agent_core._redaction import Redactor, redact_sensitive_keys
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools.context import ToolRunSink
from agent_core.types.content import (
    ArtifactRefBlock,
    ContentBlock,
    ErrorPayload,
    JsonBlock,
    TextBlock,
    content_list_adapter,
    text_of,
)
from agent_core.types.tools import ToolResult

SUMMARY_JSON_CHARS = 500
TEXT_PREVIEW_CHARS = 2000
EVENT_SUMMARY_CHARS = 200
NO_ARTIFACTIZE = frozenset({"code.read_file"})
"""Tools whose results are never moved into artifacts (docs/tools.md#output-limits)."""


def error_result(
    tool_call_id: str,
    tool_name: str,
    code: ErrorCode,
    message: str,
    *,
    error_type: str | None = None,
    details: dict[str, Any] | None = None,
    retryable: bool = False,
    metadata: dict[str, Any] | None = None,
    extra_content: list[ContentBlock] | None = None,
) -> ToolResult:
    """An error result: ``content=[TextBlock(message), *extra_content]``."""
    error = ErrorPayload(
        type=error_type or "", code=code, message=message, retryable=retryable, details=details or {}
    )
    return ToolResult(
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        content=[TextBlock(text=message), *(extra_content or [])],
        is_error=True,
        error=error,
        metadata=dict(metadata or {}),
    )


def agent_error_result(exc: AgentCoreError, tool_call_id: str, tool_name: str) -> ToolResult:
    return error_result(
        tool_call_id,
        tool_name,
        exc.code,
        exc.message,
        details=dict(exc.details),
        retryable=exc.retryable,
    )


def exception_result(exc: BaseException, tool_call_id: str, tool_name: str) -> ToolResult:
    """``AgentCoreError`` keeps its code; anything else is ``internal_error`` / type ``tool_error``."""
    if isinstance(exc, AgentCoreError):
        return agent_error_result(exc, tool_call_id, tool_name)
    text = str(exc).strip()
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return error_result(tool_call_id, tool_name, ErrorCode.internal_error, message, error_type="tool_error")


def normalize_return(value: Any, tool_call_id: str, tool_name: str) -> ToolResult:
    """Wraps a handler return value per docs/tools.md#results (unsupported types become an error result)."""
    if isinstance(value, ToolResult):
        metadata = dict(value.metadata)
        if value.tool_call_id != tool_call_id:
            metadata["handler_tool_call_id"] = value.tool_call_id
        content = list(value.content)
        error = value.error
        if value.is_error and error is None:
            error = ErrorPayload(
                code=ErrorCode.internal_error,
                message=text_of(content).strip() or "the tool reported an error",
            )
        if value.is_error and not content and error is not None:
            content = [TextBlock(text=error.message)]
        return value.model_copy(
            update={
                "tool_call_id": tool_call_id,
                "tool_name": tool_name,
                "metadata": metadata,
                "content": content,
                "error": error,
            }
        )
    if value is None:
        return ToolResult(tool_call_id=tool_call_id, tool_name=tool_name, content=[])
    if isinstance(value, str):
        return ToolResult(tool_call_id=tool_call_id, tool_name=tool_name, content=[TextBlock(text=value)])
    if isinstance(value, BaseModel):
        data: Any = value.model_dump(mode="json")
    elif isinstance(value, bool | int | float | dict | list):
        try:
            json.dumps(value)
            data = value
        except (TypeError, ValueError):
            try:
                data = to_jsonable_python(value)
            except Exception:
                return error_result(
                    tool_call_id,
                    tool_name,
                    ErrorCode.internal_error,
                    "unsupported handler return type: value is not JSON-serialisable",
                )
    else:
        return error_result(
            tool_call_id,
            tool_name,
            ErrorCode.internal_error,
            "unsupported handler return type",
            details={"return_type": type(value).__name__},
        )
    return ToolResult(tool_call_id=tool_call_id, tool_name=tool_name, content=[JsonBlock(data=data)])


def redact_result(result: ToolResult, redactor: Redactor) -> ToolResult:
    """Secret values replaced in content, metadata and error; the error is flagged ``redacted``."""
    dumped = result.model_dump(mode="json", exclude={"error"})
    redacted = ToolResult.model_validate(
        {
            **dumped,
            "content": redactor.value(dumped["content"]),
            "metadata": redactor.value(dumped["metadata"]),
        }
    )
    if result.error is not None:
        redacted.error = result.error.redacted_copy(redactor)
    return redacted


# ---------------------------------------------------------------------------------------------------
# Output limiting


def estimate_tokens(text: str) -> int:
    """The core token estimate: ``ceil(len(text) / 4)`` (docs/providers.md#built-in-adapters)."""
    return math.ceil(len(text) / 4)


def _block_text(block: ContentBlock) -> str:
    return compact_json(block.model_dump(mode="json"))


def _too_large(text: str, limit_bytes: int, limit_tokens: int) -> bool:
    return len(text.encode("utf-8")) > limit_bytes or estimate_tokens(text) > limit_tokens


def json_summary(data: Any, serialized: str | None = None) -> str:
    """Shape description (type, keys or item count, byte size) plus the first 500 characters.

    The preview masks values under sensitive-looking keys (``password``, ``token``, ...): a summary is a
    plain string, which read-time redaction cannot see into; the full data stays in the artifact.
    """
    text = serialized if serialized is not None else compact_json(data)
    size = len(text.encode("utf-8"))
    masked = redact_sensitive_keys(data)
    if masked != data:
        text = compact_json(masked)
    if isinstance(data, dict):
        keys = list(data)
        shown = ", ".join(str(k) for k in keys[:20]) + (", ..." if len(keys) > 20 else "")
        shape = f"object with {len(keys)} keys [{shown}]"
    elif isinstance(data, list):
        shape = f"array of {len(data)} items"
    else:
        shape = type(data).__name__
    head = text[:SUMMARY_JSON_CHARS] + ("..." if len(text) > SUMMARY_JSON_CHARS else "")
    return f"{shape}, {size} bytes: {head}"


async def limit_output(
    result: ToolResult,
    *,
    limit_bytes: int,
    limit_tokens: int,
    sink: ToolRunSink,
    force: bool = False,
) -> ToolResult:
    """Artifactises the largest blocks until the content fits (all of them when ``force``)."""
    slots: list[list[ContentBlock]] = [[b] for b in result.content]
    done: set[int] = set()
    preview_chars = max(0, min(TEXT_PREVIEW_CHARS, limit_bytes // 4, limit_tokens))

    def flat() -> list[ContentBlock]:
        return [b for slot in slots for b in slot]

    def total_too_large() -> bool:
        return _too_large(content_list_adapter.dump_json(flat()).decode("utf-8"), limit_bytes, limit_tokens)

    if not slots or (not force and not total_too_large()):
        return result
    while force or total_too_large():
        candidates = [
            i
            for i, slot in enumerate(slots)
            if i not in done
            and (
                isinstance(slot[0], TextBlock)
                or (isinstance(slot[0], JsonBlock) and slot[0].data is not None)
            )
        ]
        if not candidates:
            break
        index = max(candidates, key=lambda i: len(_block_text(slots[i][0])))
        done.add(index)
        slots[index] = await _artifactize_block(slots[index][0], index, result, sink, preview_chars)
    blocks = flat()
    if total_too_large():
        serialized = content_list_adapter.dump_json(blocks).decode("utf-8")
        ref = await sink.create_artifact(
            serialized,
            filename="tool_output.json",
            mime_type="application/json",
            summary=f"full content of {result.tool_name} result",
            tool_call_id=result.tool_call_id,
        )
        preview = serialized[:preview_chars]
        blocks = [
            TextBlock(text=f"{preview}\n... [truncated: full content stored as artifact {ref.artifact_id}]"),
            ref,
        ]
    return result.model_copy(update={"content": blocks})


async def _artifactize_block(
    block: ContentBlock, index: int, result: ToolResult, sink: ToolRunSink, preview_chars: int
) -> list[ContentBlock]:
    if isinstance(block, JsonBlock):
        serialized = compact_json(block.data)
        summary = json_summary(block.data, serialized)
        ref = await sink.create_artifact(
            serialized,
            filename=f"tool_output_{index}.json",
            mime_type="application/json",
            summary=summary,
            tool_call_id=result.tool_call_id,
        )
        return [JsonBlock(data=None, summary=summary, artifact_id=ref.artifact_id)]
    assert isinstance(block, TextBlock)
    text = block.text
    summary = f"text output of {result.tool_name}, {len(text)} characters"
    ref = await sink.create_artifact(
        text,
        filename=f"tool_output_{index}.txt",
        mime_type="text/plain",
        summary=summary,
        tool_call_id=result.tool_call_id,
    )
    preview = text[:preview_chars]
    marker = f"\n... [truncated: {len(text)} characters in total; full text in artifact {ref.artifact_id}]"
    return [
        TextBlock(text=preview + marker),
        ArtifactRefBlock(artifact_id=ref.artifact_id, summary=summary, mime_type="text/plain"),
    ]


def artifact_ids(result: ToolResult) -> list[str]:
    """Ids of every artifact referenced by the result's content."""
    ids: list[str] = []
    for block in result.content:
        if isinstance(block, ArtifactRefBlock | JsonBlock) and block.artifact_id:
            ids.append(block.artifact_id)
    return list(dict.fromkeys(ids))


def result_summary(result: ToolResult, limit: int = EVENT_SUMMARY_CHARS) -> str:
    """A short single-line description of the result for ``tool_completed`` events (values under
    sensitive-looking keys masked: read-time redaction cannot see into the string)."""
    for block in result.content:
        if isinstance(block, TextBlock) and block.text.strip():
            text = " ".join(block.text.split())
        elif isinstance(block, JsonBlock):
            if block.data is None and block.summary:
                text = block.summary
            else:
                text = compact_json(redact_sensitive_keys(block.data))
        elif isinstance(block, ArtifactRefBlock):
            text = block.summary or f"artifact {block.artifact_id}"
        else:
            continue
        return text if len(text) <= limit else text[: limit - 3] + "..."
    return ""
