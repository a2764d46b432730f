"""OpenTelemetry traces of runs (docs/runs.md#telemetry), imported only when ``[telemetry] enabled = true``.

:func:`install` returns ``RunFeatures.telemetry``: a :class:`~agent_core.telemetry._spans.SpanBuilder` fed by
every run recorder of a runtime (the event bus; there is no second instrumentation of the loop) and exports through its own
``TracerProvider`` with a batch processor, flushed and shut down when the runtime closes. It needs the
``otel`` extra (``pip install 'soong-agent[otel]'``); without it, opening the runtime fails with
``config_error`` naming ``telemetry.enabled``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core.errors import ConfigError, ErrorCode

if TYPE_CHECKING:
    from agent_core._runtime.runs import RunManager
    from agent_core.telemetry._setup import RunTracing

__all__ = ["install"]


def install(manager: RunManager) -> RunTracing:
    """Starts span export for ``manager``'s runs (raises ``ConfigError`` without the ``otel`` extra)."""
    try:
        from agent_core.telemetry._setup import install_spans
    except ImportError as exc:
        raise ConfigError(
            ErrorCode.config_error,
            f"{manager.services.config.config_path}: telemetry.enabled = true needs OpenTelemetry: install "
            "the otel extra (pip install 'soong-agent[otel]') or set telemetry.enabled = false",
            details={"key": "telemetry.enabled", "missing": getattr(exc, "name", None) or "opentelemetry"},
            cause=exc,
        ) from exc
    return install_spans(manager)
