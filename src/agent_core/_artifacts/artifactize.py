"""Automatic artifactisation (docs/storage.md#automatic-artifactisation, docs/tools.md#output-limits).

Dual threshold: content goes to an artifact when its serialisation exceeds the byte threshold
(UTF-8 bytes) OR the estimated-token threshold (core estimate ``ceil(chars / 4)``). For ``json``
blocks the measure is the compact JSON serialisation, and the summary is a shape description (type,
top-level key list or item count, byte size) followed by the first 500 characters of the compact JSON.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from agent_core._redaction import redact_sensitive_keys, redact_with
from agent_core._storage.rows import json_text, jsonable
from agent_core.types.content import JsonBlock

if TYPE_CHECKING:
    from agent_core._artifacts.manager import ArtifactManager

DEFAULT_LIMIT_BYTES = 65536
"""``tools.result_limit_bytes`` default."""
DEFAULT_LIMIT_TOKENS = 8000
"""``tools.result_limit_tokens`` default."""
PREVIEW_CHARS = 500
MAX_LISTED_KEYS = 50


def estimate_tokens(text: str) -> int:
    """Core token estimate: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


def should_artifactize(
    text: str, *, limit_bytes: int = DEFAULT_LIMIT_BYTES, limit_tokens: int = DEFAULT_LIMIT_TOKENS
) -> bool:
    """True when ``text`` is over the byte threshold OR the estimated-token threshold."""
    if estimate_tokens(text) > limit_tokens:
        return True
    # UTF-8 is at most 4 bytes per char: skip the encode when it cannot exceed the limit
    return len(text) * 4 > limit_bytes and len(text.encode("utf-8")) > limit_bytes


def compact_json(data: Any) -> str:
    """Compact UTF-8 JSON text of ``data`` (the serialisation the thresholds are measured on)."""
    return json_text(jsonable(data, "json block data", ()), "json block data")


def json_summary(data: Any, compact: str | None = None) -> str:
    """Shape description + the first 500 characters of the compact JSON.

    The preview masks values under sensitive-looking keys (``password``, ``token``, ...): a summary is a
    plain string, which read-time redaction cannot see into; the full data stays in the artifact.
    """
    text = compact if compact is not None else compact_json(data)
    size = len(text.encode("utf-8"))
    masked = redact_sensitive_keys(data)
    if masked != data:
        text = compact_json(masked)
    if isinstance(data, dict):
        keys = [str(k) for k in data]
        listed = ", ".join(keys[:MAX_LISTED_KEYS]) + (", …" if len(keys) > MAX_LISTED_KEYS else "")
        shape = f"JSON object with {len(keys)} keys [{listed}], {size} bytes"
    elif isinstance(data, list | tuple):
        shape = f"JSON array with {len(data)} items, {size} bytes"
    else:
        shape = f"JSON {type(data).__name__} value, {size} bytes"
    preview = text[:PREVIEW_CHARS] + ("…" if len(text) > PREVIEW_CHARS else "")
    return f"{shape}\n{preview}"


async def artifactize_json_block(
    block: JsonBlock,
    artifacts: ArtifactManager,
    *,
    session_id: str,
    agent_id: str | None = None,
    run_id: str | None = None,
    node_id: str | None = None,
    tool_call_id: str | None = None,
    limit_bytes: int = DEFAULT_LIMIT_BYTES,
    limit_tokens: int = DEFAULT_LIMIT_TOKENS,
    force: bool = False,
    kind: str = "tool_output",
    filename: str = "data.json",
) -> JsonBlock:
    """Returns ``block`` unchanged when it is small (or already artifactised); otherwise writes its data
    as a JSON artifact and returns ``JsonBlock(data=None, summary=..., artifact_id=...)``.

    ``force=True`` artifactises regardless of size (``ToolResult.metadata["artifactize"]``).
    """
    if block.data is None or block.artifact_id is not None:
        return block
    secrets = artifacts.redactor.secrets()
    data = jsonable(block.data, "json block data", secrets)
    text = json_text(data, "json block data")
    if not force and not should_artifactize(text, limit_bytes=limit_bytes, limit_tokens=limit_tokens):
        return block
    summary = redact_with(json_summary(data, text), secrets)
    ref = await artifacts.create(
        data,
        filename=filename,
        mime_type="application/json",
        summary=summary,
        kind=kind,
        session_id=session_id,
        agent_id=agent_id,
        run_id=run_id,
        node_id=node_id,
        tool_call_id=tool_call_id,
    )
    return JsonBlock(data=None, summary=summary, artifact_id=ref.artifact_id)
