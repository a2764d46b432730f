"""Helpers for the compaction integration tests: compact-fork answers, routing, a sized readonly tool."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from agent_core import AgentRuntime, ToolDefinition
from agent_core.types.content import text_of
from agent_core.types.model import ModelEvent, ModelRequest
from tests.fixtures.fake_provider import FakeProvider, Turn, hang, text

SECTIONS = (
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
    "## Files & Artifacts",
    "## Tool & Runtime Notes",
)
SUMMARY_MARK = "SUMMARY-OF-EARLIER-WORK"
FULL_SUMMARY = "\n".join(f"{h}\n- {SUMMARY_MARK}" if h == "## Goal" else f"{h}\n(none)" for h in SECTIONS)

_FIRST_KEPT = re.compile(r"<first_kept_node_id>(.*?)</first_kept_node_id>")
_TOKENS = re.compile(r"<tokens_before>(\d+)</tokens_before>")


def is_compact(request: ModelRequest) -> bool:
    return request.metadata.get("purpose") == "compact"


def compact_input(request: ModelRequest) -> str:
    return text_of(request.messages[0].content)


def cut_values(request_text: str) -> tuple[str, int]:
    first = _FIRST_KEPT.search(request_text)
    tokens = _TOKENS.search(request_text)
    assert first and tokens, "the compact input names first_kept_node_id and tokens_before"
    return first.group(1), int(tokens.group(1))


def compact_reply(request_text: str, *, summary: str = FULL_SUMMARY, **overrides: Any) -> str:
    """The JSON payload a well-behaved compact fork returns for ``request_text``."""
    first_kept, tokens = cut_values(request_text)
    body: dict[str, Any] = {
        "summary": summary,
        "first_kept_node_id": first_kept,
        "tokens_before": tokens,
        "details": {},
    }
    for key, value in overrides.items():
        if value is None:
            body.pop(key, None)
        else:
            body[key] = value
    return json.dumps(body)


def compact_turn(**kwargs: Any) -> Turn:
    async def turn(fake: FakeProvider, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        async for event in text(compact_reply(compact_input(request), **kwargs), chunks=1)(fake, request):
            yield event

    return turn


def held_compact(gate: asyncio.Event, **kwargs: Any) -> Turn:
    """A compact fork answer held until ``gate`` is set."""
    return hang(gate, then=compact_turn(**kwargs))


def route_compact(fake: FakeProvider, choose: Callable[[ModelRequest], Turn]) -> FakeProvider:
    """Answers compact-fork requests with ``choose(request)``; everything else follows the script."""
    return fake.route(lambda request: choose(request) if is_compact(request) else None)


BLOB = ToolDefinition(
    name="demo.blob",
    description="Returns n words of text.",
    input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    permission="readonly",
)


def register_blob(rt: AgentRuntime) -> None:
    async def handler(args: dict[str, Any], ctx: object) -> str:
        return " ".join(f"w{i:03d}" for i in range(int(args["n"])))

    rt.register_tool(BLOB, handler)


def words(tokens: int) -> str:
    """About ``tokens`` estimated tokens of text (4 characters per token)."""
    return ("abc " * tokens).strip()


def compact_config(**compact: Any) -> dict[str, Any]:
    """A 10000-token window (non-system budget ~3200 with the test static prompt) and compact overrides."""
    return {"model": {"context_window": 10000}, "compact": compact}
