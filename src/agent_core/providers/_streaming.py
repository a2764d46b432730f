"""Shared HTTP transport of the built-in adapters: SSE/NDJSON readers, error classification
(docs/providers.md#errors-and-retries), retry policy (docs/providers.md#errors-and-retries), timeouts and
cooperative cancellation (docs/providers.md#the-adapter).

Contracts:

- ``backoff_ms(retry, n)`` is "full jitter": a uniformly random delay in ``[0, ceiling]`` with
  ``ceiling = backoff_ceiling_ms(retry, n) = min(max_backoff_ms, initial_backoff_ms * 2**(n-1))`` for retry
  ``n >= 1``, so many clients failing together do not retry together; a ``Retry-After`` /
  ``retry-after-ms`` header replaces it exactly (no jitter: the server named the time), capped at 60000 ms.
- :class:`HttpStreamAdapter` runs one ``stream()``: local pre-flight, optional network pre-flight,
  ``model_started`` once, then attempts until success, a non-retryable error, exhausted attempts, or a
  failure after a delta was yielded (never retried). ``model.timeout_ms`` is the per-attempt connect
  timeout and the idle read timeout between chunks. Each response is opened with ``async with``, so
  cancellation or ``aclose()`` closes it; ``CancelledError`` is never swallowed.
- httpx is imported lazily (CLI cold-start budget).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from datetime import UTC, datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from agent_core._redaction import Redactor
from agent_core.config.model import ResolvedModelConfig, RetryConfig
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.providers._model_fields import FieldsError, RequestFields, media_problem, request_fields
from agent_core.providers._overflow import overflow_message, recognise_overflow
from agent_core.providers._prefix import PrefixEntry, PrefixMemo
from agent_core.providers._sse import body_encoding, content_type_problem, read_events
from agent_core.providers._tool_mapping import ToolNameMap
from agent_core.providers.base import error_payload
from agent_core.types.model import (
    ModelCompleted,
    ModelEvent,
    ModelFailed,
    ModelReasoningDelta,
    ModelRequest,
    ModelStarted,
    ModelTextDelta,
    ProviderDebug,
    ProviderErrorPayload,
    ToolCallDelta,
)

if TYPE_CHECKING:
    import httpx

SleepFn = Callable[[float], Awaitable[None]]
"""Injectable sleep taking seconds (default :func:`asyncio.sleep`)."""

RETRY_AFTER_CAP_MS = 60000
ERROR_BODY_LIMIT = 65536
JSON_BODY_LIMIT = 8 * 1024 * 1024


class StreamProtocolError(Exception):
    """Raised by the readers for an undecodable chunk (classified ``protocol``)."""


class AdapterClosedError(Exception):
    """Raised internally when an attempt starts after ``close()`` (classified ``closed``)."""


class ChunkTranslator(Protocol):
    """Pure translator of raw provider chunks to ``ModelEvent``s (docs/providers.md#content-sent-as-text)."""

    def feed(self, chunk: dict[str, Any]) -> list[ModelEvent]: ...

    def finish(self) -> list[ModelEvent]: ...


# -- pure policy ------------------------------------------------------------------------------------
def backoff_ceiling_ms(retry: RetryConfig, n: int) -> int:
    """The exponential, capped upper bound of the delay before retry ``n`` (1-based)."""
    return int(min(retry.max_backoff_ms, retry.initial_backoff_ms * 2 ** (n - 1)))


def backoff_ms(retry: RetryConfig, n: int, uniform: Callable[[], float] = random.random) -> int:
    """Delay before retry ``n`` (1-based) with full jitter: ``uniform()`` (in ``[0, 1)``) times the
    ceiling, rounded."""
    return round(uniform() * backoff_ceiling_ms(retry, n))


def parse_retry_after(headers: Mapping[str, str], now: datetime | None = None) -> int | None:
    """Milliseconds from ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date), capped at 60 s."""
    lowered = {k.lower(): v for k, v in headers.items()}
    value: float | None = None
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms.strip())
        except ValueError:
            value = None
    if value is None and (raw := lowered.get("retry-after")) is not None:
        raw = raw.strip()
        try:
            value = float(raw) * 1000
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(raw)
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            value = (when - (now or datetime.now(UTC))).total_seconds() * 1000
    if value is None or value != value:  # NaN
        return None
    return int(min(max(value, 0.0), RETRY_AFTER_CAP_MS))


