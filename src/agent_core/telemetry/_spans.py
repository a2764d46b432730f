"""OpenTelemetry GenAI spans built from the run event bus (docs/runs.md#telemetry).

:class:`SpanBuilder` is a recorder observer: it sees every event of every run (root and child) in order and
turns them into spans, without a second path through the loop:

* ``loop_started`` opens ``invoke_agent {agent}``; a child run's span is a child of the parent's
  ``execute_tool`` span for the agent-tool call that started it (else of the parent's run span);
  ``run_completed`` / ``loop_failed`` / ``loop_aborted`` close it (end reason, usage and cost attributes).
* ``model_started`` opens ``chat {model}`` (``gen_ai.operation.name``, ``gen_ai.provider.name``,
  ``gen_ai.request.model``); ``model_completed`` adds usage and finish reasons; the assistant's
  ``message_completed`` closes it; ``model_failed`` closes it with an error status.
* ``tool_started`` opens ``execute_tool {tool}`` (``gen_ai.tool.name``, ``gen_ai.tool.call.id``);
  ``tool_completed`` / ``tool_failed`` / ``tool_denied`` close it with ``soong.tool.outcome``.

Span times are the events' timestamps. Message contents (user prompt preview, assistant text, tool argument
and result summaries) are recorded only with ``capture_content`` and go through the storage redactor. An
observer error is logged and never reaches the loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from agent_core._redaction import Redactor
from agent_core.config.model import ResolvedModelConfig
from agent_core.types.enums import EventType
from agent_core.types.runtime import RuntimeEvent

log = logging.getLogger("agent_core.telemetry")


class RunLike(Protocol):
    """What the builder reads about a run when its loop starts (a :class:`RunState` satisfies it)."""

    run_id: str
    agent_id: str
    session_id: str
    purpose: str | None

    @property
    def parent(self) -> Any: ...

    @property
    def model(self) -> ResolvedModelConfig | None: ...

    @property
    def parent_tool_call_id(self) -> str | None: ...


@dataclass(slots=True)
class _RunSpans:
    span: Span
    chat: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    end_reason: str | None = None


def _ns(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000_000)


class SpanBuilder:
    """Event-bus observer that maintains the span tree of every live run."""

    def __init__(
        self,
        tracer: Tracer,
        *,
        lookup: Callable[[str], RunLike | None],
        redactor: Redactor,
        capture_content: bool = False,
    ) -> None:
        self._tracer = tracer
        self._lookup = lookup
        self._redactor = redactor
        self._capture = capture_content
        self._runs: dict[str, _RunSpans] = {}
        self._handlers: dict[EventType, Callable[[RuntimeEvent, _RunSpans], None]] = {
            EventType.message_created: self._message_created,
            EventType.model_started: self._model_started,
            EventType.model_completed: self._model_completed,
            EventType.message_completed: self._message_completed,
            EventType.model_failed: self._model_failed,
            EventType.tool_started: self._tool_started,
            EventType.tool_completed: self._tool_ended,
            EventType.tool_failed: self._tool_ended,
            EventType.tool_denied: self._tool_ended,
            EventType.aborted_tools: self._aborted_tools,
            EventType.loop_completed: self._loop_completed,
            EventType.run_completed: self._run_ended,
            EventType.loop_failed: self._run_ended,
            EventType.loop_aborted: self._run_ended,
        }

    @property
    def open_runs(self) -> int:
        return len(self._runs)

    def __call__(self, event: RuntimeEvent) -> None:
        event_type = event.event_type
        if event_type == EventType.loop_started:
            handler: Callable[[RuntimeEvent, _RunSpans], None] | None = None
        else:
            handler = self._handlers.get(event_type)
            if handler is None:
                return
        try:
            if handler is None:
                self._loop_started(event)
                return
            spans = self._runs.get(event.run_id or "")
            if spans is not None:
                handler(event, spans)
        except Exception:
            log.warning("telemetry: could not record %s of run %s", event_type, event.run_id, exc_info=True)

    def close(self) -> None:
        """Ends every span still open (runtime shutdown)."""
        for spans in list(self._runs.values()):
            self._end_children(spans, None)
            spans.span.end()
        self._runs.clear()

    # ---- runs ---------------------------------------------------------------------------------------
    def _loop_started(self, event: RuntimeEvent) -> None:
        run_id = event.run_id or ""
        state = self._lookup(run_id)
        agent_type = str(event.data.get("agent_type") or "agent")
        name = (state.purpose if state is not None else None) or agent_type
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": name,
            "gen_ai.agent.id": event.agent_id or "",
            "gen_ai.conversation.id": event.session_id,
            "soong.run_id": run_id,
            "soong.agent_type": agent_type,
        }
        context = None
        if state is not None:
            model = state.model
            if model is not None:
                attributes["gen_ai.provider.name"] = model.provider
                attributes["gen_ai.request.model"] = model.name
            parent = state.parent
            if parent is not None:
                attributes["soong.parent_run_id"] = parent.run_id
                parent_spans = self._runs.get(parent.run_id)
                if parent_spans is not None:
                    call_id = state.parent_tool_call_id
                    anchor = parent_spans.tools.get(call_id or "") or parent_spans.span
                    context = trace.set_span_in_context(anchor)
                    if call_id:
                        attributes["soong.parent_tool_call_id"] = call_id
        span = self._tracer.start_span(
            f"invoke_agent {name}",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.created_at),
        )
        self._runs[run_id] = _RunSpans(span)

    def _message_created(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        if self._capture and event.data.get("role") == "user":
            text = str(event.data.get("text_preview") or "")
            spans.span.set_attribute("gen_ai.input.messages", self._messages("user", text))

    def _loop_completed(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        spans.end_reason = str(event.data.get("end_reason") or "")

    def _run_ended(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        if event.event_type == EventType.loop_completed:
            return
        self._runs.pop(event.run_id or "", None)
        when = _ns(event.created_at)
        self._end_children(spans, when)
        payload = event.data
        span = spans.span
        end_reason = str(payload.get("end_reason") or spans.end_reason or "")
        span.set_attribute("soong.end_reason", end_reason)
        span.set_attribute("gen_ai.usage.input_tokens", spans.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", spans.output_tokens)
        usage = payload.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("cost_usd"), int | float):
            span.set_attribute("soong.usage.cost_usd", float(usage["cost_usd"]))
        if event.event_type == EventType.loop_failed:
            error = payload.get("error") if isinstance(payload.get("error"), dict) else {}
            span.set_attribute("error.type", str((error or {}).get("type") or end_reason or "failed"))
            span.set_status(Status(StatusCode.ERROR, str((error or {}).get("message") or end_reason)))
        elif event.event_type == EventType.loop_aborted:
            span.set_attribute("error.type", str(payload.get("abort_reason") or "aborted"))
            span.set_status(Status(StatusCode.ERROR, "aborted"))
        span.end(end_time=when)

    def _end_children(self, spans: _RunSpans, when: int | None) -> None:
        for span in [*spans.tools.values(), *([spans.chat] if spans.chat is not None else [])]:
            span.set_status(Status(StatusCode.ERROR, "unfinished when the run ended"))
            span.end(end_time=when)
        spans.tools.clear()
        spans.chat = None

    # ---- model calls --------------------------------------------------------------------------------
    def _model_started(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        model = str(event.data.get("model") or "")
        spans.chat = self._tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(spans.span),
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": str(event.data.get("provider") or ""),
                "gen_ai.request.model": model,
            },
            start_time=_ns(event.created_at),
        )

    def _model_completed(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        chat = spans.chat
        usage = event.data.get("usage") or {}
        input_tokens = int(usage.get("input_tokens") or 0)
        output_tokens = int(usage.get("output_tokens") or 0)
        spans.input_tokens += input_tokens
        spans.output_tokens += output_tokens
        if chat is None:
            return
        chat.set_attribute("gen_ai.usage.input_tokens", input_tokens)
        chat.set_attribute("gen_ai.usage.output_tokens", output_tokens)
        for key, attr in (
            ("cache_read_tokens", "gen_ai.usage.cache_read.input_tokens"),
            ("cache_write_tokens", "gen_ai.usage.cache_creation.input_tokens"),
        ):
            if isinstance(usage.get(key), int):
                chat.set_attribute(attr, usage[key])
        chat.set_attribute("gen_ai.response.finish_reasons", [str(event.data.get("stop_reason") or "")])

    def _message_completed(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        chat = spans.chat
        if chat is None or event.data.get("role") != "assistant":
            return
        if self._capture:
            chat.set_attribute(
                "gen_ai.output.messages", self._messages("assistant", str(event.data.get("text") or ""))
            )
        chat.end(end_time=_ns(event.created_at))
        spans.chat = None

    def _model_failed(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        chat = spans.chat
        if chat is None:
            return
        error = event.data.get("error") or {}
        chat.set_attribute("error.type", str(error.get("code") or "provider_error"))
        chat.set_status(Status(StatusCode.ERROR, self._redactor.text(str(error.get("message") or ""))))
        chat.end(end_time=_ns(event.created_at))
        spans.chat = None

    # ---- tool calls ---------------------------------------------------------------------------------
    def _tool_started(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        call_id = event.tool_call_id or ""
        span = self._start_tool(event, spans)
        if self._capture:
            summary = event.data.get("args_summary")
            span.set_attribute("gen_ai.tool.call.arguments", self._content(summary))
        spans.tools[call_id] = span

    def _start_tool(self, event: RuntimeEvent, spans: _RunSpans) -> Span:
        name = str(event.data.get("tool_name") or "")
        return self._tracer.start_span(
            f"execute_tool {name}",
            context=trace.set_span_in_context(spans.span),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": name,
                "gen_ai.tool.call.id": event.tool_call_id or "",
            },
            start_time=_ns(event.created_at),
        )

    def _tool_ended(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        span = spans.tools.pop(event.tool_call_id or "", None) or self._start_tool(event, spans)
        outcome = {
            EventType.tool_completed: "completed",
            EventType.tool_failed: "failed",
            EventType.tool_denied: "denied",
        }[event.event_type]
        span.set_attribute("soong.tool.outcome", outcome)
        if outcome == "completed":
            if self._capture:
                span.set_attribute("gen_ai.tool.call.result", self._content(event.data.get("summary")))
        else:
            error = event.data.get("error") or {}
            span.set_attribute("error.type", str(error.get("code") or outcome))
            span.set_status(Status(StatusCode.ERROR, outcome))
        span.end(end_time=_ns(event.created_at))

    def _aborted_tools(self, event: RuntimeEvent, spans: _RunSpans) -> None:
        for call_id in event.data.get("tool_call_ids") or []:
            span = spans.tools.pop(str(call_id), None)
            if span is not None:
                span.set_attribute("soong.tool.outcome", "aborted")
                span.set_status(Status(StatusCode.ERROR, "aborted"))
                span.end(end_time=_ns(event.created_at))

    # ---- content ------------------------------------------------------------------------------------
    def _content(self, value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return self._redactor.text(text)

    def _messages(self, role: str, text: str) -> str:
        parts = [{"type": "text", "content": self._redactor.text(text)}]
        return json.dumps([{"role": role, "parts": parts}], ensure_ascii=False)
