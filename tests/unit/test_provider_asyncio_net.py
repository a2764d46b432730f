"""The asyncio network backend under the adapters' HTTP client (providers/_asyncio_net.py): httpcore's
stream contract over real loopback sockets, the httpx transport built on it, and where the adapters use it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import httpcore
import httpx
import pytest

from agent_core.providers._asyncio_net import AsyncioBackend, AsyncioTransport
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.types.model import ModelCompleted
from tests.fixtures.provider_requests import collect, make_request, model_config
from tests.fixtures.scripted_servers import OpenAIWire, ScriptedOpenAIServer, stream

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, limit=1 << 20)
    return server, server.sockets[0].getsockname()[1]


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    """Echoes each line back, then closes when the client sends ``bye``."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            if line == b"bye\n":
                break
            writer.write(line)
            await writer.drain()
        writer.close()

    server, port = await _serve(handle)
    async with server:
        yield port


async def _read_exactly(stream: httpcore.AsyncNetworkStream, size: int) -> bytes:
    data = b""
    while len(data) < size:
        piece = await stream.read(size - len(data), timeout=5)
        assert piece, "the stream ended early"
        data += piece
    return data


async def test_reads_what_was_written_respecting_max_bytes_then_the_end(echo_port: int) -> None:
    stream = await AsyncioBackend().connect_tcp("127.0.0.1", echo_port, timeout=5)
    await stream.write(b"hello world\n", timeout=5)
    assert await _read_exactly(stream, 5) == b"hello"  # at most max_bytes, the rest stays buffered
    assert await _read_exactly(stream, 7) == b" world\n"
    big = b"x" * 300_000 + b"\n"
    await stream.write(big, timeout=5)
    assert await _read_exactly(stream, len(big)) == big
    await stream.write(b"bye\n", timeout=5)
    assert await stream.read(100, timeout=5) == b""
    assert stream.get_extra_info("is_readable") is True  # a closed peer reads as readable (not reusable)
    await stream.aclose()


async def test_idle_connection_is_not_readable_and_reports_its_addresses(echo_port: int) -> None:
    stream = await AsyncioBackend().connect_tcp("127.0.0.1", echo_port, timeout=5)
    assert stream.get_extra_info("is_readable") is False
    assert stream.get_extra_info("server_addr") == ("127.0.0.1", echo_port)
    assert stream.get_extra_info("client_addr")[0] == "127.0.0.1"
    assert stream.get_extra_info("ssl_object") is None
    assert stream.get_extra_info("socket") is not None
    await stream.aclose()
    with pytest.raises(httpcore.WriteError):
        await stream.write(b"late\n", timeout=5)


async def test_a_silent_server_gives_read_timeout() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers
        writer.close()

    server, port = await _serve(handle)
    async with server:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(10, timeout=0.05)
        await stream.aclose()


async def test_a_peer_that_stops_reading_gives_write_timeout_and_close_releases_the_socket() -> None:
    closed = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.pause_reading()  # never reads the body
        await closed.wait()
        writer.transport.resume_reading()
        while await reader.read(1 << 20):  # what was sent before the close, then the end
            pass
        writer.close()

    server, port = await _serve(handle)
    async with server:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        with pytest.raises(httpcore.WriteTimeout):
            for _ in range(1000):
                await stream.write(b"x" * (1 << 20), timeout=0.05)
        await stream.aclose()
        for _ in range(3):
            await asyncio.sleep(0)
        assert stream.get_extra_info("is_readable") is True  # gone, although unsent bytes remained
        closed.set()
        assert await stream.read(10, timeout=5) == b""


async def test_a_refused_connection_gives_connect_error() -> None:
    server, port = await _serve(lambda r, w: asyncio.sleep(0))
    server.close()
    await server.wait_closed()
    with pytest.raises(httpcore.ConnectError):
        await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)


async def test_a_reset_connection_gives_read_error() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.transport.abort()  # RST, not FIN

    server, port = await _serve(handle)
    async with server:
        stream = await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)
        await stream.write(b"x" * 100_000, timeout=5)
        with pytest.raises((httpcore.ReadError, httpcore.WriteError)):
            for _ in range(100):  # the reset arrives as an error, never as data
                assert await stream.read(10, timeout=5) == b""
                await stream.write(b"more", timeout=5)
        await stream.aclose()


