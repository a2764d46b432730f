"""Prefix-reuse arithmetic of ``benchmarks.prefix_reuse`` over kept Chat Completions request bodies.

A provider's prompt cache reuses only the part of a request that repeats an earlier request verbatim from
its start. The prompt of a Chat Completions body is its tool definitions followed by its messages, so a
body is reduced to that text (each tool and message as sorted-key JSON, in order; ``model``, ``stream``,
``prompt_cache_key`` and the other request options are not part of the prompt). Then:

* ``cacheable`` = sum over requests of the longest common prefix with the previous request, divided by
  the sum of the request sizes (characters), over the requests that have a previous request (the first
  request of a session has nothing to reuse, whoever sends it; ``cacheable_all`` counts it too);
* ``lost`` = the characters of previous requests that the next request did not repeat (0: every request
  reused the whole previous one, so the rest of each request is new content no cache could hold);
* ``reuse at a new user turn`` = for each request whose last message is a user message (the first
  request of a turn, after the first turn), the common prefix with the previous request divided by the
  previous request's size: 1.00 means the whole previous request is reused.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def prompt_text(body: dict[str, Any]) -> str:
    """The prompt of a Chat Completions body: its tools, then its messages (sorted-key JSON each)."""
    parts = [json.dumps(tool, sort_keys=True, ensure_ascii=False) for tool in body.get("tools") or []]
    parts += [json.dumps(m, sort_keys=True, ensure_ascii=False) for m in body.get("messages") or []]
    return "\n".join(parts)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (binary search over slice comparisons, done in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


@dataclass
class Reuse:
    requests: int
    cacheable: float
    cacheable_all: float
    lost: int
    turn_reuse: list[float]
    last_chars: int
    breaks: list[tuple[int, int, int]]
    """``(request index, common prefix, previous size)`` of every request that did not reuse the whole
    previous request (a turn boundary or a tool round that rewrote earlier text)."""

    @property
    def turn_median(self) -> float:
        return statistics.median(self.turn_reuse) if self.turn_reuse else float("nan")

    @property
    def turn_min(self) -> float:
        return min(self.turn_reuse) if self.turn_reuse else float("nan")


def measure(bodies: Sequence[dict[str, Any]]) -> Reuse:
    texts = [prompt_text(b) for b in bodies]
    shared = total = lost = 0
    turn_reuse: list[float] = []
    breaks: list[tuple[int, int, int]] = []
    for index, text in enumerate(texts):
        if not index:
            continue
        total += len(text)
        previous = texts[index - 1]
        lcp = common_prefix(previous, text)
        shared += lcp
        lost += len(previous) - lcp
        if lcp < len(previous):
            breaks.append((index, lcp, len(previous)))
        messages = bodies[index].get("messages") or []
        if messages and messages[-1].get("role") == "user":
            turn_reuse.append(lcp / len(previous) if previous else 1.0)
    first = len(texts[0]) if texts else 0
    return Reuse(
        requests=len(texts),
        cacheable=shared / total if total else 0.0,
        cacheable_all=shared / (total + first) if total + first else 0.0,
        lost=lost,
        turn_reuse=turn_reuse,
        last_chars=len(texts[-1]) if texts else 0,
        breaks=breaks,
    )
