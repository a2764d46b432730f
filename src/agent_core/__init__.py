"""soong-agent: an async SDK that runs LLM agents on a real project, safely and durably.

Only the stable SDK names of docs/architecture.md#public-surface are exported. The ``if TYPE_CHECKING:`` block
below is the list of them type checkers read (``X as X`` marks an explicit re-export); at run time
``_EXPORTS`` maps each name to its module (the same list as data, checked by a test, so nothing parses this
file), so ``import agent_core`` (and the CLI's cold start) imports nothing else and each name's module is
imported on first attribute access. ``__all__`` is derived from the map.
"""

from __future__ import annotations

import importlib
import logging as _logging
from typing import TYPE_CHECKING, Any

_logging.getLogger("agent_core").addHandler(_logging.NullHandler())

if TYPE_CHECKING:
    from agent_core._api.handles import RunHandle as RunHandle
    from agent_core._api.runtime import AgentRuntime as AgentRuntime
    from agent_core.errors import AgentCoreError as AgentCoreError
    from agent_core.errors import AgentDefinitionError as AgentDefinitionError
    from agent_core.errors import ChildAgentLimitError as ChildAgentLimitError
    from agent_core.errors import ConfigError as ConfigError
    from agent_core.errors import ErrorCode as ErrorCode
    from agent_core.errors import FileOperationError as FileOperationError
    from agent_core.errors import InternalError as InternalError
    from agent_core.errors import InvalidArgumentError as InvalidArgumentError
    from agent_core.errors import InvalidArgumentTypeError as InvalidArgumentTypeError
    from agent_core.errors import MemoryOperationError as MemoryOperationError
    from agent_core.errors import MigrationError as MigrationError
    from agent_core.errors import NotFoundError as NotFoundError
    from agent_core.errors import OperationCancelledError as OperationCancelledError
    from agent_core.errors import OperationTimeoutError as OperationTimeoutError
    from agent_core.errors import PermissionDeniedError as PermissionDeniedError
    from agent_core.errors import ProviderAuthError as ProviderAuthError
    from agent_core.errors import ProviderError as ProviderError
    from agent_core.errors import ProviderRateLimitError as ProviderRateLimitError
    from agent_core.errors import ProviderTimeoutError as ProviderTimeoutError
    from agent_core.errors import SchemaError as SchemaError
    from agent_core.errors import SessionBusyError as SessionBusyError
    from agent_core.errors import SessionNotFoundError as SessionNotFoundError
    from agent_core.errors import SkillError as SkillError
    from agent_core.errors import StepError as StepError
    from agent_core.errors import StepNotFoundError as StepNotFoundError
    from agent_core.errors import StorageError as StorageError
    from agent_core.errors import TaskError as TaskError
    from agent_core.errors import TaskNotFoundError as TaskNotFoundError
    from agent_core.errors import TaskWalUnavailableError as TaskWalUnavailableError
    from agent_core.errors import ToolError as ToolError
    from agent_core.errors import ToolNotAvailableError as ToolNotAvailableError
    from agent_core.errors import UnsupportedCapabilityError as UnsupportedCapabilityError
    from agent_core.errors import WorkerUnavailableError as WorkerUnavailableError
    from agent_core.providers.registry import ProviderRegistry as ProviderRegistry
    from agent_core.tools.registry import ToolRegistry as ToolRegistry
    from agent_core.types.content import ArtifactRefBlock as ArtifactRefBlock
    from agent_core.types.content import ContentBlock as ContentBlock
    from agent_core.types.content import DocumentBlock as DocumentBlock
    from agent_core.types.content import ErrorPayload as ErrorPayload
    from agent_core.types.content import ImageBlock as ImageBlock
    from agent_core.types.content import JsonBlock as JsonBlock
    from agent_core.types.content import ReasoningBlock as ReasoningBlock
    from agent_core.types.content import TextBlock as TextBlock
    from agent_core.types.content import ToolCallBlock as ToolCallBlock
    from agent_core.types.content import ToolResultBlock as ToolResultBlock
    from agent_core.types.enums import EndReason as EndReason
    from agent_core.types.enums import EventType as EventType
    from agent_core.types.enums import PermissionDecisionKind as PermissionDecisionKind
    from agent_core.types.enums import RunMode as RunMode
    from agent_core.types.enums import RunStatus as RunStatus
    from agent_core.types.events import EventPayload as EventPayload
    from agent_core.types.events import RuntimeEventPayload as RuntimeEventPayload
    from agent_core.types.hooks import GuardrailInput as GuardrailInput
    from agent_core.types.hooks import GuardrailResult as GuardrailResult
    from agent_core.types.hooks import Hook as Hook
    from agent_core.types.hooks import HookContext as HookContext
    from agent_core.types.hooks import HookResult as HookResult
    from agent_core.types.hooks import OutputGuardrail as OutputGuardrail
    from agent_core.types.hooks import PostToolUseHook as PostToolUseHook
    from agent_core.types.hooks import PostToolUseInput as PostToolUseInput
    from agent_core.types.hooks import PreToolUseHook as PreToolUseHook
    from agent_core.types.hooks import PreToolUseInput as PreToolUseInput
    from agent_core.types.hooks import SessionStartHook as SessionStartHook
    from agent_core.types.hooks import SessionStartInput as SessionStartInput
    from agent_core.types.hooks import StopHook as StopHook
    from agent_core.types.hooks import StopInput as StopInput
    from agent_core.types.hooks import UserPromptSubmitHook as UserPromptSubmitHook
    from agent_core.types.hooks import UserPromptSubmitInput as UserPromptSubmitInput
    from agent_core.types.permissions import PermissionDecision as PermissionDecision
    from agent_core.types.permissions import PermissionRequest as PermissionRequest
    from agent_core.types.runtime import AgentDefinition as AgentDefinition
    from agent_core.types.runtime import Attachment as Attachment
    from agent_core.types.runtime import CancelResult as CancelResult
    from agent_core.types.runtime import CleanupResult as CleanupResult
    from agent_core.types.runtime import ContextBuildReport as ContextBuildReport
    from agent_core.types.runtime import DeleteSessionResult as DeleteSessionResult
    from agent_core.types.runtime import InspectResult as InspectResult
    from agent_core.types.runtime import Node as Node
    from agent_core.types.runtime import ReplayResult as ReplayResult
    from agent_core.types.runtime import RuntimeEvent as RuntimeEvent
    from agent_core.types.runtime import UserMessage as UserMessage
    from agent_core.types.tools import ToolDefinition as ToolDefinition
    from agent_core.types.tools import ToolResult as ToolResult


