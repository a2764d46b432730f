"""An Anthropic extended-thinking session with tool calls across three turns and a crash in the middle
(issue 34): a child process runs the session against the strict scripted Anthropic server and is
SIGKILLed while its third model request is in flight (two thinking-signed tool turns stored); a new
runtime resumes the session. Its requests carry the stored thinking blocks back byte for byte — the
server checks every signature it issued and Anthropic's tool-loop rule — and the session completes."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agent_core import RunStatus
from agent_core.testing import Response, ScriptedRequest, stall
from tests.fixtures.env import SoongEnv
from tests.fixtures.real_models import KEY_ENV, KEY_VALUE, bodies, finished, model_config, serving
from tests.fixtures.runtime import open_runtime, rows
from tests.integration.test_real_models_reasoning import thinking_turns

ROOT = Path(__file__).resolve().parents[2]


def tool_results(request: ScriptedRequest) -> int:
    return sum(
        1
        for m in request.json["messages"]
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    )


async def test_thinking_session_survives_a_kill_between_tool_turns(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY_VALUE)
    for k in range(3):
        soong_env.write_project(f"notes/n{k}.txt", f"note {k}\n")
    from agent_core.testing import ScriptedAnthropicServer

    with serving(ScriptedAnthropicServer()) as server:
        server.allow_unconsumed = True
        hold = {"on": True}

        def turns(request: ScriptedRequest) -> Response:
            if hold["on"] and tool_results(request) == 2:
                return stall()  # the third request hangs until the child dies
            return thinking_turns(request)

        server.handler(turns)
        model = model_config("anthropic", server, max_output_tokens=4096, thinking_budget_tokens=2048)
        soong_env.write_config(model=model)
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.reliability.thinking_child",
            str(soong_env.project),
            "read the three notes",
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            assert child.stdout is not None
            session_id = (await asyncio.wait_for(child.stdout.readline(), 30)).decode().strip()
            deadline = time.monotonic() + 30
            while not any(tool_results(r) == 2 for r in server.requests if isinstance(r.json, dict)):
                assert time.monotonic() < deadline, "the child never reached its third model request"
                await asyncio.sleep(0.02)
        finally:
            child.send_signal(signal.SIGKILL)
            await child.wait()
        assert child.returncode == -signal.SIGKILL
        before = len(bodies(server))
        stored = rows(
            soong_env,
            f"SELECT content_json FROM nodes_{session_id} WHERE role = 'assistant' ORDER BY node_seq",
        )
        assert len(stored) == 2 and all('"type":"reasoning"' in r["content_json"] for r in stored)

        hold["on"] = False
        async with open_runtime(soong_env, write_config=False) as rt:
            resumed = await finished(await rt.start("go on with the notes", session_id=session_id))
    assert resumed.status == RunStatus.completed
    after = bodies(server)[before:]
    assert len(after) == 2  # the third note's turn, then the answer
    assert server.rejections == []  # every signature matched, the tool-loop rule held
    last = after[-1]["messages"]
    signatures = [
        b["signature"]
        for m in last
        if m["role"] == "assistant"
        for b in m["content"]
        if b["type"] == "thinking"
    ]
    assert signatures[:2] == ["sig-1", "sig-3"] and len(signatures) == 3
    assert all(m["content"][0]["type"] == "thinking" for m in last if m["role"] == "assistant")
    assert all(b["thinking"] == {"type": "enabled", "budget_tokens": 2048} for b in after)
