"""Scripted provider servers (public via ``agent_core.testing``): real HTTP/1.1 servers on 127.0.0.1 that
speak the OpenAI Chat Completions SSE, Anthropic Messages SSE and Ollama ``/api/chat`` NDJSON wire formats.

Each server runs its own event loop on a background thread, so it serves in-process async clients and
subprocesses alike. It binds 127.0.0.1 only, on a free port. No pytest dependency; wrap it in a fixture
that calls ``stop()`` and ``verify()`` (this project's are in ``tests/fixtures/scripted_fixtures.py``)::

    with ScriptedOpenAIServer() as server:
        server.enqueue(stream(OpenAIWire.text_stream("Hel", "lo")))
        ...  # point an adapter at server.base_url
        server.verify()

The wire-format builders live in ``agent_core.testing._wire`` and are re-exported here.
Responses come from a FIFO queue (``enqueue``) or a ``handler(fn)`` called with each
:class:`ScriptedRequest`. Kinds: ``stream``, ``error``, ``hold_open``, ``drop_after``, ``stall``.
Strict mode: a request with no scripted response is answered 500 and ``verify()`` fails; unconsumed queued
responses fail ``verify()`` unless ``allow_unconsumed`` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_core.testing import _rules
from agent_core.testing._prompt_cache import AnthropicPromptCache, OpenAIPromptCache, PromptCacheError
from agent_core.testing._rules import ModelRules
from agent_core.testing._wire import (
    AnthropicWire,
    OllamaWire,
    OpenAIWire,
    advertised_tool_name,
    split_text,
)

# -- requests and responses -------------------------------------------------------------------------


@dataclass(slots=True)
class ScriptedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any
    received_at: float = field(default_factory=time.monotonic)
    cache_usage: dict[str, int] | None = None
    """The usage the server's prompt-cache emulation computed for this request (else ``None``)."""


@dataclass(slots=True)
class StreamResponse:
    frames: list[str | bytes]
    delay_s: float = 0.0
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class JsonResponse:
    status: int
    json_body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class HoldOpenResponse:
    frames: list[str | bytes]


@dataclass(slots=True)
class DropAfterResponse:
    frames: list[str | bytes]


@dataclass(slots=True)
class StallResponse:
    pass


Response = StreamResponse | JsonResponse | HoldOpenResponse | DropAfterResponse | StallResponse
Handler = Callable[[ScriptedRequest], Response]


def stream(
    frames: Iterable[str | bytes],
    delay_s: float = 0.0,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
) -> StreamResponse:
    """A streamed body, flushed frame by frame (``delay_s`` between frames)."""
    return StreamResponse(list(frames), delay_s, status, dict(headers or {}))


def error(status: int, json_body: Any = None, headers: dict[str, str] | None = None) -> JsonResponse:
    """A JSON response with ``status`` (e.g. 429 with ``{"Retry-After": "0"}``)."""
    return JsonResponse(status, json_body, dict(headers or {}))


def json_reply(body: Any, status: int = 200) -> JsonResponse:
    return JsonResponse(status, body, {})


def hold_open(frames: Iterable[str | bytes]) -> HoldOpenResponse:
    """Sends the frames, then keeps the connection open until the client disconnects."""
    return HoldOpenResponse(list(frames))


def drop_after(frames: Iterable[str | bytes]) -> DropAfterResponse:
    """Sends the frames, then closes the socket abruptly (no terminating chunk)."""
    return DropAfterResponse(list(frames))


def stall() -> StallResponse:
    """Reads the request and sends nothing (no status line) until the client disconnects."""
    return StallResponse()


@dataclass(slots=True)
class Disconnect:
    path: str
    kind: str
    at: float


# -- the server -------------------------------------------------------------------------------------


