"""One internal model call for the memory jobs (no agent, run, hooks or events).

The Memory Extraction Job and the Memory Recall Selector talk to a provider adapter directly. Their
requests carry only ``session_id`` and ``purpose`` in ``metadata`` (never ``agent_id``/``run_id``;
docs/providers.md#the-protocol). :func:`complete` drains one stream and returns its ``model_completed``; a
``model_failed``, an adapter exception or a stream without a terminal event raises
:class:`~agent_core.errors.ProviderError` carrying the provider payload.
"""

from __future__ import annotations

import contextlib
from typing import Any

from agent_core._asset_loader import AssetLoader
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import AgentCoreError, ErrorCode, ProviderError
from agent_core.providers.base import ProviderAdapter
from agent_core.types.model import (
    ModelCompleted,
    ModelFailed,
    ModelMessage,
    ModelRequest,
    ProviderErrorPayload,
    SystemBlock,
)
from agent_core.types.tools import ToolDefinition


def job_request(
    *,
    model: ResolvedModelConfig,
    assets: AssetLoader,
    asset_id: str,
    session_id: str,
    purpose: str,
    messages: list[ModelMessage],
    tools: list[ToolDefinition] | None = None,
) -> ModelRequest:
    """A request whose only system block is the packaged instructions ``asset_id``."""
    asset = assets.load(asset_id)
    system = SystemBlock(
        block_id=asset_id,
        source="core",
        content=asset.text,
        priority=0,
        dynamic=False,
        metadata=dict(asset.template_metadata),
    )
    metadata: dict[str, Any] = {"session_id": session_id, "purpose": purpose, "debug": False}
    return ModelRequest(
        model=model.name,
        system=[system],
        messages=messages,
        tools=list(tools or []),
        temperature=model.temperature,
        max_output_tokens=model.max_output_tokens,
        metadata=metadata,
    )


async def complete(adapter: ProviderAdapter, request: ModelRequest) -> ModelCompleted:
    """Streams ``request`` and returns the final ``model_completed`` event."""
    stream = adapter.stream(request)
    try:
        async for event in stream:
            if isinstance(event, ModelCompleted):
                return event
            if isinstance(event, ModelFailed):
                raise ProviderError.for_payload(event.error)
    except AgentCoreError:
        raise
    except Exception as exc:
        raise ProviderError(
            ErrorCode.provider_error,
            f"model stream failed: {type(exc).__name__}",
            cause=exc,
        ) from exc
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
    raise ProviderError.for_payload(
        ProviderErrorPayload(
            type="protocol",
            code=ErrorCode.provider_error.value,
            message="the model stream ended without a terminal event",
            retryable=False,
        )
    )
