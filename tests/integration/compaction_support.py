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
from tests.fixtures.env import SoongEnv, deep_merge
from tests.fixtures.fake_provider import FakeProvider, Turn, hang, text
from tests.fixtures.runtime import collect, open_runtime

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


async def base_tokens(
    env: SoongEnv,
    config: dict[str, Any] | None = None,
    *,
    setup: Callable[[AgentRuntime], None] | None = None,
) -> int:
    """The estimate of a one-word request with this config and tools (system blocks + the message).

    Tests size their windows and thresholds relative to it, so editing a packaged prompt never breaks them.
    The probe session is deleted again.
    """
    fake = FakeProvider(text("ok"))
    probe = deep_merge(config or {}, {"compact": {"enabled": False}})
    async with open_runtime(env, fake, config=probe) as rt:
        if setup is not None:
            setup(rt)
        run = await rt.start("probe")
        events = await collect(run, debug=True)
        deleted = await rt.delete_session(run.session_id)
        assert deleted.deleted
    report = next(e.data for e in events if e.event_type == "context_built")
    return int(report["token_budget"]["total_tokens"])


async def background_config(
    env: SoongEnv, extra: dict[str, Any] | None = None, *, setup: Callable[[AgentRuntime], None] | None = None
) -> dict[str, Any]:
    """Two earlier ~300-token turns cross the background threshold on the third run's first build
    (threshold = base + 470; window = base + 3000, non-system budget ~1900); one turn does not."""
    base = await base_tokens(env, extra, setup=setup)
    window = base + 3000
    compact = {"reserve_tokens": window - (base + 470), "keep_recent_tokens": 200}
    # the blob turns repeat one call and result on purpose: loop detection (issue 19) stays out of the way
    limits = {"repeat_tool_call_limit": 1000}
    return deep_merge(
        extra or {}, {"model": {"context_window": window}, "compact": compact, "limits": limits}
    )


async def recovery_config(env: SoongEnv, **compact: Any) -> dict[str, Any]:
    """Background compaction off; a non-system budget of ~3270 tokens (window = base + 4300)."""
    base = await base_tokens(env, setup=register_blob)
    return {
        "model": {"context_window": base + 4300},
        "compact": {"auto_background": False, **compact},
        "limits": {"repeat_tool_call_limit": 1000},  # identical blob calls on purpose (issue 19)
    }