def status_error_type(status: int) -> str:
    """HTTP status -> docs/providers.md#errors-and-retries error type."""
    if status in (401, 403):
        return "auth"
    if status == 429:
        return "rate_limit"
    if status == 408:
        return "timeout"
    if status >= 500:
        return "server"
    return "invalid_request"


def body_excerpt(text: str) -> dict[str, Any]:
    """The provider error body as a dict (JSON object when possible), truncated."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {"text": text[:2000]}
    return value if isinstance(value, dict) else {"body": value}


def body_message(raw: dict[str, Any]) -> str:
    """Best-effort human message of an error body (OpenAI, Anthropic and Ollama shapes)."""
    error = raw.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    for key in ("message", "text", "detail"):
        if isinstance(raw.get(key), str):
            return str(raw[key])
    return ""


def classify_exception(exc: BaseException) -> tuple[str, str]:
    """Transport exception -> (docs/providers.md#errors-and-retries type, message)."""
    import httpx

    if isinstance(exc, StreamProtocolError):
        return "protocol", str(exc)
    if isinstance(exc, AdapterClosedError):
        return "closed", "adapter closed during the request"
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", f"request timed out ({type(exc).__name__})"
    if isinstance(exc, httpx.DecodingError | httpx.LocalProtocolError):
        return "protocol", f"undecodable response: {exc}"
    if isinstance(exc, httpx.TransportError):
        return "network", f"network failure ({type(exc).__name__}): {exc}"
    return "internal", f"unexpected {type(exc).__name__}: {exc}"


class RetryLog:
    """Accumulates ``metadata.retry`` (docs/providers.md#errors-and-retries)."""

    def __init__(self, max_attempts: int) -> None:
        self.attempts = 0
        self.max_attempts = max_attempts
        self.retries: list[dict[str, Any]] = []
        self.last_error: ProviderErrorPayload | None = None

    def can_retry(self, error: ProviderErrorPayload) -> bool:
        return error.retryable and self.attempts < self.max_attempts

    def record(self, error: ProviderErrorPayload, delay_ms: int) -> None:
        self.retries.append(
            {
                "attempt": self.attempts,
                "error_type": error.type,
                "code": error.code,
                "status_code": error.status_code,
                "backoff_ms": delay_ms,
                "retry_after_ms": error.retry_after_ms,
            }
        )

    def as_metadata(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "retries": list(self.retries),
            "last_error": self.last_error.model_dump() if self.last_error else None,
        }


# -- readers ----------------------------------------------------------------------------------------
def decode_json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise StreamProtocolError(f"undecodable stream chunk: {exc}") from exc
    if not isinstance(value, dict):
        raise StreamProtocolError(f"stream chunk is not a JSON object: {type(value).__name__}")
    return value


def sse_events(response: httpx.Response) -> AsyncGenerator[tuple[str, str], None]:
    """``(event name, data)`` pairs of a ``text/event-stream`` body (:mod:`agent_core.providers._sse`);
    ``StreamProtocolError`` when the response is not an event stream."""
    content_type = response.headers.get("content-type", "")
    problem = content_type_problem(content_type)
    if problem is not None:
        raise StreamProtocolError(problem)
    return read_events(response, body_encoding(response, content_type))


async def ndjson_objects(response: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
    """One JSON object per non-blank line."""
    async with aclosing(cast(AsyncGenerator[str, None], response.aiter_lines())) as lines:
        async for line in lines:
            if line.strip():
                yield decode_json_object(line)


async def drain(chunks: AsyncIterator[dict[str, Any]], timeout_s: float) -> None:
    """Reads what is left of a finished body (bounded) so the connection can return to the pool.

    A body that does not end in time is abandoned; the response is then closed, not reused.
    """
    try:
        async with asyncio.timeout(timeout_s):
            async for _ in chunks:
                pass
    except Exception:  # TimeoutError or a late transport error: the result is already complete
        pass


def _import_httpx() -> ModuleType:
    """``httpx``, imported on the first request rather than with the adapters' modules (cold start)."""
    import httpx

    return httpx


def _proxy_configured() -> bool:
    """Whether the environment names a proxy for ``http://`` URLs (what httpx's ``trust_env`` reads)."""
    from urllib.request import getproxies  # already imported by httpx

    proxies = getproxies()
    return bool(proxies.get("http") or proxies.get("all"))


def release(response: httpx.Response | None) -> None:
    """Lets a closed response go of its stream, so freeing it no longer waits for the cyclic collector.

    httpx's response and the stream bound to it refer to each other: without this, a finished response,
    its request and the request body (the whole encoded history, O(session) bytes) stay allocated until the
    collector's next pass over their generation, often several requests later. Meanwhile each new, larger
    body cannot reuse their memory, and a long session's resident size grew by heap fragmentation (issue 16
    target 4). A closed response reads nothing from its stream again (httpx raises ``StreamClosed``).
    """
    if response is not None and response.is_closed:
        response.stream = _import_httpx().ByteStream(b"")


# -- the shared adapter -----------------------------------------------------------------------------
class HttpStreamAdapter(ABC):
    """Base of the built-in adapters: pre-flight, transport, retries, metadata, cancellation.

    Subclasses provide the wire format: ``_url``, ``_headers``, ``_payload``, ``_translator`` and
    ``_chunks``, optionally ``_http_error`` and ``_network_preflight``.
    """

    provider_key: str = ""
    default_base_url: ClassVar[str] = ""
    option_keys: ClassVar[frozenset[str]] = frozenset()
    request_id_header: ClassVar[str] = ""
    drain_timeout_s: ClassVar[float] = 0.25

    def __init__(self, config: ResolvedModelConfig, *, sleep: SleepFn | None = None) -> None:
        self.config = config
        self.base_url = (config.base_url or self.default_base_url).rstrip("/")
        self._sleep: SleepFn = sleep or asyncio.sleep
        self._client_obj: httpx.AsyncClient | None = None
        self._closed = False
        self._redactor = Redactor([config.api_key_env] if config.api_key_env else [])
        self._prefix = PrefixMemo()
        self._prepared: tuple[tuple[str, tuple[tuple[str, str], ...]], httpx.URL, httpx.Headers] | None = None

    # -- subclass hooks ---------------------------------------------------------------------------
    @abstractmethod
    def _url(self) -> str:
        raise NotImplementedError

    @abstractmethod
    def _headers(self, api_key: str | None) -> dict[str, str]:
        raise NotImplementedError

    @abstractmethod
    def _payload(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> dict[str, Any]:
        """The request body; ``prefix`` = (this conversation's memo entry, messages shared with the last
        request), which an adapter may use to reuse work on the unchanged history."""
        raise NotImplementedError

    def _body(
        self, request: ModelRequest, name_map: ToolNameMap, prefix: tuple[PrefixEntry, int] | None = None
    ) -> bytes:
        """The encoded request body: ``json.dumps`` of :meth:`_payload` (default separators) as UTF-8;
        an adapter may encode it incrementally, giving the same bytes."""
        return json.dumps(self._payload(request, name_map, prefix), ensure_ascii=False).encode("utf-8")

    @abstractmethod
    def _translator(self, request: ModelRequest, name_map: ToolNameMap) -> ChunkTranslator:
        raise NotImplementedError

    @abstractmethod
    def _chunks(
        self, response: httpx.Response, translator: ChunkTranslator
    ) -> AsyncGenerator[dict[str, Any], None]:
        raise NotImplementedError

    def _http_error(self, request: ModelRequest, status: int, raw: dict[str, Any]) -> ProviderErrorPayload:
        """Classifies a non-2xx response (subclasses may detect ``unsupported_capability``)."""
        message = body_message(raw) or "no error message"
        return self._error(
            status_error_type(status), f"{self.provider_key} HTTP {status}: {message}", request, raw=raw
        )

    async def _network_preflight(self, request: ModelRequest, api_key: str | None) -> ModelFailed | None:
        """Pre-flight network check made before ``model_started`` (Ollama ``/api/show``)."""
        return None

    def _validate_options(self, options: dict[str, Any]) -> str | None:
        """Returns an error message for a bad ``provider_options[<key>]`` namespace."""
        unknown = sorted(set(options) - self.option_keys)
        if unknown:
            return (
                f"unknown provider_options[{self.provider_key!r}] key(s) {unknown}; "
                f"supported: {sorted(self.option_keys)}"
            )
        return None

    # -- helpers ----------------------------------------------------------------------------------
    def _error(
        self, type_: str, message: str, request: ModelRequest | None = None, **fields: Any
    ) -> ProviderErrorPayload:
        message = self._redactor.text(message)
        if fields.get("raw") is not None:
            fields["raw"] = self._redactor.value(fields["raw"])
        return error_payload(
            type_,
            message,
            provider=self.provider_key,
            model=request.model if request is not None else self.config.name,
            **fields,
        )

    def _client(self) -> httpx.AsyncClient:
        if self._client_obj is None:
            httpx = _import_httpx()
            # A plain-http base URL never uses TLS (redirects are not followed), so the client skips
            # building a certificate-verifying SSL context (tens of ms of CLI cold start).
            plain_http = self.base_url.startswith("http://")
            transport = None
            if plain_http and not _proxy_configured():
                # sockets through asyncio itself, not anyio (per-request cost, issue 16); httpx ignores the
                # environment's proxies for a client given a transport, so a proxy keeps httpx's own
                from agent_core.providers._asyncio_net import AsyncioTransport

                transport = AsyncioTransport()
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.config.timeout_ms / 1000),
                follow_redirects=False,
                verify=not plain_http,
                transport=transport,
            )
            self._client_obj = client
        return self._client_obj

    def _build_post(self, url: str, body: bytes, headers: dict[str, str]) -> httpx.Request:
        """``client.build_request("POST", url, content=body, headers=headers)``, with the URL parsed and the
        headers merged with the client's once per adapter instead of on every request (a third of httpx's
        per-request work); httpx's own path while the client holds cookies (it adds their header)."""
        client = self._client()
        if client.cookies:
            return client.build_request("POST", url, content=body, headers=headers)
        key = (url, tuple(headers.items()))
        prepared = self._prepared
        module = _import_httpx()
        if prepared is None or prepared[0] != key:
            merged = module.Headers(client.headers)
            merged.update(headers)
            prepared = self._prepared = (key, module.URL(url), merged)
        timeout = client.timeout.as_dict()
        request: httpx.Request = module.Request(
            "POST", prepared[1], content=body, headers=prepared[2], extensions={"timeout": timeout}
        )
        return request

    @asynccontextmanager
    async def _post(self, url: str, body: bytes, headers: dict[str, str]) -> AsyncIterator[httpx.Response]:
        """``client.stream("POST", ...)``: the response, closed on exit."""
        response = await self._client().send(self._build_post(url, body, headers), stream=True)
        try:
            yield response
        finally:
            await response.aclose()

    def _local_preflight(self, request: ModelRequest) -> tuple[str | None, ProviderErrorPayload | None]:
        """Schema, provider_options, base_url and API key checks; returns ``(api_key, error)``."""
        options = request.provider_options.get(self.provider_key, {})
        problem = self._validate_options(options)
        if problem is not None:
            return None, self._error("config", problem, request)
        if not self.base_url.startswith(("http://", "https://")):
            return None, self._error(
                "config",
                f"invalid base_url {self.base_url!r} for provider {self.provider_key!r} "
                f"(configured at {self.config.source or 'unknown source'})",
                request,
            )
        env = self.config.api_key_env
        if not env:
            return None, None
        value = os.environ.get(env, "")
        if not value:
            profile = self.config.profile or "main [model]"
            return None, self._error(
                "config",
                f"environment variable {env} is not set or empty; it holds the API key of the "
                f"{self.provider_key!r} model used for purpose {self.config.purpose!r} (profile {profile}), "
                f"configured at {self.config.source or 'unknown source'}",
                request,
            )
        return value, None

    def _fields(self, request: ModelRequest) -> RequestFields:
        """The request's sampling/output/reasoning fields (``providers/_model_fields.py``)."""
        return request_fields(self.provider_key, self.config, request)

    def _capability_preflight(self, request: ModelRequest) -> ProviderErrorPayload | None:
        """``unsupported_capability`` for images/documents the model cannot read; ``config`` for a
        reasoning configuration the provider would refuse."""
        problem = media_problem(self.provider_key, self.config, request)
        if problem is not None:
            capability, message = problem
            return self._error(
                "unsupported_capability",
                message,
                request,
                capability=capability,
                request_feature="model.input_modalities",
            )
        try:
            self._fields(request)
        except FieldsError as exc:
            return self._error("config", str(exc), request)
        return None

    def _meta(self, request: ModelRequest) -> dict[str, Any]:
        return {"provider": self.provider_key, "model": request.model}

    async def _backoff(self, error: ProviderErrorPayload, retry: RetryLog) -> None:
        delay = error.retry_after_ms
        if delay is None:
            delay = backoff_ms(self.config.retry, len(retry.retries) + 1)
        retry.record(error, delay)
        await self._sleep(delay / 1000)

    async def _request_json(
        self, request: ModelRequest, url: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[dict[str, Any] | None, RetryLog]:
        """A small JSON POST with the docs/providers.md#errors-and-retries retry policy; ``(None, log)`` when
        it finally failed."""
        retry = RetryLog(self.config.retry.max_attempts)
        content = json.dumps(body).encode("utf-8")
        while True:
            retry.attempts += 1
            response: httpx.Response | None = None
            try:
                if self._closed:
                    raise AdapterClosedError
                async with self._post(url, content, headers) as response:
                    if response.status_code >= 400:
                        error = await self._status_failure(request, response)
                    else:
                        text = await self._read_body(response, limit=JSON_BODY_LIMIT)
                        return decode_json_object(text), retry
            except Exception as exc:  # CancelledError propagates
                type_, message = classify_exception(exc)
                error = self._error(type_, f"{self.provider_key}: {message}", request)
            finally:
                release(response)
            retry.last_error = error
            if not retry.can_retry(error):
                return None, retry
            await self._backoff(error, retry)

    async def _read_body(self, response: httpx.Response, limit: int = ERROR_BODY_LIMIT) -> str:
        data = bytearray()
        async for piece in response.aiter_bytes():
            data.extend(piece)
            if len(data) >= limit:
                break
        return bytes(data[:limit]).decode("utf-8", errors="replace")

    def overflow_error(
        self, request: ModelRequest, raw: dict[str, Any] | None, message: str, status: int | None = None
    ) -> ProviderErrorPayload | None:
        """A ``prompt_too_long`` error when ``raw``/``message`` says the prompt exceeds the model's window
        (``providers/_overflow.py``), else ``None``."""
        overflow = recognise_overflow(raw, message)
        if overflow is None:
            return None
        return self._error(
            "prompt_too_long",
            overflow_message(self.provider_key, overflow, body_message(raw or {}) or message),
            request,
            raw=raw,
            status_code=status,
            prompt_tokens=overflow.prompt_tokens,
            context_window=overflow.context_window,
        )

    async def _status_failure(self, request: ModelRequest, response: httpx.Response) -> ProviderErrorPayload:
        raw = body_excerpt(await self._read_body(response))
        if 400 <= response.status_code < 600 and response.status_code not in (401, 403, 429):
            overflow = self.overflow_error(request, raw, "", response.status_code)
            if overflow is not None:
                return overflow
        error = self._http_error(request, response.status_code, raw)
        retry_after = parse_retry_after(response.headers)
        return error.model_copy(update={"status_code": response.status_code, "retry_after_ms": retry_after})

    # -- the adapter contract ---------------------------------------------------------------------
    async def close(self) -> None:
        """Releases the HTTP client; idempotent."""
        self._closed = True
        client, self._client_obj = self._client_obj, None
        if client is not None:
            await client.aclose()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelEvent, None]:
        """Streams one model call (see the module docstring for the contract)."""
        if self._closed:
            yield ModelFailed(
                error=self._error("closed", f"{self.provider_key} adapter is closed", request),
                metadata=self._meta(request),
            )
            return
        started = time.monotonic()
        try:
            prefix = self._prefix.scan(request)  # checks the message shapes (only the new ones)
        except AgentCoreError as exc:
            invalid = self._error("invalid_request", exc.message, request, code=ErrorCode.schema_error)
            yield ModelFailed(error=invalid, metadata=self._meta(request))
            return
        api_key, failure = self._local_preflight(request)
        if failure is not None:
            yield ModelFailed(error=failure, metadata=self._meta(request))
            return
        if request.max_output_tokens is None:
            request = request.model_copy(update={"max_output_tokens": self.config.max_output_tokens})
        failure = self._capability_preflight(request)
        if failure is not None:
            yield ModelFailed(error=failure, metadata=self._meta(request))
            return
        name_map = ToolNameMap([tool.name for tool in request.tools] + prefix[0].names)
        rejected = await self._network_preflight(request, api_key)
        if rejected is not None:
            yield rejected
            return
        body = self._body(request, name_map, prefix)
        url = self._url()
        debug = bool(request.metadata.get("debug"))
        yield ModelStarted(
            provider=self.provider_key,
            model=request.model,
            metadata={"purpose": self.config.purpose, "profile": self.config.profile},
        )
        notes = self._fields(request).notes
        if notes:
            yield ProviderDebug(kind="request_fields", data={"notes": list(notes)})
        if debug:
            payload = json.loads(body)
            yield ProviderDebug(kind="raw_request", data={"url": url, "body": self._redactor.value(payload)})
        headers = self._headers(api_key)
        retry = RetryLog(self.config.retry.max_attempts)
        yielded_delta = False
        first_delta_at: float | None = None
        request_id: str | None = None
        response_id: str | None = None
        while True:
            retry.attempts += 1
            translator = self._translator(request, name_map)
            raw_chunks: list[dict[str, Any]] = []
            status_code: int | None = None
            terminal: ModelCompleted | ModelFailed | None = None
            error: ProviderErrorPayload | None = None
            response: httpx.Response | None = None
            try:
                if self._closed:
                    raise AdapterClosedError
                async with self._post(url, body, headers) as response:
                    status_code = response.status_code
                    request_id = response.headers.get(self.request_id_header) or request_id
                    if response.status_code >= 400:
                        error = await self._status_failure(request, response)
                    else:
                        async with aclosing(self._chunks(response, translator)) as chunks:
                            async for chunk in chunks:
                                if debug:
                                    raw_chunks.append(chunk)
                                for event in translator.feed(chunk):
                                    if isinstance(event, ModelCompleted | ModelFailed):
                                        terminal = event
                                        break
                                    if isinstance(
                                        event, ModelTextDelta | ToolCallDelta | ModelReasoningDelta
                                    ):
                                        yielded_delta = True
                                        if first_delta_at is None:
                                            first_delta_at = time.monotonic()
                                    yield event
                                if terminal is not None:
                                    break
                            if terminal is not None:
                                await drain(chunks, self.drain_timeout_s)
                        if terminal is None:
                            for event in translator.finish():
                                if isinstance(event, ModelCompleted | ModelFailed):
                                    terminal = event
                                    break
                                yield event
            except Exception as exc:  # httpx/reader failures; CancelledError/GeneratorExit propagate
                type_, message = classify_exception(exc)
                if self._closed:  # close() ran while this stream was in flight: never retry
                    type_, message = "closed", "adapter closed during the request"
                error = self._error(
                    type_, f"{self.provider_key}: {message}", request, status_code=status_code
                )
            finally:
                release(response)
            if isinstance(terminal, ModelFailed):
                error = terminal.error
            if terminal is None and error is None:
                error = self._error(
                    "protocol", f"{self.provider_key}: stream ended without a result", request
                )
            if error is not None:
                retry.last_error = error
                if retry.can_retry(error) and not yielded_delta:
                    await self._backoff(error, retry)
                    continue
            response_id = (
                terminal.metadata.get("response_id") if terminal is not None else None
            ) or response_id
            meta: dict[str, Any] = {
                **(terminal.metadata if terminal is not None else {}),
                **self._meta(request),
                "request_id": request_id,
                "response_id": response_id,
                "latency_ms": int((time.monotonic() - started) * 1000),
                "retry": retry.as_metadata(),
            }
            if first_delta_at is not None:
                meta["time_to_first_token_ms"] = int((first_delta_at - started) * 1000)
            if debug:
                data = {"status_code": status_code, "chunks": self._redactor.value(raw_chunks)}
                yield ProviderDebug(kind="raw_response", data=data)
            if isinstance(terminal, ModelCompleted):
                yield terminal.model_copy(update={"metadata": meta})
            else:
                assert error is not None
                usage = terminal.usage if isinstance(terminal, ModelFailed) else None
                yield ModelFailed(error=error, usage=usage, metadata=meta)
            return
