"""A long session through the scripted OpenAI server with a small context window (docs/compaction.md; issue
8).

Every user turn reads a project file with ``code.read_file`` and answers. The session never fails, every
request (main and compact fork) fits the window by the core token estimate, compaction nodes appear, and
the model always sees the latest user message and every tool_call together with its result.
"""

from __future__ import annotations

import json
import re
import threading
from typing import Any

import pytest

from agent_core import RunStatus
from agent_core._context.tokens import DEFAULT_COUNTER, MESSAGE_OVERHEAD
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import collect, open_runtime, rows, wait_for
from tests.fixtures.scripted_servers import Response, ScriptedOpenAIServer, ScriptedRequest, stream
from tests.fixtures.wire_formats import OpenAIWire, advertised_tool_name
from tests.integration.compaction_support import base_tokens

RESERVE_OUTPUT = 1024
KEY = "sk-long-session-test-key"
_FIRST_KEPT = re.compile(r"<first_kept_node_id>(.*?)</first_kept_node_id>")
_TOKENS = re.compile(r"<tokens_before>(\d+)</tokens_before>")
_TURN = re.compile(r"^turn (\d+): ")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def estimate(body: dict[str, Any]) -> int:
    """Core estimate of a Chat Completions request (messages only; tool schemas are not prompt budget)."""
    total = 0
    for message in body["messages"]:
        total += DEFAULT_COUNTER.text(_text(message.get("content"))) + MESSAGE_OVERHEAD
        for call in message.get("tool_calls") or []:
            function = call["function"]
            total += DEFAULT_COUNTER.text(function["name"]) + DEFAULT_COUNTER.text(function["arguments"]) + 4
    return total


class Model:
    """The scripted model: reads a file for each user turn, then answers; writes compaction payloads."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.lock = threading.Lock()
        self.main: list[dict[str, Any]] = []
        self.compact: list[dict[str, Any]] = []
        self.problems: list[str] = []

    def __call__(self, request: ScriptedRequest) -> Response:
        body = request.json
        messages = body["messages"]
        last = messages[-1]
        last_text = _text(last.get("content"))
        if last["role"] == "user" and _FIRST_KEPT.search(last_text):
            return self._compact(body, last_text)
        with self.lock:
            self.main.append(body)
        self._check(body)
        if last["role"] == "tool":
            return stream(OpenAIWire.text_stream(f"Done with that file ({len(messages)} messages)."))
        turn = _TURN.match(last_text)
        assert turn, f"the last message is the user's turn: {last_text[:80]!r}"
        path = f"notes/file_{int(turn.group(1)) % 10}.txt"
        call = (f"call_{turn.group(1)}", advertised_tool_name(request, "read_file"), {"path": path})
        return stream(OpenAIWire.tool_stream([call], text="Reading it."))

    def _compact(self, body: dict[str, Any], text: str) -> Response:
        first = _FIRST_KEPT.search(text)
        tokens = _TOKENS.search(text)
        assert first and tokens
        with self.lock:
            self.compact.append(body)
            number = len(self.compact)
        summary = (
            f"## Goal\nWork through the numbered turns (checkpoint {number}).\n"
            "## Constraints & Preferences\n(none)\n## Progress\n### Done\n- earlier files read\n"
            "### In Progress\n(none)\n### Blocked\n(none)\n## Key Decisions\n(none)\n"
            "## Next Steps\n- continue\n## Critical Context\n(none)\n## Files & Artifacts\n- notes/*\n"
            "## Tool & Runtime Notes\n(none)"
        )
        payload = {
            "summary": summary,
            "first_kept_node_id": first.group(1),
            "tokens_before": int(tokens.group(1)),
            "details": {},
        }
        return stream(OpenAIWire.text_stream(json.dumps(payload)))

    def _check(self, body: dict[str, Any]) -> None:
        problems: list[str] = []
        if estimate(body) > self.window:
            problems.append(f"request of {estimate(body)} tokens exceeds the window")
        calls: set[str] = set()
        results: set[str] = set()
        for message in body["messages"]:
            calls.update(c["id"] for c in message.get("tool_calls") or [])
            if message["role"] == "tool":
                results.add(message["tool_call_id"])
        if calls != results:
            problems.append(f"unpaired tool calls/results: {sorted(calls ^ results)}")
        with self.lock:
            self.problems.extend(problems)


async def _long_session(
    soong_env: SoongEnv, server: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch, turns: int
) -> None:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    for k in range(10):
        soong_env.write_project(f"notes/file_{k}.txt", f"File {k}.\n" + "lorem ipsum dolor sit amet " * 12)
    # window = base + 4400 (non-system budget ~3400); the threshold (window - 2000) is crossed every
    # few turns, so background compaction keeps the session going.
    window = await base_tokens(soong_env) + 4400
    model = Model(window)
    server.handler(model)
    config = {
        "model": {
            "provider": "openai",
            "base_url": server.base_url,
            "api_key_env": "SOONG_TEST_API_KEY",
            "context_window": window,
            "timeout_ms": 60000,
        },
        "context": {"reserve_output_tokens": RESERVE_OUTPUT},
        "compact": {"reserve_tokens": 2000, "keep_recent_tokens": 600, "max_summary_tokens": 256},
    }
    async with open_runtime(soong_env, config=config) as rt:
        session_id: str | None = None
        for i in range(turns):
            message = f"turn {i}: please read notes/file_{i % 10}.txt and summarise it"
            run = await rt.start(message, session_id=session_id)
            session_id = run.session_id
            await collect(run)
            assert run.status == RunStatus.completed, (i, run.error)
            # the turn's first request (the last one that ends with a user message)
            request = next(b for b in reversed(model.main) if b["messages"][-1]["role"] == "user")
            users = [_text(m.get("content")) for m in request["messages"] if m["role"] == "user"]
            assert users[-1] == message, "the model always sees the latest user message"
        assert session_id is not None
        sid = session_id

        def compactions() -> int:
            return len(rows(soong_env, f"SELECT 1 FROM \"nodes_{sid}\" WHERE node_type = 'compaction'"))

        await wait_for(lambda: not rt._features().compaction.jobs)  # background forks settled
    assert not model.problems, model.problems[:5]
    assert len(model.main) >= 2 * turns  # a retried request (slow machine) is seen twice
    assert compactions() >= turns // 10
    assert model.compact and all(estimate(body) <= window for body in model.compact)
    reports = rows(soong_env, f"SELECT payload_json FROM \"events_{sid}\" WHERE event_type = 'context_built'")
    totals = [json.loads(r["payload_json"])["token_budget"]["total_tokens"] for r in reports]
    assert totals and max(totals) <= window - RESERVE_OUTPUT
    assert [r["status"] for r in rows(soong_env, "SELECT DISTINCT status FROM runs")] == ["completed"]
    forks = rows(soong_env, "SELECT COUNT(*) AS n FROM agents WHERE agent_type = 'fork'")[0]["n"]
    assert forks == compactions()
    assert not rows(soong_env, f"SELECT 1 FROM \"events_{sid}\" WHERE event_type = 'compact_failed'")


async def test_long_session_with_compaction_short(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _long_session(soong_env, scripted_openai, monkeypatch, turns=30)


@pytest.mark.slow
async def test_long_session_with_compaction_200_turns(
    soong_env: SoongEnv, scripted_openai: ScriptedOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _long_session(soong_env, scripted_openai, monkeypatch, turns=200)
