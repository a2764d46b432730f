"""soong-agent: an async SDK that runs LLM agents on a real project, safely and durably.

Only the stable SDK names of contract.md §2 are exported. They are resolved lazily on first attribute
access so that ``import agent_core`` (and the CLI's cold start) stays cheap.
"""

from __future__ import annotations

import importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

_logging.getLogger("agent_core").addHandler(_logging.NullHandler())

_EXPORTS: dict[str, str] = {
    "AgentRuntime": "agent_core.api.runtime",
    "RunHandle": "agent_core.api.handles",
    "UserMessage": "agent_core.types.runtime",
    "RuntimeEvent": "agent_core.types.runtime",
    "AgentDefinition": "agent_core.types.runtime",
    "CancelResult": "agent_core.types.runtime",
    "ReplayResult": "agent_core.types.runtime",
    "InspectResult": "agent_core.types.runtime",
    "DeleteSessionResult": "agent_core.types.runtime",
    "CleanupResult": "agent_core.types.runtime",
    "Node": "agent_core.types.runtime",
    "ContextBuildReport": "agent_core.types.runtime",
    "PermissionRequest": "agent_core.types.permissions",
    "PermissionDecision": "agent_core.types.permissions",
    "ToolDefinition": "agent_core.types.tools",
    "ToolResult": "agent_core.types.tools",
    "ErrorPayload": "agent_core.types.content",
    "TextBlock": "agent_core.types.content",
    "JsonBlock": "agent_core.types.content",
    "ToolCallBlock": "agent_core.types.content",
    "ToolResultBlock": "agent_core.types.content",
    "ArtifactRefBlock": "agent_core.types.content",
    "ContentBlock": "agent_core.types.content",
    "ErrorCode": "agent_core.errors",
    "AgentCoreError": "agent_core.errors",
    "ConfigError": "agent_core.errors",
    "ProviderError": "agent_core.errors",
    "ToolError": "agent_core.errors",
    "StorageError": "agent_core.errors",
    "SchemaError": "agent_core.errors",
    "PermissionDeniedError": "agent_core.errors",
    "RunStatus": "agent_core.types.enums",
    "RunMode": "agent_core.types.enums",
    "EndReason": "agent_core.types.enums",
    "EventType": "agent_core.types.enums",
    "PermissionDecisionKind": "agent_core.types.enums",
    "ProviderRegistry": "agent_core.providers.registry",
    "ToolRegistry": "agent_core.tools.registry",
}

__all__ = [
    "AgentCoreError",
    "AgentDefinition",
    "AgentRuntime",
    "ArtifactRefBlock",
    "CancelResult",
    "CleanupResult",
    "ConfigError",
    "ContentBlock",
    "ContextBuildReport",
    "DeleteSessionResult",
    "EndReason",
    "ErrorCode",
    "ErrorPayload",
    "EventType",
    "InspectResult",
    "JsonBlock",
    "Node",
    "PermissionDecision",
    "PermissionDecisionKind",
    "PermissionDeniedError",
    "PermissionRequest",
    "ProviderError",
    "ProviderRegistry",
    "ReplayResult",
    "RunHandle",
    "RunMode",
    "RunStatus",
    "RuntimeEvent",
    "SchemaError",
    "StorageError",
    "TextBlock",
    "ToolCallBlock",
    "ToolDefinition",
    "ToolError",
    "ToolRegistry",
    "ToolResult",
    "ToolResultBlock",
    "UserMessage",
]

if TYPE_CHECKING:
    from agent_core.api.handles import RunHandle
    from agent_core.api.runtime import AgentRuntime
    from agent_core.errors import (
        AgentCoreError,
        ConfigError,
        ErrorCode,
        PermissionDeniedError,
        ProviderError,
        SchemaError,
        StorageError,
        ToolError,
    )
    from agent_core.providers.registry import ProviderRegistry
    from agent_core.tools.registry import ToolRegistry
    from agent_core.types.content import (
        ArtifactRefBlock,
        ContentBlock,
        ErrorPayload,
        JsonBlock,
        TextBlock,
        ToolCallBlock,
        ToolResultBlock,
    )
    from agent_core.types.enums import EndReason, EventType, PermissionDecisionKind, RunMode, RunStatus
    from agent_core.types.permissions import PermissionDecision, PermissionRequest
    from agent_core.types.runtime import (
        AgentDefinition,
        CancelResult,
        CleanupResult,
        ContextBuildReport,
        DeleteSessionResult,
        InspectResult,
        Node,
        ReplayResult,
        RuntimeEvent,
        UserMessage,
    )
    from agent_core.types.tools import ToolDefinition, ToolResult


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
