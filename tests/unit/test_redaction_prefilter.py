"""The read-time redaction prefilter (``texts_may_hold_keys``) never clears a text the walk would mask."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from agent_core._redaction import redact_sensitive_keys, texts_may_hold_keys

_KEYS = (
    "text",
    "input_tokens",
    "total_tokens",
    "token_budget",
    "token_count",
    "max_tokens",
    "api_key",
    "Authorization",
    "access_token",
    "secret_tokens",
    "tokens",
    "TOKENS",
    "password",
    "context_window",
    "cookie",
    "tool_call_count",
    "node_ids",
    'odd"tokens',
    "back\\slash_tokens",
)
_SCALARS: tuple[Any, ...] = (0, -3, 1.5e30, 7, None, True, False, "x", "token", "sk-1", "", "tokens: 5")


def _value(rng: random.Random, depth: int) -> Any:
    roll = rng.random()
    if depth >= 3 or roll < 0.45:
        return rng.choice(_SCALARS)
    if roll < 0.65:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 4))]
    if roll < 0.8:  # flat objects of counters (the exempt dict form) and near misses
        return {rng.choice(_KEYS): rng.choice((1, None, 2.5, "x", True)) for _ in range(rng.randrange(0, 4))}
    return {rng.choice(_KEYS): _value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}


@pytest.mark.parametrize("seed", range(8))
def test_a_cleared_text_holds_nothing_the_walk_masks(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        value = {rng.choice(_KEYS): _value(rng, 0) for _ in range(rng.randrange(1, 5))}
        compact = json.dumps(value, separators=(",", ":"))
        spaced = json.dumps(value)
        masks = redact_sensitive_keys(value) != value
        for text in (compact, spaced):
            [flagged] = texts_may_hold_keys([text])
            assert flagged or not masks, text
            # in a chunk with harmless texts around it, too
            assert texts_may_hold_keys(['{"a":1}', text, '{"b":[2]}'])[1] or not masks, text


@pytest.mark.parametrize(
    ("value", "flagged"),
    [
        ({"usage": {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}}, False),
        ({"token_budget": {"context_window": 10, "total_tokens": 4}, "included_node_ids": ["a"]}, False),
        ({"system_blocks": [{"block_id": "b", "token_count": 5}], "max_tokens": None}, False),
        ({"token_budget": {"context_window": "x"}}, True),
        ({"token_budget": {"api_key": 5}}, True),
        ({"token_budget": {"nested": {"total_tokens": 1}}}, True),
        ({"input_tokens": "sk-1"}, True),
        ({"input_tokens": [1]}, True),
        ({"input_tokens": True}, True),
        ({"text": "token of appreciation"}, True),
        ({"text": 'say "input_tokens": 5'}, True),
        ({"headers": {"Authorization": "Bearer x"}}, True),
    ],
)
def test_counter_keys_are_ignored_and_nothing_else(value: dict[str, Any], flagged: bool) -> None:
    assert texts_may_hold_keys([json.dumps(value, separators=(",", ":"))]) == [flagged]
    assert texts_may_hold_keys([json.dumps(value)]) == [flagged]
