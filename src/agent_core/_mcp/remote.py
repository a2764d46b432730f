"""SDK-neutral records exchanged with the MCP client module (no ``mcp`` import here).

The client converts SDK objects into these plain records so that the rest of the core never sees an SDK
type; a future SDK major version only touches :mod:`agent_core._mcp.client`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class RemoteTool:
    """One entry of ``tools/list``: name verbatim, description, raw ``inputSchema`` and annotations."""

    name: str
    description: str
    input_schema: Any
    annotations: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class RemoteResult:
    """A ``tools/call`` result: content items as JSON dicts (``type`` = text/image/audio/resource/...)."""

    items: list[dict[str, Any]] = field(default_factory=list)
    structured: Any | None = None
    is_error: bool = False


class McpTransportError(Exception):
    """The connection is unusable (process exited, stream closed, HTTP transport failure)."""


class McpCallError(Exception):
    """The server answered the request with a JSON-RPC error (the connection is still fine)."""


class McpTimeoutError(Exception):
    """No answer within the allowed time."""


@dataclass(frozen=True, slots=True)
class RemoteResource:
    """One entry of ``resources/list`` (or a template of ``resources/templates/list``: ``template``)."""

    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None
    template: bool = False


@dataclass(frozen=True, slots=True)
class ResourceContent:
    """One item of ``resources/read``: text, or base64 ``blob`` for binary contents."""

    uri: str
    mime_type: str | None = None
    text: str | None = None
    blob: str | None = None


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True, slots=True)
class RemotePrompt:
    """One entry of ``prompts/list``."""

    name: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message of ``prompts/get``: its role and its text (embedded text resources inlined; other
    content as a ``[kind content]`` marker)."""

    role: str
    text: str


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """A server's ``sampling/createMessage``: messages as ``(role, text)``, the server's preferences."""

    messages: tuple[PromptMessage, ...]
    max_tokens: int
    system_prompt: str | None = None
    temperature: float | None = None
    stop_sequences: tuple[str, ...] = ()
    model_hints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SamplingReply:
    text: str
    model: str
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A server's ``elicitation/create`` in form mode: the question and the JSON schema of the answer
    (an object of primitive properties), or URL mode (``url``: the user is sent there)."""

    message: str
    requested_schema: dict[str, Any] = field(default_factory=dict)
    url: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationReply:
    action: str
    """``accept``, ``decline`` or ``cancel``."""
    content: dict[str, Any] | None = None


class McpRequestRefused(Exception):
    """The host refuses a server's request (sampling outside a call, declined by the user, a limit):
    the server gets a JSON-RPC error with this message."""


class ClientHandlers(Protocol):
    """What a connection asks its host for when the server sends a request (one object per server)."""

    async def sample(self, request: SamplingRequest) -> SamplingReply:
        """Answers ``sampling/createMessage`` (raise :class:`McpRequestRefused` to refuse)."""
        ...

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        """Answers ``elicitation/create`` (raise :class:`McpRequestRefused` to refuse)."""
        ...

    def roots(self) -> list[tuple[str, str]]:
        """``roots/list``: ``(file:// URI, name)`` pairs."""
        ...
