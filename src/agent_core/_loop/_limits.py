"""Run limits and loop detection (docs/runs.md#limits): pure budget policy, no I/O.

* :class:`Budget` is the consumption of one root run's agent tree: every child run holds the *same* object,
  so a sub-agent's tokens, tool calls and cost count against its parent's limits. Wall time runs from the
  root run's start.
* :meth:`RunLimits.before_model_call` and :meth:`RunLimits.admit_tool_calls` return a :class:`Breach` when
  a limit is reached (the spent budget allows no further normal step); the driver then makes one final
  model call without tools and ends with ``end_reason = "limit_reached"``.
* :class:`RepeatDetector` counts the same tool with the same arguments and the same result in a row: at
  ``repeat_tool_call_limit`` repetitions the model gets a runtime note (once per call signature); the next
  repetition is a ``loop_detected`` breach.
* ``limits.max_turns`` stays the per-run turn limit of docs/runs.md#end-reasons
  (``end_reason = "max_turns"``); it is enforced by the driver, not here.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agent_core._jsontext import compact_json
from agent_core.config._pricing import Prices, cost_usd
from agent_core.errors import ErrorCode
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EndReason
from agent_core.types.model import ToolCall, Usage
from agent_core.types.tools import ToolResult

LimitName = Literal["max_total_tokens", "max_tool_calls", "max_wall_time_ms", "max_cost_usd"]
RepeatVerdict = Literal["ok", "warn", "loop"]


def usage_record(usage: Usage, cost: float | None) -> dict[str, Any]:
    """A run's usage as stored in ``runs.usage_json`` and carried by ``run_completed``: the :class:`Usage`
    fields, the input split (``uncached_input_tokens`` beside the cache counters) and ``cost_usd``."""
    return {
        **usage.model_dump(),
        "uncached_input_tokens": usage.uncached_input_tokens,
        "cost_usd": _round_cost(cost),
    }


def usage_of_record(record: dict[str, Any]) -> Usage:
    """The :class:`Usage` of a :func:`usage_record` (its derived ``uncached_input_tokens`` and
    ``cost_usd`` left out)."""
    fields = {k: v for k, v in record.items() if k not in ("uncached_input_tokens", "cost_usd", "by_model")}
    return Usage.model_validate(fields)


def _round_cost(cost: float | None) -> float | None:
    return None if cost is None else round(cost, 9)


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """The budget keys of ``[limits]`` (``None`` = unlimited)."""

    max_total_tokens: int | None = None
    max_tool_calls: int | None = None
    max_wall_time_ms: int | None = None
    max_cost_usd: float | None = None
    repeat_tool_call_limit: int = 3

    @classmethod
    def from_section(cls, section: Any) -> LimitConfig:
        return cls(
            max_total_tokens=section.max_total_tokens,
            max_tool_calls=section.max_tool_calls,
            max_wall_time_ms=section.max_wall_time_ms,
            max_cost_usd=section.max_cost_usd,
            repeat_tool_call_limit=section.repeat_tool_call_limit,
        )


@dataclass(frozen=True, slots=True)
class Breach:
    """Why the run ends after one final answer call: a spent limit or a detected loop."""

    end_reason: EndReason
    limit: str
    """The ``[limits]`` key: ``max_total_tokens`` … or ``repeat_tool_call_limit``."""
    value: float | int
    used: float | int
    tool_name: str | None = None

    def error(self) -> ErrorPayload:
        details: dict[str, Any] = {"limit": self.limit, "value": self.value, "used": self.used}
        if self.end_reason == EndReason.loop_detected:
            details["tool_name"] = self.tool_name
            message = (
                f"the run repeated tool {self.tool_name!r} with the same arguments and result "
                f"{self.used} times in a row (limits.{self.limit} = {self.value})"
            )
        else:
            message = f"the run reached limits.{self.limit} = {self.value} (used {self.used})"
        return ErrorPayload(
            type=self.end_reason.value,
            code=ErrorCode.validation_error,
            message=message,
            details=details,
            redacted=True,
        )

    def note(self) -> str:
        """The runtime note that asks the model for its final answer (the final call has no tools)."""
        if self.end_reason == EndReason.loop_detected:
            why = f"you keep calling {self.tool_name!r} with the same arguments and getting the same result"
        else:
            why = f"this run reached its limit {self.limit} = {self.value}"
        return (
            f"Runtime note: {why}. No tools are available any more. Reply now with your final answer: "
            "what you found or did, and what remains unfinished."
        )


class Budget:
    """Consumption of one root run's agent tree; shared by reference with every child run."""

    __slots__ = ("_clock", "config", "cost_usd", "started", "tokens", "tool_calls")

    def __init__(self, config: LimitConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self.started = clock()
        self.tokens = 0
        self.tool_calls = 0
        self.cost_usd = 0.0

    def elapsed_ms(self) -> int:
        return int((self._clock() - self.started) * 1000)

    def add_usage(self, usage: Usage, cost: float | None) -> None:
        self.tokens += usage.total_tokens or (usage.input_tokens + usage.output_tokens)
        if cost is not None:
            self.cost_usd += cost

    def spent(self) -> Breach | None:
        """The first limit the tree has reached (checked before every model call)."""
        c = self.config
        reached = EndReason.limit_reached
        if c.max_total_tokens is not None and self.tokens >= c.max_total_tokens:
            return Breach(reached, "max_total_tokens", c.max_total_tokens, self.tokens)
        if c.max_cost_usd is not None and self.cost_usd >= c.max_cost_usd:
            return Breach(reached, "max_cost_usd", c.max_cost_usd, _round_cost(self.cost_usd) or 0.0)
        if c.max_tool_calls is not None and self.tool_calls >= c.max_tool_calls:
            return Breach(reached, "max_tool_calls", c.max_tool_calls, self.tool_calls)
        if c.max_wall_time_ms is not None:
            elapsed = self.elapsed_ms()
            if elapsed >= c.max_wall_time_ms:
                return Breach(reached, "max_wall_time_ms", c.max_wall_time_ms, elapsed)
        return None

    def admit_tool_calls(self, count: int) -> Breach | None:
        """Counts ``count`` calls of one turn, or returns the breach when they would exceed the limit."""
        c = self.config
        if c.max_tool_calls is not None and self.tool_calls + count > c.max_tool_calls:
            return Breach(
                EndReason.limit_reached, "max_tool_calls", c.max_tool_calls, self.tool_calls + count
            )
        if c.max_wall_time_ms is not None:
            elapsed = self.elapsed_ms()
            if elapsed >= c.max_wall_time_ms:
                return Breach(EndReason.limit_reached, "max_wall_time_ms", c.max_wall_time_ms, elapsed)
        self.tool_calls += count
        return None


def _signature(call: ToolCall, result: ToolResult) -> str:
    body = compact_json(
        [
            call.name,
            call.arguments,
            result.is_error,
            [b.model_dump(mode="json", exclude={"metadata"}) for b in result.content],
        ],
        sort_keys=True,
    )
    return hashlib.sha256(body.encode()).hexdigest()


@dataclass(slots=True)
class RepeatDetector:
    """Same tool + same arguments + same result ``limit`` times in a row (one run's calls, model order)."""

    limit: int
    _last: str | None = None
    _streak: int = 0
    _warned: set[str] = field(default_factory=set)

    def observe(self, call: ToolCall, result: ToolResult) -> RepeatVerdict:
        signature = _signature(call, result)
        self._streak = self._streak + 1 if signature == self._last else 1
        self._last = signature
        if self._streak < self.limit:
            return "ok"
        if signature in self._warned:
            return "loop"
        self._warned.add(signature)
        return "warn"

    @property
    def streak(self) -> int:
        return self._streak

    def snapshot(self) -> RepeatState:
        """The detector's state (JSON-shaped), to carry it across processes (the temporal engine's steps)."""
        return RepeatState(last=self._last, streak=self._streak, warned=tuple(sorted(self._warned)))

    def restore(self, state: RepeatState) -> None:
        """Continues from a :meth:`snapshot` (the same ``limit``)."""
        self._last, self._streak, self._warned = state.last, state.streak, set(state.warned)


@dataclass(slots=True, frozen=True)
class RepeatState:
    """What :class:`RepeatDetector` remembers: the last call's signature, how many times in a row it came,
    and the signatures it already warned about."""

    last: str | None = None
    streak: int = 0
    warned: tuple[str, ...] = ()


@dataclass(slots=True)
class TurnVerdict:
    """What the loop does after a tool turn: nothing, tell the model it repeats itself, or end the run."""

    note: str | None = None
    breach: Breach | None = None


@dataclass(slots=True)
class RunLimits:
    """One run's view of the limits: the tree's shared :class:`Budget`, its own prices and repeat count."""

    budget: Budget
    prices: Prices = field(default_factory=Prices)
    repeat: RepeatDetector | None = None
    enforce: bool = True
    """False for compaction runs: their consumption counts, but they are never stopped by the budget."""

    def __post_init__(self) -> None:
        if self.repeat is None:
            self.repeat = RepeatDetector(self.budget.config.repeat_tool_call_limit)

    def record_usage(self, usage: Usage) -> None:
        self.budget.add_usage(usage, cost_usd(usage, self.prices))

    def before_model_call(self) -> Breach | None:
        return self.budget.spent() if self.enforce else None

    def admit_tool_calls(self, count: int) -> Breach | None:
        if not self.enforce:
            self.budget.tool_calls += count
            return None
        return self.budget.admit_tool_calls(count)

    def after_tools(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> TurnVerdict:
        """Feeds the turn's results (matched by call id, in model call order) to the repeat detector."""
        assert self.repeat is not None
        by_id = {r.tool_call_id: r for r in results}
        verdict = TurnVerdict()
        for call in calls:
            result = by_id.get(call.tool_call_id)
            if result is None:
                continue
            seen = self.repeat.observe(call, result)
            if seen == "loop" and self.enforce:
                limit = self.repeat.limit
                verdict.breach = Breach(
                    EndReason.loop_detected, "repeat_tool_call_limit", limit, self.repeat.streak, call.name
                )
                return verdict
            if seen == "warn" and self.enforce:
                verdict.note = (
                    f"Runtime note: you called {call.name!r} {self.repeat.streak} times in a row with the same "
                    "arguments and got the same result each time. Do not repeat this call: change your "
                    "approach, or give your final answer if you cannot make progress."
                )
        return verdict
