"""Span exporters for ``[telemetry] exporter``: OTLP/HTTP (protobuf) or one JSON object per line in a file."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from agent_core.config.schema import TelemetrySection


class JsonlSpanExporter(SpanExporter):
    """Appends each finished span as one JSON line (the SDK's ``ReadableSpan.to_json`` shape).

    The file is created with mode 0600 (span attributes may carry redacted content)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._closed = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._closed:
            return SpanExportResult.FAILURE
        lines = [span.to_json(indent=None) + "\n" for span in spans]  # one line per span
        try:
            with self._lock:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                with os.fdopen(fd, "a", encoding="utf-8") as handle:
                    handle.writelines(lines)
        except OSError:
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self._closed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def span_exporter(section: TelemetrySection) -> SpanExporter:
    """The exporter ``[telemetry]`` configures (OTLP/HTTP posts to ``<endpoint>/v1/traces``)."""
    if section.exporter == "jsonl":
        return JsonlSpanExporter(Path(section.path))
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = section.endpoint.rstrip("/")
    if not endpoint.endswith("/v1/traces"):
        endpoint += "/v1/traces"
    options: dict[str, Any] = {"endpoint": endpoint, "timeout": 10}
    return OTLPSpanExporter(**options)