async def test_httpx_over_the_transport_keeps_the_connection_alive() -> None:
    connections = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok")
            await writer.drain()

    server, port = await _serve(handle)
    async with server, httpx.AsyncClient(transport=AsyncioTransport()) as client:
        for _ in range(3):
            response = await client.get(f"http://127.0.0.1:{port}/")
            assert (response.status_code, response.text) == (200, "ok")
        assert connections == 1


async def test_the_transport_raises_httpx_exception_types() -> None:
    server, port = await _serve(lambda r, w: asyncio.sleep(0))
    server.close()
    await server.wait_closed()
    async with httpx.AsyncClient(transport=AsyncioTransport()) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()
        writer.close()

    quiet, quiet_port = await _serve(silent)
    broken, broken_port = await _serve(cut)
    async with quiet, broken, httpx.AsyncClient(transport=AsyncioTransport(), timeout=0.2) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get(f"http://127.0.0.1:{quiet_port}/")
        with pytest.raises(httpx.RemoteProtocolError):  # raised while the body is read
            await client.get(f"http://127.0.0.1:{broken_port}/")


class _Connects:
    """Counts the connections :class:`AsyncioBackend` opens."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        original = AsyncioBackend.connect_tcp

        async def counted(
            backend: AsyncioBackend, *args: object, **kwargs: object
        ) -> httpcore.AsyncNetworkStream:
            self.count += 1
            return await original(backend, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(AsyncioBackend, "connect_tcp", counted)


async def test_used_only_by_a_plain_http_adapter_on_a_direct_route(monkeypatch: pytest.MonkeyPatch) -> None:
    connects = _Connects(monkeypatch)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with ScriptedOpenAIServer() as server:
        server.enqueue(stream(OpenAIWire.text_stream("one")), stream(OpenAIWire.text_stream("two")))
        plain = OpenAIAdapter(model_config("openai", server.base_url, max_attempts=1))
        try:
            assert isinstance((await collect(plain, make_request()))[-1], ModelCompleted)
        finally:
            await plain.close()
        assert connects.count == 1
        # TLS: httpx's own transport (the handshake with the plain server fails)
        tls = OpenAIAdapter(
            model_config("openai", server.base_url.replace("http:", "https:"), max_attempts=1)
        )
        try:
            await collect(tls, make_request())
        finally:
            await tls.close()
        assert connects.count == 1
        # no request in clear text followed the failed handshake (what the server made of the TLS bytes,
        # when it recorded them before this line, has no body)
        assert [r.json is not None for r in server.requests] in ([True], [True, False])

    # a proxy from the environment: httpx's own proxy transport carries the request to the proxy
    request_lines: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request_lines.append((await reader.readuntil(b"\r\n\r\n")).split(b"\r\n")[0])
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        writer.close()

    proxy_server, proxy_port = await _serve(proxy)
    async with proxy_server:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy_port}")
        proxied = OpenAIAdapter(model_config("openai", "http://model.invalid/v1", max_attempts=1))
        try:
            await collect(proxied, make_request())
        finally:
            await proxied.close()
    assert request_lines == [b"POST http://model.invalid/v1/chat/completions HTTP/1.1"]
    assert connects.count == 1


async def test_the_prebuilt_post_sends_httpx_own_headers_and_cookies_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOONG_TEST_KEY", "sk-test")
    with ScriptedOpenAIServer() as server:
        cookie = {"Set-Cookie": "__cf_bm=abc; Path=/"}
        server.enqueue(
            stream(OpenAIWire.text_stream("one"), headers=cookie), stream(OpenAIWire.text_stream("two"))
        )
        adapter = OpenAIAdapter(model_config("openai", server.base_url, api_key_env="SOONG_TEST_KEY"))
        try:
            for _ in range(2):
                assert isinstance((await collect(adapter, make_request()))[-1], ModelCompleted)
            url = f"{server.base_url}/chat/completions"
            expected = adapter._client().build_request(
                "POST", url, content=b"{}", headers=adapter._headers("sk-test")
            )
        finally:
            await adapter.close()
        server.verify()
    first, second = (request.headers for request in server.requests)
    wanted = {
        k.lower(): v for k, v in expected.headers.items() if k.lower() not in ("content-length", "cookie")
    }
    assert {k: first[k] for k in wanted} == wanted
    assert "cookie" not in first
    assert second["cookie"] == "__cf_bm=abc"  # httpx's cookie handling is kept
