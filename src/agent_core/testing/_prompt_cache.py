"""Prompt-cache emulation for the scripted servers (public via ``agent_core.testing``).

Pass one to a scripted server (``ScriptedAnthropicServer(prompt_cache=AnthropicPromptCache())``,
``ScriptedOpenAIServer(prompt_cache=OpenAIPromptCache())``): the server then reports the usage a real
provider would for each request it receives — the whole prompt, and the part read from (and, Anthropic,
written to) the cache — instead of the scripted figures, so tests and benchmarks can check what a prompt
layout costs. Tokens are estimated as a quarter of the characters of each prompt part's compact JSON.

* :class:`AnthropicPromptCache` follows Anthropic's rules for ``cache_control`` breakpoints: the prompt
  is tools, then system, then message content blocks; at most 4 breakpoints (more is an HTTP 400, as is a
  one-hour breakpoint after a five-minute one); a breakpoint writes the prefix up to and including its
  block when that prefix has at least ``min_tokens`` tokens; a request reads the longest prefix an
  earlier request wrote that is still alive (``ttl`` ``5m`` or ``1h``, renewed by each read), looking at
  its breakpoints and up to 20 blocks before each. ``input_tokens`` is what is neither read nor written.
* :class:`OpenAIPromptCache` follows OpenAI's automatic caching: a prompt of at least 1024 tokens reads
  the longest prefix it shares with an earlier prompt routed to the same place (the same
  ``prompt_cache_key``, or none), in steps of 128 tokens from 1024; ``prompt_tokens`` counts the whole
  prompt and ``prompt_tokens_details.cached_tokens`` the part read. Prompts stay cached ``ttl_s``
  seconds after their last use.

Each instance also totals what it reported (:attr:`totals`). A ``clock`` can be injected for TTL tests.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ANTHROPIC_LOOKBACK_BLOCKS = 20
ANTHROPIC_MAX_BREAKPOINTS = 4
TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


def estimate_tokens(text: str) -> int:
    """A quarter of the characters, rounded up (the emulation's token estimate)."""
    return -(-len(text) // 4)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class PromptCacheError(ValueError):
    """A request the provider would reject (the server answers HTTP 400 with this message)."""


@dataclass(slots=True)
class CacheTotals:
    requests: int = 0
    input_tokens: int = 0
    """The whole prompts."""
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def uncached_tokens(self) -> int:
        return self.input_tokens - self.cache_read_tokens - self.cache_write_tokens

    @property
    def read_share(self) -> float:
        return self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0


@dataclass(slots=True)
class _Block:
    text: str
    tokens: int
    ttl: str | None
    """The breakpoint's TTL (``None``: no breakpoint on this block)."""


def _strip(block: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    control = block.get("cache_control")
    if not isinstance(control, dict):
        return block, None
    rest = {k: v for k, v in block.items() if k != "cache_control"}
    if control.get("type") != "ephemeral":
        raise PromptCacheError(f"cache_control.type must be 'ephemeral', got {control.get('type')!r}")
    ttl = control.get("ttl", "5m")
    if ttl not in TTL_SECONDS:
        raise PromptCacheError(f"cache_control.ttl must be '5m' or '1h', got {ttl!r}")
    return rest, str(ttl)


class AnthropicPromptCache:
    """Anthropic's prompt cache (see the module docstring)."""

    def __init__(self, *, min_tokens: int = 1024, clock: Callable[[], float] = time.monotonic) -> None:
        self.min_tokens = min_tokens
        self.clock = clock
        self.totals = CacheTotals()
        self._entries: dict[str, float] = {}
        """Prefix hash → expiry time."""
        self._ttl: dict[str, float] = {}
        self._lock = threading.Lock()

    @staticmethod
    def blocks(body: dict[str, Any]) -> list[_Block]:
        """The prompt of a Messages body as blocks in cache order: tools, system, message content."""
        out: list[_Block] = []

        def add(item: Any) -> None:
            rest, ttl = _strip(item) if isinstance(item, dict) else (item, None)
            text = _canonical(rest)
            out.append(_Block(text, estimate_tokens(text), ttl))

        for tool in body.get("tools") or []:
            add(tool)
        system = body.get("system")
        if isinstance(system, str):
            add({"type": "text", "text": system})
        else:
            for block in system or []:
                add(block)
        for message in body.get("messages") or []:
            content = message.get("content")
            role = message.get("role")
            if isinstance(content, str):
                add({"role": role, "type": "text", "text": content})
                continue
            for block in content or []:
                if isinstance(block, dict):
                    rest, ttl = _strip(block)
                    text = _canonical({"role": role, **rest})
                    out.append(_Block(text, estimate_tokens(text), ttl))
        return out

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """The ``usage`` of a request with ``body`` (``input_tokens``, ``cache_creation_input_tokens``,
        ``cache_read_input_tokens``); records its cache writes. Raises :class:`PromptCacheError`."""
        blocks = self.blocks(body)
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        if len(marks) > ANTHROPIC_MAX_BREAKPOINTS:
            raise PromptCacheError(
                f"A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {len(marks)}."
            )
        ttls = [blocks[i].ttl for i in marks]
        if "5m" in ttls and "1h" in ttls[ttls.index("5m") :]:
            raise PromptCacheError(
                "a cache_control block with ttl '1h' must not come after one with ttl '5m'"
            )
        hashes: list[str] = []
        cumulative: list[int] = []
        digest = hashlib.sha256()
        total = 0
        for block in blocks:
            digest.update(block.text.encode("utf-8"))
            digest.update(b"\x00")
            hashes.append(digest.copy().hexdigest())
            total += block.tokens
            cumulative.append(total)
        with self._lock:
            now = self.clock()
            for key in [k for k, expiry in self._entries.items() if expiry <= now]:
                del self._entries[key]
                self._ttl.pop(key, None)
            read_at = -1
            for mark in marks:
                for position in range(mark, max(-1, mark - ANTHROPIC_LOOKBACK_BLOCKS), -1):
                    if hashes[position] in self._entries:
                        read_at = max(read_at, position)
                        break
            read = cumulative[read_at] if read_at >= 0 else 0
            if read_at >= 0:  # a read renews the entry
                key = hashes[read_at]
                self._entries[key] = now + self._ttl[key]
            written_to = read_at
            for mark in marks:
                if mark > read_at and cumulative[mark] >= self.min_tokens:
                    ttl = TTL_SECONDS[str(blocks[mark].ttl)]
                    self._entries[hashes[mark]] = now + ttl
                    self._ttl[hashes[mark]] = ttl
                    written_to = max(written_to, mark)
            write = cumulative[written_to] - read if written_to > read_at else 0
            self.totals.requests += 1
            self.totals.input_tokens += total
            self.totals.cache_read_tokens += read
            self.totals.cache_write_tokens += write
        return {
            "input_tokens": total - read - write,
            "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read,
        }


@dataclass(slots=True)
class _Prompt:
    text: str
    expires: float


@dataclass(slots=True)
class OpenAIPromptCache:
    """OpenAI's automatic prompt caching (see the module docstring)."""

    min_tokens: int = 1024
    step_tokens: int = 128
    ttl_s: float = 600.0
    clock: Callable[[], float] = time.monotonic
    totals: CacheTotals = field(default_factory=CacheTotals)
    _prompts: dict[str | None, list[_Prompt]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @staticmethod
    def prompt(body: dict[str, Any]) -> str:
        """The prompt of a Chat Completions body: its tools, then its messages (compact JSON each)."""
        parts = [_canonical(tool) for tool in body.get("tools") or []]
        parts += [_canonical(message) for message in body.get("messages") or []]
        return "\n".join(parts)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """``prompt_tokens`` and ``cached_tokens`` of a request with ``body``; records its prompt."""
        text = self.prompt(body)
        tokens = estimate_tokens(text)
        key = body.get("prompt_cache_key")
        route = key if isinstance(key, str) else None
        with self._lock:
            now = self.clock()
            alive = [p for p in self._prompts.get(route, []) if p.expires > now]
            shared = max((_common_prefix(p.text, text) for p in alive), default=0)
            shared_tokens = shared // 4
            cached = 0
            if tokens >= self.min_tokens and shared_tokens >= self.min_tokens:
                cached = (
                    self.min_tokens + (shared_tokens - self.min_tokens) // self.step_tokens * self.step_tokens
                )
            for p in alive:
                if _common_prefix(p.text, text) == shared and shared:
                    p.expires = now + self.ttl_s
            alive.append(_Prompt(text, now + self.ttl_s))
            self._prompts[route] = alive[-32:]
            self.totals.requests += 1
            self.totals.input_tokens += tokens
            self.totals.cache_read_tokens += cached
        return {"prompt_tokens": tokens, "cached_tokens": cached}


def _common_prefix(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low