class ScriptedServer:
    """Base scripted server; subclasses set the content type, base path and built-in endpoints."""

    name = "scripted"
    content_type = "text/event-stream"
    base_path = ""
    request_id_header = "x-request-id"

    def __init__(self, *, strict: bool = True, models: dict[str, ModelRules] | None = None) -> None:
        self.strict = strict
        self.models: dict[str, ModelRules] = dict(models or {})
        """What each model accepts (:class:`~agent_core.testing.ModelRules`); others get ``default_rules``."""
        self.default_rules = ModelRules()
        self.rejections: list[tuple[ScriptedRequest, int, Any]] = []
        """Requests the vendor rules refused: (request, status, error body)."""
        self.allow_unconsumed = False
        self.requests: list[ScriptedRequest] = []
        self.disconnects: list[Disconnect] = []
        self.unexpected: list[ScriptedRequest] = []
        self.errors: list[str] = []
        self.open_connections = 0
        self.connections_total = 0
        self.port = 0
        self._queue: deque[Response] = deque()
        self._handler: Handler | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- scripting --------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    def enqueue(self, *responses: Response) -> None:
        with self._lock:
            self._queue.extend(responses)

    def handler(self, fn: Handler | None) -> None:
        """Answers every request not served by the queue with ``fn(request)``, called in a worker thread:
        it may block (e.g. until another request has arrived) while the server answers other connections."""
        self._handler = fn

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def requests_to(self, path: str) -> list[ScriptedRequest]:
        return [r for r in self.requests if r.path == path]

    def verify(self) -> None:
        """Raises ``AssertionError`` for unexpected requests, handler errors or unconsumed responses."""
        problems: list[str] = list(self.errors)
        if self.strict and self.unexpected:
            problems.append(f"unexpected requests: {[(r.method, r.path) for r in self.unexpected]}")
        if self.strict and not self.allow_unconsumed and self.pending:
            problems.append(f"{self.pending} queued response(s) were never requested")
        if problems:
            raise AssertionError(f"{self.name} scripted server: " + "; ".join(problems))

    def wait_for_disconnects(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Blocks (thread-safe polling) until ``count`` client disconnects were observed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.disconnects) >= count:
                return True
            time.sleep(0.005)
        return len(self.disconnects) >= count

    async def until_disconnected(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Async variant of :meth:`wait_for_disconnects` (does not block the caller's loop)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.disconnects) >= count:
                return True
            await asyncio.sleep(0.005)
        return len(self.disconnects) >= count

    async def until_idle(self, timeout: float = 5.0) -> bool:
        """Waits until the server has no open connection."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.open_connections == 0:
                return True
            await asyncio.sleep(0.005)
        return self.open_connections == 0

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> ScriptedServer:
        ready = threading.Event()
        loop = asyncio.new_event_loop()
        self._loop = loop

        def run() -> None:
            asyncio.set_event_loop(loop)
            self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
            self.port = self._server.sockets[0].getsockname()[1]
            ready.set()
            loop.run_forever()

        self._thread = threading.Thread(target=run, name=f"scripted-{self.name}", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError(f"{self.name} scripted server did not start")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        self._loop = self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the vendor's rules -----------------------------------------------------------------------
    def rules_for(self, model: object) -> ModelRules:
        return self.models.get(str(model), self.default_rules)

    def _check_rules(self, request: ScriptedRequest) -> _rules.Rejection | None:
        """The vendor's error for a request it would refuse (``agent_core.testing._rules``), else ``None``."""
        return None

    def _observe(self, frames: Sequence[str | bytes], request: ScriptedRequest) -> Sequence[str | bytes]:
        """Sees the frames of a response before they are sent (what it issues); may adjust them."""
        return frames

    # -- prompt-cache emulation -------------------------------------------------------------------
    def _emulate_cache(self, request: ScriptedRequest) -> Response | None:
        """Computes ``request.cache_usage`` when the server emulates a prompt cache; the rejection of a
        request the provider would refuse (HTTP 400), else ``None``."""
        return None

    def _with_usage(self, frame: str | bytes, request: ScriptedRequest) -> str | bytes:
        """A response frame with the emulated usage in place of the scripted one."""
        return frame

    def _json_with_usage(self, body: Any, request: ScriptedRequest) -> Any:
        return body

    # -- protocol ---------------------------------------------------------------------------------
    def builtin(self, request: ScriptedRequest) -> Response | None:
        """Endpoints answered without consuming the script (Ollama metadata endpoints)."""
        return None

    def _choose(self, request: ScriptedRequest) -> Response:
        built = self.builtin(request)
        if built is not None:
            return built
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self._handler is not None:
            try:
                return self._handler(request)
            except Exception as exc:  # a failing handler must fail the test, not hang it
                self.errors.append(f"handler raised {type(exc).__name__}: {exc}")
                return error(500, {"error": {"message": f"scripted handler failed: {exc}"}})
        self.unexpected.append(request)
        return error(
            500, {"error": {"message": "scripted server: unexpected request", "type": "server_error"}}
        )

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.open_connections += 1
        self.connections_total += 1
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                self.requests.append(request)
                refused = self._check_rules(request) if isinstance(request.json, dict) else None
                if refused is not None:
                    self.rejections.append((request, *refused))
                rejected = error(*refused) if refused is not None else self._emulate_cache(request)
                # in a worker thread: a handler may block (wait for another request) without stopping the server
                response = (
                    rejected if rejected is not None else await asyncio.to_thread(self._choose, request)
                )
                if not await self._respond(response, request, reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self.open_connections -= 1
            self._tasks.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read_request(self, reader: asyncio.StreamReader) -> ScriptedRequest | None:
        line = await reader.readline()
        if not line:
            return None
        method, target, _version = line.decode("latin-1").strip().split(" ", 2)
        headers: dict[str, str] = {}
        while True:
            raw = await reader.readline()
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = b""
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await reader.readline()).strip().split(b";")[0], 16)
                if size == 0:
                    await reader.readline()
                    break
                body += await reader.readexactly(size)
                await reader.readline()
        elif headers.get("content-length"):
            body = await reader.readexactly(int(headers["content-length"]))
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        return ScriptedRequest(method, target.split("?", 1)[0], headers, body, parsed)

    def _head(self, status: int, headers: dict[str, str]) -> bytes:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Status"
        lines = [f"HTTP/1.1 {status} {phrase}"]
        lines.append(f"{self.request_id_header}: req_scripted_{len(self.requests)}")
        lines.extend(f"{k}: {v}" for k, v in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def _stream_head(self, status: int = 200, extra: dict[str, str] | None = None) -> bytes:
        headers = {
            "Content-Type": self.content_type,
            "Transfer-Encoding": "chunked",
            "Cache-Control": "no-cache",
        }
        headers.update(extra or {})
        return self._head(status, headers)

    @staticmethod
    def _chunk(frame: str | bytes) -> bytes:
        data = frame.encode("utf-8") if isinstance(frame, str) else frame
        return f"{len(data):x}\r\n".encode() + data + b"\r\n"

    async def _send_frames(
        self, writer: asyncio.StreamWriter, frames: Sequence[str | bytes], delay: float
    ) -> None:
        for frame in frames:
            writer.write(self._chunk(frame))
            await writer.drain()
            if delay:
                await asyncio.sleep(delay)

    async def _await_disconnect(
        self, reader: asyncio.StreamReader, request: ScriptedRequest, kind: str
    ) -> None:
        try:
            while await reader.read(65536):
                pass
        except ConnectionError:
            pass
        self.disconnects.append(Disconnect(request.path, kind, time.monotonic()))

    async def _respond(
        self,
        response: Response,
        request: ScriptedRequest,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Writes ``response``; returns whether the connection may serve another request."""
        if isinstance(response, JsonResponse):
            reply = response.json_body
            if request.cache_usage is not None and response.status < 400:
                reply = self._json_with_usage(reply, request)
            body = b"" if reply is None else json.dumps(reply).encode()
            headers = {"Content-Type": "application/json", "Content-Length": str(len(body))}
            headers.update(response.headers)
            writer.write(self._head(response.status, headers) + body)
            await writer.drain()
            return True
        if isinstance(response, StallResponse):
            await self._await_disconnect(reader, request, "stall")
            return False
        extra = response.headers if isinstance(response, StreamResponse) else {}
        status = response.status if isinstance(response, StreamResponse) else 200
        writer.write(self._stream_head(status, extra))
        try:
            delay = response.delay_s if isinstance(response, StreamResponse) else 0.0
            frames = response.frames
            if status < 400:
                frames = list(self._observe(frames, request))
            if request.cache_usage is not None and status < 400:
                frames = [self._with_usage(frame, request) for frame in frames]
            await self._send_frames(writer, frames, delay)
            if isinstance(response, StreamResponse):
                writer.write(b"0\r\n\r\n")
                await writer.drain()
                return True
        except ConnectionError:
            self.disconnects.append(Disconnect(request.path, "stream", time.monotonic()))
            return False
        if isinstance(response, DropAfterResponse):
            writer.transport.abort()
            return False
        await self._await_disconnect(reader, request, "hold_open")
        return False


def _sse_json(frame: str | bytes) -> tuple[str, Any] | None:
    """``(text before the data, decoded data)`` of an SSE frame with one ``data:`` JSON line."""
    text = frame.decode("utf-8") if isinstance(frame, bytes) else frame
    head, marker, rest = text.partition("data: ")
    if not marker or not rest.lstrip().startswith("{"):
        return None
    try:
        return head, json.loads(rest)
    except ValueError:
        return None


class ScriptedOpenAIServer(ScriptedServer):
    """OpenAI Chat Completions: ``POST /v1/chat/completions`` (``base_url`` ends with ``/v1``).

    ``prompt_cache`` (:class:`~agent_core.testing.OpenAIPromptCache`) makes the usage of every reply
    report the emulated ``prompt_tokens`` and ``prompt_tokens_details.cached_tokens``.
    """

    name = "openai"
    base_path = "/v1"

    def __init__(
        self,
        *,
        strict: bool = True,
        prompt_cache: OpenAIPromptCache | None = None,
        models: dict[str, ModelRules] | None = None,
    ) -> None:
        super().__init__(strict=strict, models=models)
        self.prompt_cache = prompt_cache

    def _check_rules(self, request: ScriptedRequest) -> _rules.Rejection | None:
        if not request.path.endswith("/chat/completions"):
            return None
        return _rules.check_openai_chat(request.json, self.rules_for(request.json.get("model")))

    def _emulate_cache(self, request: ScriptedRequest) -> Response | None:
        cache = self.prompt_cache
        if (
            cache is not None
            and request.path.endswith("/chat/completions")
            and isinstance(request.json, dict)
        ):
            request.cache_usage = cache.usage(request.json)
        return None

    def _usage(self, usage: dict[str, Any], request: ScriptedRequest) -> dict[str, Any]:
        assert request.cache_usage is not None
        prompt = request.cache_usage["prompt_tokens"]
        completion = usage.get("completion_tokens") or 0
        details = {
            **(usage.get("prompt_tokens_details") or {}),
            "cached_tokens": request.cache_usage["cached_tokens"],
        }
        return {
            **usage,
            "prompt_tokens": prompt,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": details,
        }

    def _with_usage(self, frame: str | bytes, request: ScriptedRequest) -> str | bytes:
        parsed = _sse_json(frame)
        if parsed is None or not isinstance(parsed[1], dict) or not isinstance(parsed[1].get("usage"), dict):
            return frame
        head, chunk = parsed
        return f"{head}data: {json.dumps({**chunk, 'usage': self._usage(chunk['usage'], request)})}\n\n"

    def _json_with_usage(self, body: Any, request: ScriptedRequest) -> Any:
        if isinstance(body, dict) and isinstance(body.get("usage"), dict):
            return {**body, "usage": self._usage(body["usage"], request)}
        return body


class ScriptedAnthropicServer(ScriptedServer):
    """Anthropic Messages: ``POST /v1/messages``.

    ``prompt_cache`` (:class:`~agent_core.testing.AnthropicPromptCache`) makes ``message_start`` report
    the emulated ``input_tokens``, ``cache_creation_input_tokens`` and ``cache_read_input_tokens``, and
    answers a request Anthropic would refuse (more than 4 breakpoints, ...) with HTTP 400.
    """

    name = "anthropic"
    request_id_header = "request-id"

    def __init__(
        self,
        *,
        strict: bool = True,
        prompt_cache: AnthropicPromptCache | None = None,
        models: dict[str, ModelRules] | None = None,
    ) -> None:
        super().__init__(strict=strict, models=models)
        self.prompt_cache = prompt_cache
        self.signatures: dict[str, str] = {}
        """Thinking signatures this server issued → the text each signs."""
        self.redacted_data: set[str] = set()

    def _check_rules(self, request: ScriptedRequest) -> _rules.Rejection | None:
        if not request.path.endswith("/messages"):
            return None
        rules = self.rules_for(request.json.get("model"))
        return _rules.check_anthropic(request.json, rules, self.signatures, self.redacted_data)

    def _observe(self, frames: Sequence[str | bytes], request: ScriptedRequest) -> Sequence[str | bytes]:
        _rules.observe_anthropic_frames(frames, self.signatures, self.redacted_data)
        return frames

    def _emulate_cache(self, request: ScriptedRequest) -> Response | None:
        if self.prompt_cache is None or not request.path.endswith("/messages"):
            return None
        if not isinstance(request.json, dict):
            return None
        try:
            request.cache_usage = self.prompt_cache.usage(request.json)
        except PromptCacheError as exc:
            return error(
                400, {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}}
            )
        return None

    def _with_usage(self, frame: str | bytes, request: ScriptedRequest) -> str | bytes:
        parsed = _sse_json(frame)
        if parsed is None:
            return frame
        head, event = parsed
        message = event.get("message") if isinstance(event, dict) else None
        if event.get("type") != "message_start" or not isinstance(message, dict):
            return frame
        assert request.cache_usage is not None
        usage = {**(message.get("usage") or {}), **request.cache_usage}
        return f"{head}data: {json.dumps({**event, 'message': {**message, 'usage': usage}})}\n\n"

    def _json_with_usage(self, body: Any, request: ScriptedRequest) -> Any:
        if isinstance(body, dict) and isinstance(body.get("usage"), dict):
            assert request.cache_usage is not None
            return {**body, "usage": {**body["usage"], **request.cache_usage}}
        return body


class ScriptedOllamaServer(ScriptedServer):
    """Ollama: ``POST /api/chat`` NDJSON plus built-in ``/api/version``, ``/api/tags`` and ``/api/show``.

    ``capabilities`` (default ``["completion", "tools"]``) is reported by ``/api/show``; ``None`` omits the
    field (older servers). Without ``"tools"``, ``/api/chat`` requests carrying tools get HTTP 400.
    ``show_queue`` scripts ``/api/show`` answers (e.g. a 500 to exercise retries).
    """

    name = "ollama"
    content_type = "application/x-ndjson"

    def __init__(
        self,
        *,
        capabilities: Sequence[str] | None = ("completion", "tools"),
        strict: bool = True,
        models: dict[str, ModelRules] | None = None,
    ):
        super().__init__(strict=strict, models=models)
        self.capabilities: list[str] | None = list(capabilities) if capabilities is not None else None
        self.show_queue: deque[Response] = deque()

    def builtin(self, request: ScriptedRequest) -> Response | None:
        if request.method == "GET" and request.path == "/api/version":
            return json_reply({"version": "0.0.0-scripted"})
        if request.method == "GET" and request.path == "/api/tags":
            return json_reply({"models": [{"name": "test-model", "model": "test-model"}]})
        if request.method == "POST" and request.path == "/api/show":
            if self.show_queue:
                return self.show_queue.popleft()
            body: dict[str, Any] = {"modelfile": "", "details": {"family": "scripted"}}
            if self.capabilities is not None:
                body["capabilities"] = list(self.capabilities)
            return json_reply(body)
        if request.path == "/api/chat" and isinstance(request.json, dict):
            refused = _rules.check_ollama(
                request.json, self.rules_for(request.json.get("model")), self.capabilities
            )
            if refused is not None:
                self.rejections.append((request, *refused))
                return error(*refused)
        tools_disabled = self.capabilities is None or "tools" not in self.capabilities
        wants_tools = isinstance(request.json, dict) and bool(request.json.get("tools"))
        if request.path == "/api/chat" and wants_tools and tools_disabled:
            return error(400, {"error": f'"{request.json.get("model")}" does not support tools'})
        return None


__all__ = [
    "AnthropicWire",
    "Disconnect",
    "DropAfterResponse",
    "HoldOpenResponse",
    "JsonResponse",
    "OllamaWire",
    "OpenAIWire",
    "Response",
    "ScriptedAnthropicServer",
    "ScriptedOllamaServer",
    "ScriptedOpenAIServer",
    "ScriptedRequest",
    "ScriptedServer",
    "StallResponse",
    "StreamResponse",
    "advertised_tool_name",
    "drop_after",
    "error",
    "hold_open",
    "json_reply",
    "split_text",
    "stall",
    "stream",
]
