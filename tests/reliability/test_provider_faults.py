"""Provider faults through the public API (issue 10 item 2), for openai, anthropic and ollama over the
scripted wire-protocol servers: 429 with Retry-After, 500/502/503/529, connection reset mid-stream, malformed
SSE/NDJSON, a server that accepts and never answers, a stream that stalls after some deltas.

Every run ends within its configured timeout with the right status and a structured error, retryable faults
are retried (and only those), and after ``close()`` no asyncio task and no HTTP connection is left behind.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from agent_core import EndReason, RunStatus
from agent_core.types.enums import EventType
from tests.fixtures.env import SoongEnv
from tests.fixtures.runtime import collect, open_runtime, rows, types
from tests.fixtures.scripted_servers import Response, drop_after, hold_open, stall, stream
from tests.reliability.wires import Wire

KEY = "sk-test-0f1e2d3c4b5a69788796a5b4"
TIMEOUT_MS = 300
RETRY = {"max_attempts": 3, "initial_backoff_ms": 10, "max_backoff_ms": 50}


@dataclass(frozen=True)
class Fault:
    name: str
    script: Callable[[Wire], list[Response]]
    status: RunStatus
    code: str | None
    requests: int
    """Chat requests the adapter must make (first attempt + retries)."""
    gives_up: bool = False
    """The adapter abandons a live connection (timeout): it must be closed when the run ends, not at close()."""


FAULTS = [
    Fault(
        "429_retry_after", lambda w: [w.rate_limited("0"), stream(w.text("ok"))], RunStatus.completed, None, 2
    ),
    Fault(
        "429_exhausted",
        lambda w: [w.rate_limited("0") for _ in range(3)],
        RunStatus.failed,
        "provider_rate_limited",
        3,
    ),
    *(
        Fault(
            f"{s}_then_ok",
            lambda w, s=s: [w.server_error(s), stream(w.text("ok"))],
            RunStatus.completed,
            None,
            2,
        )
        for s in (500, 502, 503, 529)
    ),
    Fault("503_exhausted", lambda w: [w.server_error(503)] * 3, RunStatus.failed, "provider_error", 3),
    Fault(
        "reset_before_delta",
        lambda w: [drop_after(w.preamble()), stream(w.text("ok"))],
        RunStatus.completed,
        None,
        2,
    ),
    Fault(
        "reset_mid_stream", lambda w: [drop_after(w.partial("Hel"))], RunStatus.failed, "provider_error", 1
    ),
    Fault("malformed_stream", lambda w: [stream(w.malformed())], RunStatus.failed, "provider_error", 1),
    Fault("never_answers", lambda w: [stall(), stall(), stall()], RunStatus.failed, "provider_timeout", 3),
    Fault(
        "stall_after_deltas", lambda w: [hold_open(w.partial("Hel"))], RunStatus.failed, "provider_timeout", 1
    ),
]


PROVIDERS = ["openai", "anthropic", "ollama"]


def fault_cases() -> list[Any]:
    """Every fault × provider; each fault runs once by default (providers in rotation), the rest is slow."""
    cases = []
    for i, fault in enumerate(FAULTS):
        for j, provider in enumerate(PROVIDERS):
            marks = [] if j == i % len(PROVIDERS) else [pytest.mark.slow]
            cases.append(pytest.param(provider, fault, id=f"{provider}-{fault.name}", marks=marks))
    return cases


def make_wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, provider: str) -> Wire:
    monkeypatch.setenv("SOONG_TEST_API_KEY", KEY)
    return Wire(provider, request.getfixturevalue(f"scripted_{provider}"))


@pytest.fixture(params=PROVIDERS)
def wire(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Wire]:
    yield make_wire(request, monkeypatch, request.param)


def deadline_s(fault: Fault) -> float:
    """Per-attempt timeout × attempts + the largest backoffs + a generous scheduling margin."""
    return fault.requests * TIMEOUT_MS / 1000 + fault.requests * RETRY["max_backoff_ms"] / 1000 + 2.0


async def settle_tasks(
    baseline: set[asyncio.Task[object]], timeout: float = 3.0
) -> set[asyncio.Task[object]]:
    deadline = time.monotonic() + timeout
    while True:
        extra = {t for t in asyncio.all_tasks() if t not in baseline and t is not asyncio.current_task()}
        if not extra or time.monotonic() > deadline:
            return extra
        await asyncio.sleep(0.01)


@pytest.mark.parametrize(("provider", "fault"), fault_cases())
async def test_provider_fault(
    soong_env: SoongEnv,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
    fault: Fault,
) -> None:
    wire = make_wire(request, monkeypatch, provider)
    wire.server.enqueue(*fault.script(wire))
    baseline = set(asyncio.all_tasks())
    config = wire.config(timeout_ms=TIMEOUT_MS, retry=RETRY)
    async with open_runtime(soong_env, config=config) as rt:
        started = time.monotonic()
        run = await rt.start("hello")
        events = await collect(run, timeout=deadline_s(fault) + 5)
        elapsed = time.monotonic() - started
        if fault.gives_up:
            assert await wire.server.until_idle(2.0), "the abandoned connection stayed open after the run"
        await rt.close()
    assert elapsed < deadline_s(fault), f"{fault.name} took {elapsed:.2f}s"
    assert run.status == fault.status, (run.status, run.error)
    assert len(wire.chats()) == fault.requests
    if fault.code is None:
        assert run.end_reason == EndReason.completed and run.error is None
        assert types(events)[-1] == "run_completed"
    else:
        assert run.end_reason == EndReason.failed
        assert run.error is not None and run.error.code == fault.code and run.error.redacted
        assert types(events)[-2:] == ["error", "loop_failed"]
        [row] = rows(
            soong_env, "SELECT status, end_reason, error_json FROM runs WHERE run_id = ?", run.run_id
        )
        assert (row["status"], row["end_reason"]) == ("failed", "failed")
        assert json.loads(row["error_json"])["code"] == fault.code
        persisted = rows(
            soong_env,
            f'SELECT event_type FROM "events_{run.session_id}" WHERE event_type = ?',
            EventType.loop_failed.value,
        )
        assert len(persisted) == 1
    assert KEY not in json.dumps([e.model_dump(mode="json") for e in events])
    assert await wire.server.until_idle(), "an HTTP connection outlived close()"
    leaked = await settle_tasks(baseline)
    assert not leaked, f"tasks left after close(): {leaked}"


async def test_partial_text_of_a_failed_stream_is_kept_but_never_active(
    soong_env: SoongEnv, wire: Wire
) -> None:
    """A reset after some deltas: the partial node is marked failed and the session continues cleanly."""
    wire.server.enqueue(drop_after(wire.partial("Hel")), stream(wire.text("second answer")))
    async with open_runtime(soong_env, config=wire.config(timeout_ms=TIMEOUT_MS, retry=RETRY)) as rt:
        first = await rt.start("hello")
        await collect(first)
        second = await rt.start("again", session_id=first.session_id)
        await collect(second)
    assert first.status == RunStatus.failed and second.status == RunStatus.completed
    nodes = rows(soong_env, f'SELECT role, metadata_json FROM "nodes_{first.session_id}" ORDER BY node_seq')
    partial = next(json.loads(n["metadata_json"]) for n in nodes if n["role"] == "assistant")
    assert partial["partial"] is True and partial["failed"] is True
    messages = json.dumps(wire.chats()[-1].json["messages"])
    assert "Hel" not in messages.replace("hello", "")
