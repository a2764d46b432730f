"""``ollama`` adapter: the local ``/api/chat`` NDJSON streaming API (docs/providers.md#ollama).

When a request carries tools, pre-flight asks ``POST /api/show`` for the model's capabilities (cached per
adapter and model); without an explicit ``"tools"`` capability the stream fails ``unsupported_capability``
and no ``/api/chat`` request is sent. Tool calls are never emulated and tools are never dropped.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from agent_core.providers._media import b64
from agent_core.providers._model_fields import RequestFields, media_kinds
from agent_core.providers._overflow import overflow_message, recognise_overflow
from agent_core.providers._prefix import PrefixEntry
from agent_core.providers._streaming import (
    ChunkTranslator,
    HttpStreamAdapter,
    body_message,
    ndjson_objects,
    status_error_type,
)
from agent_core.providers._tool_mapping import (
    ToolNameMap,
    conversation,
    render_blocks,
    render_tool_result,
    system_texts,
    tool_call_names,
)
from agent_core.providers.base import (
    MessageAssembler,
    as_dict,
    as_int,
    error_payload,
    mentions_tools_unsupported,
    optional_int,
)
from agent_core.types.content import ImageBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.model import (
    ModelEvent,
    ModelFailed,
    ModelRequest,
    ProviderErrorPayload,
    Usage,
)

if TYPE_CHECKING:
    import httpx

STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}
OPTION_KEYS = frozenset({"options", "keep_alive", "format"})
USAGE_KEYS = (
    "prompt_eval_count",
    "prompt_eval_cached_count",
    "eval_count",
    "total_duration",
    "load_duration",
    "prompt_eval_duration",
    "eval_duration",
)


def _images(blocks: list[Any], attachments: dict[str, bytes]) -> list[str]:
    return [b64(attachments.get(b.artifact_id, b"")) for b in blocks if isinstance(b, ImageBlock)]


def build_payload(
    request: ModelRequest,
    name_map: ToolNameMap,
    *,
    context_window: int | None = None,
    fields: RequestFields | None = None,
) -> dict[str, Any]:
    """The ``POST /api/chat`` body for ``request`` (pure).

    Images go in a message's ``images`` (base64); the images tool results returned follow the tool
    messages in one user message. Ollama's own ``thinking`` goes back on its assistant message.
    ``truncate: false`` makes an over-long prompt an error (Ollama otherwise drops its start silently),
    which the runtime answers with a compaction and one retry.
    """
    fields = fields or RequestFields(request.temperature, "num_predict", request.max_output_tokens)
    attachments = request.attachments
    messages: list[dict[str, Any]] = []
    system = system_texts(request)
    if system:
        messages.append({"role": "system", "content": "\n\n".join(system)})
    call_names = tool_call_names(request.messages)
    for message in conversation(request.messages):
        if message.role == "user":
            user: dict[str, Any] = {"role": "user", "content": render_blocks(message.content)}
            images = _images(list(message.content), attachments)
            if images:
                user["images"] = images
            messages.append(user)
        elif message.role == "assistant":
            text = render_blocks(
                [b for b in message.content if not isinstance(b, ToolCallBlock | ReasoningBlock)]
            )
            entry: dict[str, Any] = {"role": "assistant", "content": text}
            thinking = [
                b.text for b in message.content if isinstance(b, ReasoningBlock) and b.provider == "ollama"
            ]
            if any(thinking):
                entry["thinking"] = "\n\n".join(t for t in thinking if t)
            calls = [
                {"function": {"name": name_map.mangle(b.name), "arguments": b.arguments}}
                for b in message.content
                if isinstance(b, ToolCallBlock)
            ]
            if calls:
                entry["tool_calls"] = calls
            messages.append(entry)
        else:
            returned: list[str] = []
            for block in message.content:
                if not isinstance(block, ToolResultBlock):
                    continue
                item = {"role": "tool", "content": render_tool_result(block, provider_has_error_flag=False)}
                if block.tool_call_id in call_names:
                    item["tool_name"] = name_map.mangle(call_names[block.tool_call_id])
                messages.append(item)
                returned += _images(list(block.content), attachments)
            if returned:
                messages.append(
                    {"role": "user", "content": "[images returned by the tools]", "images": returned}
                )
    options: dict[str, Any] = {}
    if fields.temperature is not None:
        options["temperature"] = fields.temperature
    if fields.max_output_tokens is not None:
        options["num_predict"] = fields.max_output_tokens
    if context_window is not None:
        options["num_ctx"] = context_window
    if request.stop_sequences:
        options["stop"] = list(request.stop_sequences)
    provider_options = request.provider_options.get("ollama", {})
    if isinstance(provider_options.get("options"), dict):
        options.update(provider_options["options"])
    payload: dict[str, Any] = {"model": request.model, "messages": messages, "stream": True}
    if fields.think is not None:
        payload["think"] = fields.think
    payload["truncate"] = False
    if options:
        payload["options"] = options
    if request.tools:
        payload["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": name_map.mangle(t.name),
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
    if "keep_alive" in provider_options:
        payload["keep_alive"] = provider_options["keep_alive"]
    if "format" in provider_options:  # "json" or a JSON schema (structured output)
        payload["format"] = provider_options["format"]
    return payload


def unsupported_tools(model: str, message: str, **fields: Any) -> ProviderErrorPayload:
    return error_payload(
        "unsupported_capability",
        message,
        provider="ollama",
        model=model,
        capability="tools",
        request_feature="tools",
        **fields,
    )


class StreamTranslator:
    """``/api/chat`` NDJSON lines -> ``ModelEvent``s; tool calls arrive complete, one line each."""

    def __init__(self, *, provider: str = "ollama", model: str, name_map: ToolNameMap) -> None:
        self._asm = MessageAssembler(provider=provider, model=model, name_map=name_map)
        self._done = False
        self._failed = False
        self._calls = 0

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]:
        if chunk.get("error"):
            self._failed = True
            text = str(chunk["error"])
            overflow = recognise_overflow({"error": text})
            if overflow is not None:
                payload = error_payload(
                    "prompt_too_long",
                    overflow_message("ollama", overflow, text),
                    provider=self._asm.provider,
                    model=self._asm.model,
                    raw={"error": text},
                    prompt_tokens=overflow.prompt_tokens,
                    context_window=overflow.context_window,
                )
                return [self._asm.failed(payload)]
            if mentions_tools_unsupported(text):
                payload = unsupported_tools(self._asm.model, f"ollama: {text}", raw={"error": text})
            else:
                payload = error_payload(
                    "server",
                    f"ollama stream error: {text}",
                    provider=self._asm.provider,
                    model=self._asm.model,
                    raw={"error": text},
                )
            return [self._asm.failed(payload)]
        events: list[ModelEvent] = []
        message = chunk.get("message")
        if isinstance(message, dict):
            if isinstance(message.get("thinking"), str) and message["thinking"]:
                events += self._asm.reasoning("thinking", message["thinking"])
            if isinstance(message.get("content"), str):
                events += self._asm.text(message["content"])
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict):
                    events += self._tool_call(call)
        if chunk.get("done"):
            self._done = True
            raw_usage = {k: chunk[k] for k in USAGE_KEYS if k in chunk}
            input_tokens = as_int(chunk.get("prompt_eval_count"))
            output_tokens = as_int(chunk.get("eval_count"))
            self._asm.usage = Usage(
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                total_tokens=input_tokens + output_tokens,
                # prompt_eval_count counts the whole prompt; the part Ollama kept from its previous
                # prompt (its own prefix cache) is prompt_eval_cached_count, where the server reports it
                cache_read_tokens=optional_int(chunk, "prompt_eval_cached_count"),
                raw_usage=raw_usage,
            )
            raw = chunk.get("done_reason")
            raw_reason = str(raw) if raw is not None else None
            events += self._asm.end_open_calls()
            events.append(self._asm.completed(STOP_REASONS.get(raw_reason or "", "end_turn"), raw_reason))
        return events

    def _tool_call(self, call: dict[str, Any]) -> list[ModelEvent]:
        function = as_dict(call.get("function"))
        key = ("call", self._calls)
        metadata: dict[str, Any] = {"provider_index": function.get("index", self._calls)}
        self._calls += 1
        call_id = call.get("id")
        events = self._asm.start_call(
            key,
            provider_id=str(call_id) if call_id else None,
            provider_name=str(function.get("name") or ""),
            metadata=metadata,
        )
        arguments = function.get("arguments")
        if arguments is not None:
            text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
            events += self._asm.call_arguments(key, text)
        events += self._asm.end_call(key)
        return events

    def finish(self) -> list[ModelEvent]:
        if self._done or self._failed:
            return []
        return [self._asm.protocol_failure("ollama stream ended before the done line")]


class OllamaAdapter(HttpStreamAdapter):
    """Built-in ``ollama`` provider (``/api/chat`` NDJSON)."""

    provider_key = "ollama"
    default_base_url = "http://127.0.0.1:11434"
    option_keys = OPTION_KEYS
    request_id_header = "x-request-id"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._capabilities: dict[str, list[str] | None] = {}

    def _url(self) -> str:
        return f"{self.base_url}/api/chat"

    def _headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "application/x-ndjson"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        return headers

    def _payload(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> dict[str, Any]:
        return build_payload(
            request, name_map, context_window=self.config.context_window, fields=self._fields(request)
        )

    def _translator(self, request: ModelRequest, name_map: ToolNameMap) -> StreamTranslator:
        return StreamTranslator(provider=self.provider_key, model=request.model, name_map=name_map)

    def _chunks(
        self, response: httpx.Response, translator: ChunkTranslator
    ) -> AsyncGenerator[dict[str, Any], None]:
        return ndjson_objects(response)

    def _validate_options(self, options: dict[str, Any]) -> str | None:
        problem = super()._validate_options(options)
        if problem is None and "options" in options and not isinstance(options["options"], dict):
            problem = "provider_options['ollama']['options'] must be a table/dict"
        return problem

    def _http_error(self, request: ModelRequest, status: int, raw: dict[str, Any]) -> ProviderErrorPayload:
        message = body_message(raw) or "no error message"
        if request.tools and 400 <= status < 500 and mentions_tools_unsupported(message):
            return unsupported_tools(request.model, f"ollama: {message}", raw=raw)
        return self._error(status_error_type(status), f"ollama HTTP {status}: {message}", request, raw=raw)

    async def _network_preflight(self, request: ModelRequest, api_key: str | None) -> ModelFailed | None:
        """``/api/show`` capability lookup, made only when the request carries tools or images: tools
        need ``"tools"``, images ``"vision"``."""
        images = bool(request.attachments) and "image" in media_kinds(request)
        if not request.tools and not images:
            return None
        meta: dict[str, Any] = {"provider": self.provider_key, "model": request.model}
        if request.model not in self._capabilities:
            body = {"model": request.model}
            data, retry = await self._request_json(
                request, f"{self.base_url}/api/show", body, self._headers(api_key)
            )
            if data is None:
                assert retry.last_error is not None
                return ModelFailed(error=retry.last_error, metadata={**meta, "retry": retry.as_metadata()})
            caps = data.get("capabilities")
            self._capabilities[request.model] = [str(c) for c in caps] if isinstance(caps, list) else None
        caps = self._capabilities[request.model]
        if images and (caps is None or "vision" not in caps):
            message = (
                f'ollama model {request.model!r} cannot read images (capabilities: {caps}); remove "image" '
                "from model.input_modalities or use a vision model"
            )
            failure = self._error(
                "unsupported_capability", message, request, capability="image", request_feature="images"
            )
            return ModelFailed(error=failure, metadata=meta)
        if not request.tools:
            return None
        if caps is None:
            message = (
                f"ollama did not report capabilities for model {request.model!r} (older server); "
                "tool support is not explicit, so a request with tools cannot be sent"
            )
        elif "tools" not in caps:
            message = f"ollama model {request.model!r} does not support tools (capabilities: {caps})"
        else:
            return None
        return ModelFailed(error=unsupported_tools(request.model, message), metadata=meta)
