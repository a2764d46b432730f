"""Per-provider frames for the runtime-level fault tests (the three scripted wire-protocol servers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.fixtures.scripted_servers import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    Response,
    ScriptedRequest,
    ScriptedServer,
    advertised_tool_name,
    error,
)

CHAT_PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "ollama": "/api/chat"}


@dataclass
class Wire:
    name: str
    server: ScriptedServer

    def config(self, **model: Any) -> dict[str, Any]:
        api_key_env = "" if self.name == "ollama" else "SOONG_TEST_API_KEY"
        return {
            "model": {
                "provider": self.name,
                "base_url": self.server.base_url,
                "api_key_env": api_key_env,
                **model,
            }
        }

    def chats(self) -> list[ScriptedRequest]:
        return self.server.requests_to(CHAT_PATHS[self.name])

    def text(self, *parts: str) -> list[str]:
        if self.name == "openai":
            return OpenAIWire.text_stream(*parts)
        if self.name == "anthropic":
            return AnthropicWire.text_stream(*parts)
        return OllamaWire.text_stream(*parts)

    def tool(
        self, request: ScriptedRequest, contains: str, arguments: dict[str, Any], call_id: str
    ) -> list[str]:
        name = advertised_tool_name(request, contains)
        if self.name == "openai":
            return OpenAIWire.tool_stream([(call_id, name, arguments)])
        if self.name == "anthropic":
            return AnthropicWire.tool_stream([(call_id, name, arguments)])
        return [OllamaWire.tool_calls([(name, arguments)]), OllamaWire.done("stop")]

    def preamble(self) -> list[str]:
        """Frames that yield no delta (a retry is still allowed after them)."""
        if self.name == "openai":
            return [OpenAIWire.role()]
        if self.name == "anthropic":
            return [AnthropicWire.message_start(), AnthropicWire.text_start(0), AnthropicWire.ping()]
        return []

    def partial(self, text: str) -> list[str]:
        """Frames up to and including one text delta."""
        if self.name == "openai":
            return [OpenAIWire.role(), OpenAIWire.text(text)]
        if self.name == "anthropic":
            return [
                AnthropicWire.message_start(),
                AnthropicWire.text_start(0),
                AnthropicWire.text_delta(0, text),
            ]
        return [OllamaWire.content(text)]

    def malformed(self) -> list[str]:
        """A body that is not the vendor's wire format (undecodable chunk)."""
        if self.name == "openai":
            return [OpenAIWire.role(), "data: {this is not json\n\n", OpenAIWire.DONE]
        if self.name == "anthropic":
            return [AnthropicWire.message_start(), "event: content_block_delta\ndata: {broken\n\n"]
        return ['{"model": "test-model", "message": {broken\n']

    def server_error(self, status: int) -> Response:
        if self.name == "openai":
            return error(status, {"error": {"message": "upstream trouble", "type": "server_error"}})
        if self.name == "anthropic":
            kind = "overloaded_error" if status == 529 else "api_error"
            return error(status, {"type": "error", "error": {"type": kind, "message": "upstream trouble"}})
        return error(status, {"error": "upstream trouble"})

    def rate_limited(self, retry_after: str = "0") -> Response:
        if self.name == "openai":
            body: Any = {"error": {"message": "slow down", "type": "rate_limit_error"}}
        elif self.name == "anthropic":
            body = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
        else:
            body = {"error": "slow down"}
        return error(429, body, {"Retry-After": retry_after})
