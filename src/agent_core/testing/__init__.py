"""The testing kit: run agents in tests without a model server (docs/testing.md#testing-your-agents).

* :class:`FunctionModel` — a model whose reply (text and/or :class:`CallTool` calls, streamed as deltas)
  is computed by your function from the provider-neutral :class:`ModelRequest`;
* :class:`TestModel` — calls every offered tool once with schema-valid arguments, then answers;
* :func:`record` / :func:`replay` — cassettes: store each model call (normalised request + streamed
  response) in a JSON file, re-run deterministically from it; a changed request fails with a diff
  (:class:`CassetteMismatch` from :meth:`Cassette.verify`);
* :func:`open_runtime` — an open ``AgentRuntime`` on any of them, with a private home and a generated
  config (no config file, no server);
* :class:`ScriptedServer` and its OpenAI / Anthropic / Ollama subclasses — real HTTP servers on
  127.0.0.1 that speak the vendors' wire protocols, scripted with frames from :class:`OpenAIWire`,
  :class:`AnthropicWire`, :class:`OllamaWire` and the response kinds (:func:`stream`, :func:`error`,
  :func:`hold_open`, :func:`drop_after`, :func:`stall`), for integration tests of the real adapters;
  with :class:`AnthropicPromptCache` / :class:`OpenAIPromptCache` they report the usage of the vendor's
  prompt cache (cache reads and writes) for the requests they receive; :class:`ScriptedResponsesServer`
  and :class:`ResponsesWire` do the same for OpenAI's Responses API;
* the servers enforce their vendor's request rules (reasoning models, extended thinking, image input,
  context windows) and answer a breach with the vendor's exact error: :class:`ModelRules` per model, and
  the overflow bodies (:func:`openai_overflow`, :func:`responses_overflow`, :func:`anthropic_overflow`,
  :func:`llamacpp_overflow`, :func:`ollama_overflow`) to script them.

Every model records the requests it received (``model.requests``). Importing ``agent_core`` does not
import this package.
"""

from agent_core.testing._cassette import Cassette, CassetteMismatch, normalise_request, record, replay
from agent_core.testing._models import (
    CallTool,
    FunctionModel,
    InProcessModel,
    ModelReply,
    last_user_text,
    tool_results,
)
from agent_core.testing._prompt_cache import (
    AnthropicPromptCache,
    CacheTotals,
    OpenAIPromptCache,
    PromptCacheError,
)
from agent_core.testing._responses import ResponsesWire, ScriptedResponsesServer
from agent_core.testing._rules import (
    ModelRules,
    anthropic_overflow,
    llamacpp_overflow,
    ollama_overflow,
    openai_overflow,
    responses_overflow,
)
from agent_core.testing._runtime import open_runtime
from agent_core.testing._servers import (
    Response,
    ScriptedAnthropicServer,
    ScriptedOllamaServer,
    ScriptedOpenAIServer,
    ScriptedRequest,
    ScriptedServer,
    drop_after,
    error,
    hold_open,
    json_reply,
    stall,
    stream,
)
from agent_core.testing._test_model import TestModel, example_value
from agent_core.testing._wire import AnthropicWire, OllamaWire, OpenAIWire, advertised_tool_name
from agent_core.types.model import ModelMessage, ModelRequest

__all__ = [
    "AnthropicPromptCache",
    "AnthropicWire",
    "CacheTotals",
    "CallTool",
    "Cassette",
    "CassetteMismatch",
    "FunctionModel",
    "InProcessModel",
    "ModelMessage",
    "ModelReply",
    "ModelRequest",
    "ModelRules",
    "OllamaWire",
    "OpenAIPromptCache",
    "OpenAIWire",
    "PromptCacheError",
    "Response",
    "ResponsesWire",
    "ScriptedAnthropicServer",
    "ScriptedOllamaServer",
    "ScriptedOpenAIServer",
    "ScriptedRequest",
    "ScriptedResponsesServer",
    "ScriptedServer",
    "TestModel",
    "advertised_tool_name",
    "anthropic_overflow",
    "drop_after",
    "error",
    "example_value",
    "hold_open",
    "json_reply",
    "last_user_text",
    "llamacpp_overflow",
    "normalise_request",
    "ollama_overflow",
    "open_runtime",
    "openai_overflow",
    "record",
    "replay",
    "responses_overflow",
    "stall",
    "stream",
    "tool_results",
]
