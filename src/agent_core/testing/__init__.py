"""Public testing kit: scripted wire-protocol servers (more in later commits)."""

from agent_core.testing._servers import (
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    ScriptedRequest,
    ScriptedServer,
)
from agent_core.testing._wire import AnthropicWire, OllamaWire, OpenAIWire

__all__ = [
    "AnthropicWire",
    "OllamaWire",
    "OpenAIWire",
    "ScriptedAnthropicServer",
    "ScriptedOllamaServer",
    "ScriptedOpenAIServer",
    "ScriptedRequest",
    "ScriptedServer",
]
