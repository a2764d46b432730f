"""The trace of a session (``GET /api/sessions/{session_id}/trace``): its runs as a tree of timed spans.

:func:`build_trace` is pure: it reads a session replay (runs, nodes, stored events) and nothing else, so a
trace of a finished session is the same whenever it is asked for; a live run's open spans have no
``end``. What it reads:

* a **run** spans its first to its terminal event (``run_completed`` / ``run_cancelled`` / ``loop_failed``);
  ``run_queued`` to ``run_dequeued`` is its time in the queue; its usage is the run's stored usage record;
* a **model call** spans ``model_started`` (or, earlier, its ``model_completed`` less the call's
  ``latency_ms``: the request went out before the response started) to ``model_completed`` (or
  ``model_failed``) of the same run; its duration is ``latency_ms``, its usage the provider's, priced with the configured prices
  of its provider and model; ``retries`` and the assistant node's ``retry`` metadata say how often the
  request was retried and why; a ``prompt_cache_break`` of the same turn is attached to it;
* a **tool call** spans ``tool_started`` to ``tool_completed`` / ``tool_failed`` / ``tool_denied``; a
  child run (``child_agent_created`` / ``worker_dispatched``) nests under the agent-tool call that
  started it, a compaction run (``compact_started``) under its run;
* **marks** are the moments worth a glance: errors, retries, prompt cache breaks, compactions, model
  fallbacks, context overflows, cancellations.

Event timestamps are for display (the bars of the waterfall); order comes from the session ``seq``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import Field

from agent_core.config._pricing import Prices, cost_usd
from agent_core.server._models import Body
from agent_core.types.model import Usage
from agent_core.types.runtime import Node, ReplayResult, RunInfo, RuntimeEvent

MarkKind = Literal[
    "prompt_cache_break",
    "retry",
    "error",
    "compaction",
    "queued",
    "cancelled",
    "fallback",
    "context_overflow",
]
TERMINAL = frozenset({"run_completed", "run_cancelled", "loop_failed"})
CHILD_STARTS = frozenset({"child_agent_created", "worker_dispatched"})


class TraceUsage(Body):
    """Tokens and cost of a model call, a run or the session (``input_tokens`` is the whole prompt:
    ``uncached_input_tokens`` + ``cache_read_tokens`` + ``cache_write_tokens``)."""

    input_tokens: int = 0
    output_tokens: int = 0
    uncached_input_tokens: int = 0
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    """``None`` when no price is configured for the model."""


class TraceMark(Body):
    kind: MarkKind
    at: datetime
    label: str
    event_type: str
    seq: int | None = None


class ModelSpan(Body):
    kind: Literal["model"] = "model"
    run_id: str
    turn: int | None = None
    provider: str | None = None
    model: str | None = None
    start: datetime
    end: datetime | None = None
    duration_ms: int | None = None
    status: Literal["running", "completed", "failed"] = "running"
    stop_reason: str | None = None
    usage: TraceUsage | None = None
    retries: int = 0
    retry_errors: list[dict[str, Any]] = Field(default_factory=list)
    """Per retried attempt (from the assistant node's ``retry`` metadata): ``attempt``, ``code``,
    ``status_code``, ``backoff_ms`` ..."""
    error: dict[str, Any] | None = None
    cache_break: dict[str, Any] | None = None
    """The ``prompt_cache_break`` payload of this call's turn, when the request stopped repeating the
    previous one."""
    node_id: str | None = None


class ToolSpan(Body):
    kind: Literal["tool"] = "tool"
    run_id: str
    tool_call_id: str
    tool_name: str
    args_summary: str = ""
    start: datetime
    end: datetime | None = None
    duration_ms: int | None = None
    status: Literal["running", "completed", "failed", "denied"] = "running"
    error: dict[str, Any] | None = None
    asked: bool = False
    """The permission gate asked the user (an approval) before the call ran."""
    children: list[RunSpan] = Field(default_factory=list)
    """The child runs this call started (sub-agents, workers), in order."""


class RunSpan(Body):
    kind: Literal["run"] = "run"
    run_id: str
    agent_id: str
    agent_type: str | None = None
    purpose: str | None = None
    parent_run_id: str | None = None
    parent_tool_call_id: str | None = None
    status: str
    end_reason: str | None = None
    start: datetime
    end: datetime | None = None
    duration_ms: int | None = None
    queued_ms: int | None = None
    usage: TraceUsage | None = None
    spans: list[ModelSpan | ToolSpan] = Field(default_factory=list)
    marks: list[TraceMark] = Field(default_factory=list)
    children: list[RunSpan] = Field(default_factory=list)
    """Child runs no tool call started (compaction)."""


class SessionTrace(Body):
    """``GET /api/sessions/{session_id}/trace``: the session's root runs (oldest first), each a tree."""

    session_id: str
    start: datetime | None = None
    end: datetime | None = None
    runs: list[RunSpan] = Field(default_factory=list)
    usage: TraceUsage = Field(default_factory=TraceUsage)


ToolSpan.model_rebuild()
RunSpan.model_rebuild()


def _ms(start: datetime, end: datetime | None) -> int | None:
    return None if end is None else max(0, round((end - start).total_seconds() * 1000))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def trace_usage(record: dict[str, Any] | None, prices: Prices | None = None) -> TraceUsage | None:
    """A usage record (a run's ``usage`` or a model call's) as :class:`TraceUsage`; a model call's cost is
    computed with ``prices`` when its record has none."""
    if not isinstance(record, dict):
        return None
    input_tokens = _int(record.get("input_tokens")) or 0
    read, write = _int(record.get("cache_read_tokens")), _int(record.get("cache_write_tokens"))
    uncached = _int(record.get("uncached_input_tokens"))
    if uncached is None:
        uncached = max(0, input_tokens - (read or 0) - (write or 0))
    cost = record.get("cost_usd")
    if not isinstance(cost, int | float) or isinstance(cost, bool):
        cost = None
    if cost is None and prices is not None:
        usage = Usage(
            input_tokens=input_tokens,
            output_tokens=_int(record.get("output_tokens")) or 0,
            cache_read_tokens=read,
            cache_write_tokens=write,
        )
        cost = cost_usd(usage, prices)
    return TraceUsage(
        input_tokens=input_tokens,
        output_tokens=_int(record.get("output_tokens")) or 0,
        uncached_input_tokens=uncached,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=_int(record.get("reasoning_tokens")),
        cost_usd=None if cost is None else round(float(cost), 9),
    )


def _error_text(error: Any) -> str:
    if isinstance(error, dict):
        return f"{error.get('code', 'error')}: {error.get('message', '')}".strip()
    return str(error or "error")


class _RunWalk:
    """Folds one run's events (session order) into its :class:`RunSpan`."""

    def __init__(self, info: RunInfo, nodes: dict[str, Node], prices: dict[tuple[str, str], Prices]) -> None:
        self.span = RunSpan(
            run_id=info.run_id,
            agent_id=info.agent_id,
            agent_type=info.agent_type,
            purpose=info.purpose,
            parent_run_id=info.parent_run_id,
            status=info.status.value,
            end_reason=info.end_reason.value if info.end_reason is not None else None,
            start=info.created_at,
            usage=trace_usage(info.usage),
        )
        self.nodes = nodes
        self.prices = prices
        self.model: ModelSpan | None = None
        self.tools: dict[str, ToolSpan] = {}
        self.breaks: dict[int, dict[str, Any]] = {}
        self.queued_at: datetime | None = None
        self.seen_first = False

    def mark(self, kind: MarkKind, ev: RuntimeEvent, label: str) -> None:
        self.span.marks.append(
            TraceMark(kind=kind, at=ev.created_at, label=label, event_type=ev.event_type.value, seq=ev.seq)
        )

    def feed(self, ev: RuntimeEvent) -> None:
        name, p = ev.event_type.value, ev.payload
        if not self.seen_first:
            self.seen_first = True
            self.span.start = min(self.span.start, ev.created_at)
        handler = getattr(self, f"_on_{name}", None)
        if handler is not None:
            handler(ev, p)
        if name in TERMINAL:
            self.span.end = ev.created_at

    # ---- runs ----------------------------------------------------------------------------------------
    def _on_run_queued(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.queued_at = ev.created_at
        self.mark("queued", ev, f"queued at position {p.get('queue_position', '?')}")

    def _on_run_dequeued(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        if self.queued_at is not None:
            self.span.queued_ms = _ms(self.queued_at, ev.created_at)

    def _on_run_cancelled(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark("cancelled", ev, f"cancelled: {p.get('reason') or 'by request'}")

    def _on_loop_failed(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark("error", ev, f"run failed: {_error_text(p.get('error'))}")

    def _on_error(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark("error", ev, _error_text(p))

    def _on_compact_started(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark(
            "compaction", ev, f"compaction ({p.get('mode', 'auto')}) of {p.get('tokens_before', '?')} tokens"
        )

    def _on_compact_failed(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark("error", ev, f"compaction failed: {_error_text(p.get('error'))}")

    def _on_model_fallback(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark("fallback", ev, f"fallback {p.get('from_model')} → {p.get('to_model')}")

    def _on_context_overflow(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self.mark("context_overflow", ev, f"prompt too long for {p.get('model')}: compacted and retried")

    # ---- model calls ---------------------------------------------------------------------------------
    def _on_prompt_cache_break(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        cause = f" ({p['cause']})" if p.get("cause") else ""
        self.mark(
            "prompt_cache_break",
            ev,
            f"prompt cache break in {p.get('part')} at {p.get('first_changed')}{cause}",
        )
        turn = _int(p.get("turn"))
        if self.model is not None and self.model.turn == turn and self.model.cache_break is None:
            self.model.cache_break = dict(p)
        elif turn is not None:
            self.breaks[turn] = dict(p)

    def _open_model(self, ev: RuntimeEvent, turn: int | None) -> ModelSpan:
        span = ModelSpan(run_id=self.span.run_id, turn=turn, start=ev.created_at)
        if turn is not None and turn in self.breaks:
            span.cache_break = self.breaks.pop(turn)
        self.span.spans.append(span)
        self.model = span
        return span

    def _on_model_started(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        span = self._open_model(ev, _int(p.get("turn")))
        span.provider, span.model = p.get("provider"), p.get("model")

    def _on_model_completed(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        span = self.model if self.model is not None and self.model.end is None else self._open_model(ev, None)
        node = self.nodes.get(ev.node_id or "")
        meta = node.metadata if node is not None else {}
        span.provider = span.provider or meta.get("provider")
        span.model = span.model or meta.get("model")
        span.end, span.status, span.node_id = ev.created_at, "completed", ev.node_id
        latency = _int(p.get("latency_ms"))
        if latency is not None:  # model_started marks the response's start; the request went out earlier
            span.start = min(span.start, ev.created_at - timedelta(milliseconds=latency))
        span.duration_ms = latency if latency is not None else _ms(span.start, span.end)
        span.stop_reason = p.get("stop_reason")
        prices = self.prices.get((span.provider or "", span.model or ""))
        span.usage = trace_usage(p.get("usage"), prices)
        span.retries = _int(p.get("retries")) or 0
        retry = meta.get("retry")
        if isinstance(retry, dict) and isinstance(retry.get("retries"), list):
            span.retry_errors = [r for r in retry["retries"] if isinstance(r, dict)]
        if span.retries:
            codes = ", ".join(str(r.get("status_code") or r.get("code")) for r in span.retry_errors)
            self.mark(
                "retry",
                ev,
                f"{span.retries} retr{'y' if span.retries == 1 else 'ies'}{f' ({codes})' if codes else ''}",
            )
        self.model = None

    def _on_model_failed(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        span = self.model if self.model is not None and self.model.end is None else self._open_model(ev, None)
        span.end, span.status = ev.created_at, "failed"
        span.duration_ms = _ms(span.start, span.end)
        span.error = p.get("error") if isinstance(p.get("error"), dict) else None
        self.mark("error", ev, f"model call failed: {_error_text(p.get('error'))}")
        self.model = None

    # ---- tool calls ----------------------------------------------------------------------------------
    def _on_tool_started(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        outcome = p.get("permission_outcome")
        span = ToolSpan(
            run_id=self.span.run_id,
            tool_call_id=ev.tool_call_id or "",
            tool_name=str(p.get("tool_name", "")),
            args_summary=str(p.get("args_summary", "")),
            start=ev.created_at,
            asked=bool(isinstance(outcome, dict) and outcome.get("asked")),
        )
        self.tools[span.tool_call_id] = span
        self.span.spans.append(span)

    def _end_tool(
        self, ev: RuntimeEvent, p: dict[str, Any], status: Literal["completed", "failed", "denied"]
    ) -> None:
        span = self.tools.get(ev.tool_call_id or "")
        if span is None:  # denied or failed before it started
            span = ToolSpan(
                run_id=self.span.run_id,
                tool_call_id=ev.tool_call_id or "",
                tool_name=str(p.get("tool_name", "")),
                start=ev.created_at,
            )
            self.tools[span.tool_call_id] = span
            self.span.spans.append(span)
        span.end, span.status = ev.created_at, status
        duration = _int(p.get("duration_ms"))
        span.duration_ms = duration if duration is not None else _ms(span.start, span.end)
        if status == "failed":
            span.error = p.get("error") if isinstance(p.get("error"), dict) else None
            self.mark("error", ev, f"{span.tool_name} failed: {_error_text(p.get('error'))}")
        elif status == "denied":
            span.error = {"code": "denied", "message": str(p.get("reason", ""))}

    def _on_tool_completed(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self._end_tool(ev, p, "completed")

    def _on_tool_failed(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self._end_tool(ev, p, "failed")

    def _on_tool_denied(self, ev: RuntimeEvent, p: dict[str, Any]) -> None:
        self._end_tool(ev, p, "denied")

    def finish(self) -> RunSpan:
        span = self.span
        if span.end is not None:
            span.duration_ms = _ms(span.start, span.end)
        span.spans.sort(key=lambda s: s.start)
        return span


def _child_links(events: list[RuntimeEvent]) -> dict[str, tuple[str, str | None]]:
    """child run id -> (parent run id, the parent's tool call id; ``None`` for a compaction run)."""
    links: dict[str, tuple[str, str | None]] = {}
    for ev in events:
        child = ev.payload.get("child_run_id")
        if not isinstance(child, str) or ev.run_id is None or child in links:
            continue
        name = ev.event_type.value
        if name in CHILD_STARTS:
            call = ev.tool_call_id or ev.payload.get("tool_call_id")
            links[child] = (ev.run_id, call if isinstance(call, str) else None)
        elif name == "compact_started":
            links[child] = (ev.run_id, None)
    return links


def build_trace(replay: ReplayResult, prices: dict[tuple[str, str], Prices] | None = None) -> SessionTrace:
    """The session's trace (see the module docstring); ``prices`` are the configured prices by
    ``(provider, model)`` (:func:`agent_core.config._pricing.configured_prices`)."""
    nodes = {n.node_id: n for n in replay.nodes}
    walks = {r.run_id: _RunWalk(r, nodes, prices or {}) for r in replay.runs}
    events = sorted(replay.events, key=lambda e: (e.seq is None, e.seq or 0))
    for ev in events:
        walk = walks.get(ev.run_id or "")
        if walk is not None:
            walk.feed(ev)
    spans = {run_id: walk.finish() for run_id, walk in walks.items()}
    links = _child_links(events)
    roots: list[RunSpan] = []
    for info in replay.runs:
        span = spans[info.run_id]
        parent_id, call_id = links.get(info.run_id, (info.parent_run_id, None))
        span.parent_tool_call_id = call_id
        parent = spans.get(parent_id or "")
        if parent is None:
            roots.append(span)
            continue
        tool = walks[parent.run_id].tools.get(call_id or "")
        (tool.children if tool is not None else parent.children).append(span)
    roots.sort(key=lambda s: s.start)
    ends = [s.end for s in spans.values() if s.end is not None]
    return SessionTrace(
        session_id=replay.session_id,
        start=min((s.start for s in roots), default=None),
        end=max(ends, default=None) if all(s.end is not None for s in spans.values()) else None,
        runs=roots,
        usage=trace_usage(replay.usage.model_dump() if replay.usage is not None else None) or TraceUsage(),
    )
