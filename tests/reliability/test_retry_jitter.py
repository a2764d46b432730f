"""Retry backoff uses full jitter; ``Retry-After`` stays exact (issue 31 item 20).

Without jitter every client that hit the same outage retried at the same instants (500, 1000, 2000 ms),
so the retries of many clients arrived together. Now each delay is uniform in ``[0, ceiling]``; a server's
``Retry-After`` is obeyed to the millisecond.
"""

from __future__ import annotations

import statistics

from agent_core.config.model import RetryConfig
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.providers._streaming import backoff_ceiling_ms, backoff_ms
from agent_core.types.model import ModelCompleted
from tests.fixtures.provider_requests import SleepRecorder, collect, make_request, model_config
from tests.fixtures.scripted_servers import OpenAIWire, ScriptedOpenAIServer, error, stream


def test_backoff_is_uniform_below_the_ceiling() -> None:
    """Case I20."""
    retry = RetryConfig()
    samples = [backoff_ms(retry, 3) for _ in range(400)]
    ceiling = backoff_ceiling_ms(retry, 3)
    assert ceiling == 2000
    assert all(0 <= s <= ceiling for s in samples)
    assert len(set(samples)) > 100, "the delays are not spread: retries of many clients would coincide"
    assert 800 <= statistics.mean(samples) <= 1200
    assert min(samples) < 500 and max(samples) > 1500


async def test_clients_failing_together_retry_at_different_times(
    scripted_openai: ScriptedOpenAIServer,
) -> None:
    """Case I20."""
    runs: list[list[int]] = []
    for _ in range(4):
        scripted_openai.enqueue(
            *[error(503, {"error": "overloaded"}) for _ in range(3)], stream(OpenAIWire.text_stream("ok"))
        )
        sleep = SleepRecorder()
        adapter = OpenAIAdapter(model_config("openai", scripted_openai.base_url, max_attempts=4), sleep=sleep)
        events = await collect(adapter, make_request())
        await adapter.close()
        assert isinstance(events[-1], ModelCompleted)
        assert sleep.jittered_under([500, 1000, 2000])
        retries = events[-1].metadata["retry"]["retries"]
        assert [r["backoff_ms"] for r in retries] == sleep.delays_ms
        runs.append(sleep.delays_ms)
    assert len({tuple(r) for r in runs}) > 1, f"every client retried at the same instants: {runs}"


async def test_retry_after_is_kept_exact(scripted_openai: ScriptedOpenAIServer) -> None:
    """Case I20."""
    for _ in range(3):
        scripted_openai.enqueue(
            error(429, {"error": "slow down"}, {"Retry-After": "2"}),
            error(429, {"error": "slow down"}, {"retry-after-ms": "1234"}),
            stream(OpenAIWire.text_stream("ok")),
        )
        sleep = SleepRecorder()
        adapter = OpenAIAdapter(model_config("openai", scripted_openai.base_url), sleep=sleep)
        events = await collect(adapter, make_request())
        await adapter.close()
        assert isinstance(events[-1], ModelCompleted)
        assert sleep.delays_ms == [2000, 1234]
