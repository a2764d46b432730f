"""Error codes and the :class:`AgentCoreError` tree (see :mod:`agent_core.errors.exceptions`)."""

from agent_core.errors.codes import ErrorCode
from agent_core.errors.exceptions import (
    AgentCoreError,
    ConfigError,
    PermissionDeniedError,
    ProviderError,
    SchemaError,
    StorageError,
    ToolError,
)

__all__ = [
    "AgentCoreError",
    "ConfigError",
    "ErrorCode",
    "PermissionDeniedError",
    "ProviderError",
    "SchemaError",
    "StorageError",
    "ToolError",
]
