"""The testing kit: run agents in tests without a model server (surfaces.md §5).

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
  prompt cache (cache reads and writes) for the requests they receive.

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
    "OllamaWire",
    "OpenAIPromptCache",
    "OpenAIWire",
    "PromptCacheError",
    "Response",
    "ScriptedAnthropicServer",
    "ScriptedOllamaServer",
    "ScriptedOpenAIServer",
    "ScriptedRequest",
    "ScriptedServer",
    "TestModel",
    "advertised_tool_name",
    "drop_after",
    "error",
    "example_value",
    "hold_open",
    "json_reply",
    "last_user_text",
    "normalise_request",
    "open_runtime",
    "record",
    "replay",
    "stall",
    "stream",
    "tool_results",
]
