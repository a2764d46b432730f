"""Wires the span builder into a runtime: tracer provider, exporter, batch processor, shutdown."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from agent_core.telemetry._exporters import span_exporter
from agent_core.telemetry._spans import SpanBuilder
from agent_core.types.runtime import RuntimeEvent

if TYPE_CHECKING:
    from agent_core._runtime.runs import RunManager

INSTRUMENTATION = "agent_core"


class RunTracing:
    """``RunFeatures.telemetry``: hands every delivered event to the span builder; close flushes."""

    def __init__(self, builder: SpanBuilder, provider: TracerProvider) -> None:
        self.builder = builder
        self._provider = provider

    def __call__(self, event: RuntimeEvent) -> None:
        self.builder(event)

    async def close(self) -> None:
        self.builder.close()
        await asyncio.to_thread(
            self._provider.shutdown
        )  # flushes the batch processor (bounded by its timeout)


def install_spans(manager: RunManager) -> RunTracing:
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
    return RunTracing(builder, provider)
