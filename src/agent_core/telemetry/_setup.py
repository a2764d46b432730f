"""Wires the span builder into a runtime: tracer provider, exporter, batch processor, shutdown."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agent_core.telemetry._exporters import span_exporter
from agent_core.telemetry._spans import SpanBuilder

if TYPE_CHECKING:
    from agent_core.runtime.runs import RunManager

INSTRUMENTATION = "agent_core"


def install_spans(manager: RunManager) -> SpanBuilder:
    services = manager.services
    section = services.settings.telemetry
    provider = TracerProvider(resource=Resource.create({"service.name": "soong-agent"}))
    provider.add_span_processor(BatchSpanProcessor(span_exporter(section)))
    builder = SpanBuilder(
        provider.get_tracer(INSTRUMENTATION),
        lookup=manager.runs.get,
        redactor=services.redactor,
        capture_content=section.capture_content,
    )
    manager.event_observers.append(builder)

    async def shutdown() -> None:
        builder.close()
        await asyncio.to_thread(provider.shutdown)  # flushes the batch processor (bounded by its timeout)

    manager.on_close.append(shutdown)
    return builder
