"""The testing kit's prompt-cache emulation follows the vendors' rules (issue 33)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.testing import AnthropicPromptCache, OpenAIPromptCache, PromptCacheError

EPHEMERAL = {"type": "ephemeral"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def text(chars: int, mark: str = "x", cached: dict[str, str] | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": mark * chars}
    if cached is not None:
        block["cache_control"] = cached
    return block


def body(*blocks: dict[str, Any], system: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"system": system or [], "messages": [{"role": "user", "content": list(blocks)}]}


def test_anthropic_reads_what_an_earlier_request_wrote_at_a_breakpoint() -> None:
    cache = AnthropicPromptCache(min_tokens=100, clock=Clock())
    first = cache.usage(body(text(2000), text(40, "a", EPHEMERAL)))
    assert first["cache_read_input_tokens"] == 0 and first["cache_creation_input_tokens"] > 500
    assert first["input_tokens"] == 0  # everything up to the last breakpoint was written
    # the next request repeats the first one and appends: it reads the whole first request
    second = cache.usage(body(text(2000), text(40, "a"), text(400, "b", EPHEMERAL)))
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert 100 < second["cache_creation_input_tokens"] < 120
    # a request that changes an early block reads nothing
    third = cache.usage(body(text(2000, "z"), text(40, "a", EPHEMERAL)))
    assert third["cache_read_input_tokens"] == 0
    total = cache.totals
    assert total.requests == 3 and total.cache_read_tokens == second["cache_read_input_tokens"]


def test_anthropic_minimum_length_lookback_and_breakpoint_limit() -> None:
    cache = AnthropicPromptCache(min_tokens=1024, clock=Clock())
    short = cache.usage(body(text(400, "s", EPHEMERAL)))
    assert short == {
        "input_tokens": short["input_tokens"],
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    assert cache.usage(body(text(400, "s", EPHEMERAL)))["cache_read_input_tokens"] == 0  # never written
    # a breakpoint more than 20 blocks after the cached one does not find it
    base = [text(5000, "p", EPHEMERAL)]
    cache.usage(body(*base))
    near = [text(5000, "p"), *[text(8, str(i % 10)) for i in range(18)], text(8, "n", EPHEMERAL)]
    assert cache.usage(body(*near))["cache_read_input_tokens"] > 1024
    far = [text(5000, "p"), *[text(8, str(i % 10)) for i in range(30)], text(8, "f", EPHEMERAL)]
    assert cache.usage(body(*far))["cache_read_input_tokens"] == 0
    with pytest.raises(PromptCacheError, match="maximum of 4"):
        cache.usage(body(*[text(10, str(i), EPHEMERAL) for i in range(5)]))
    with pytest.raises(PromptCacheError, match="1h"):
        cache.usage(body(text(10, "a", EPHEMERAL), text(10, "b", {"type": "ephemeral", "ttl": "1h"})))


def test_anthropic_entries_expire_after_their_ttl_and_reads_renew_them() -> None:
    clock = Clock()
    cache = AnthropicPromptCache(min_tokens=10, clock=clock)
    prompt = body(text(400, "t", EPHEMERAL))
    cache.usage(prompt)
    clock.now += 299
    assert cache.usage(prompt)["cache_read_input_tokens"] > 0  # read at 4:59 renews the entry
    clock.now += 299
    assert cache.usage(prompt)["cache_read_input_tokens"] > 0
    clock.now += 301
    assert cache.usage(prompt)["cache_read_input_tokens"] == 0  # 5 minutes without a read
    long = body(text(400, "h", {"type": "ephemeral", "ttl": "1h"}))
    cache.usage(long)
    clock.now += 3000
    assert cache.usage(long)["cache_read_input_tokens"] > 0


def chat(*contents: str, key: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"messages": [{"role": "user", "content": c} for c in contents]}
    if key is not None:
        out["prompt_cache_key"] = key
    return out


def test_openai_caches_repeated_prefixes_from_1024_tokens_in_128_token_steps() -> None:
    clock = Clock()
    cache = OpenAIPromptCache(clock=clock)
    small = chat("s" * 2000)
    cache.usage(small)
    assert cache.usage(small)["cached_tokens"] == 0  # under 1024 tokens: never cached
    history = "h" * 6000  # ~1500 tokens
    first = cache.usage(chat(history, key="k"))
    assert first["cached_tokens"] == 0 and first["prompt_tokens"] > 1500
    second = cache.usage(chat(history, "next question", key="k"))
    assert second["cached_tokens"] >= 1024 and (second["cached_tokens"] - 1024) % 128 == 0
    assert second["cached_tokens"] <= first["prompt_tokens"] < second["cached_tokens"] + 128
    # another routing key does not see the prefix; an idle prefix expires
    assert cache.usage(chat(history, "x", key="other"))["cached_tokens"] == 0
    clock.now += 601
    assert cache.usage(chat(history, "y", key="k"))["cached_tokens"] == 0
    assert cache.totals.requests == 6 and 0 < cache.totals.read_share < 1