_EXPORTS: dict[str, str] = {
    "RunHandle": "agent_core._api.handles",
    "AgentRuntime": "agent_core._api.runtime",
    "AgentCoreError": "agent_core.errors",
    "AgentDefinitionError": "agent_core.errors",
    "ChildAgentLimitError": "agent_core.errors",
    "ConfigError": "agent_core.errors",
    "ErrorCode": "agent_core.errors",
    "FileOperationError": "agent_core.errors",
    "InternalError": "agent_core.errors",
    "InvalidArgumentError": "agent_core.errors",
    "InvalidArgumentTypeError": "agent_core.errors",
    "MemoryOperationError": "agent_core.errors",
    "MigrationError": "agent_core.errors",
    "NotFoundError": "agent_core.errors",
    "OperationCancelledError": "agent_core.errors",
    "OperationTimeoutError": "agent_core.errors",
    "PermissionDeniedError": "agent_core.errors",
    "ProviderAuthError": "agent_core.errors",
    "ProviderError": "agent_core.errors",
    "ProviderRateLimitError": "agent_core.errors",
    "ProviderTimeoutError": "agent_core.errors",
    "SchemaError": "agent_core.errors",
    "SessionBusyError": "agent_core.errors",
    "SessionNotFoundError": "agent_core.errors",
    "SkillError": "agent_core.errors",
    "StepError": "agent_core.errors",
    "StepNotFoundError": "agent_core.errors",
    "StorageError": "agent_core.errors",
    "TaskError": "agent_core.errors",
    "TaskNotFoundError": "agent_core.errors",
    "TaskWalUnavailableError": "agent_core.errors",
    "ToolError": "agent_core.errors",
    "ToolNotAvailableError": "agent_core.errors",
    "UnsupportedCapabilityError": "agent_core.errors",
    "WorkerUnavailableError": "agent_core.errors",
    "ProviderRegistry": "agent_core.providers.registry",
    "ToolRegistry": "agent_core.tools.registry",
    "ArtifactRefBlock": "agent_core.types.content",
    "ContentBlock": "agent_core.types.content",
    "DocumentBlock": "agent_core.types.content",
    "ErrorPayload": "agent_core.types.content",
    "ImageBlock": "agent_core.types.content",
    "JsonBlock": "agent_core.types.content",
    "ReasoningBlock": "agent_core.types.content",
    "TextBlock": "agent_core.types.content",
    "ToolCallBlock": "agent_core.types.content",
    "ToolResultBlock": "agent_core.types.content",
    "EndReason": "agent_core.types.enums",
    "EventType": "agent_core.types.enums",
    "PermissionDecisionKind": "agent_core.types.enums",
    "RunMode": "agent_core.types.enums",
    "RunStatus": "agent_core.types.enums",
    "EventPayload": "agent_core.types.events",
    "RuntimeEventPayload": "agent_core.types.events",
    "GuardrailInput": "agent_core.types.hooks",
    "GuardrailResult": "agent_core.types.hooks",
    "Hook": "agent_core.types.hooks",
    "HookContext": "agent_core.types.hooks",
    "HookResult": "agent_core.types.hooks",
    "OutputGuardrail": "agent_core.types.hooks",
    "PostToolUseHook": "agent_core.types.hooks",
    "PostToolUseInput": "agent_core.types.hooks",
    "PreToolUseHook": "agent_core.types.hooks",
    "PreToolUseInput": "agent_core.types.hooks",
    "SessionStartHook": "agent_core.types.hooks",
    "SessionStartInput": "agent_core.types.hooks",
    "StopHook": "agent_core.types.hooks",
    "StopInput": "agent_core.types.hooks",
    "UserPromptSubmitHook": "agent_core.types.hooks",
    "UserPromptSubmitInput": "agent_core.types.hooks",
    "PermissionDecision": "agent_core.types.permissions",
    "PermissionRequest": "agent_core.types.permissions",
    "AgentDefinition": "agent_core.types.runtime",
    "Attachment": "agent_core.types.runtime",
    "CancelResult": "agent_core.types.runtime",
    "CleanupResult": "agent_core.types.runtime",
    "ContextBuildReport": "agent_core.types.runtime",
    "DeleteSessionResult": "agent_core.types.runtime",
    "InspectResult": "agent_core.types.runtime",
    "Node": "agent_core.types.runtime",
    "ReplayResult": "agent_core.types.runtime",
    "RuntimeEvent": "agent_core.types.runtime",
    "UserMessage": "agent_core.types.runtime",
    "ToolDefinition": "agent_core.types.tools",
    "ToolResult": "agent_core.types.tools",
}
"""Exported name → defining module: the ``if TYPE_CHECKING:`` block above as data (a test checks they agree)."""


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return sorted(_EXPORTS)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
