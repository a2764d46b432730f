"""An asyncio network backend for httpcore: the sockets under the adapters' HTTP client (issue 16).

httpcore's default backend reaches asyncio through anyio: every read and write enters a cancel scope, every
write yields to the event loop once more (a checkpoint), and reading is paused and resumed around every
receive (two ``epoll_ctl`` calls each). This backend is a plain :class:`asyncio.Protocol`: reading stays
on (paused only above :data:`READ_HIGH_WATER` buffered bytes), a read returns buffered bytes at once, a
write the transport accepts completes without yielding, and a timeout is one timer handle.

Contracts (those of httpcore's ``AsyncNetworkStream``/``AsyncNetworkBackend``, as its anyio backend keeps
them): ``read`` returns at most ``max_bytes``, ``b""`` at the end of the stream; timeouts raise
``ConnectTimeout``/``ReadTimeout``/``WriteTimeout`` and socket failures ``ConnectError``/``ReadError``/
``WriteError``, so httpx raises the same exception types; ``CancelledError`` propagates. HTTP itself stays
httpcore's and h11's. Plain connections only (no TLS upgrade).

:class:`AsyncioTransport` is the httpx transport the adapters give a client that only talks to an
``http://`` origin: an ``httpcore.AsyncConnectionPool`` on this backend, through the public seams of both
libraries (httpx's ``transport=``, httpcore's ``network_backend=``); proxied routes keep httpx's own
transports. Nothing process-wide changes: httpcore's locks and events stay anyio's.
"""

from __future__ import annotations

import asyncio
import select
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

READ_HIGH_WATER = 1 << 20
"""Buffered bytes above which reading pauses until the reader catches up (then resumes below a quarter)."""
HAPPY_EYEBALLS_DELAY_S = 0.25
"""Delay between connection attempts to a host's successive addresses (anyio's ``connect_tcp`` default)."""

SocketOption = tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def _readable(sock: Any) -> bool:
    """Whether ``recv`` on the socket would return at once (a closed socket counts as readable)."""
    fd = -1 if sock is None else sock.fileno()
    if fd < 0:
        return True
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


class _Connection(asyncio.Protocol):
    """Buffers what the transport delivers; wakes the one waiting reader or writer."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.read_waiter: asyncio.Future[None] | None = None
        self.write_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > READ_HIGH_WATER and not self.reading_paused and self.transport is not None:
            self.transport.pause_reading()
            self.reading_paused = True
        self._wake()

    def eof_received(self) -> bool | None:
        self.eof = True
        self._wake()
        return None  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self.writing_paused = False
        self._wake()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._wake()

    def _wake(self) -> None:
        for waiter in (self.read_waiter, self.write_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def wait(self, timeout: float | None, *, reading: bool) -> None:
        """Until the next delivery, end, or resumed writing; ``TimeoutError`` after ``timeout`` s."""
        waiter = self.loop.create_future()
        if reading:
            self.read_waiter = waiter
        else:
            self.write_waiter = waiter
        timer = None if timeout is None else self.loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            if reading:
                self.read_waiter = None
            else:
                self.write_waiter = None
            if timer is not None:
                timer.cancel()


class AsyncioStream(httpcore.AsyncNetworkStream):
    """One plain connection (TCP or Unix socket)."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        conn = self._connection
        if not conn.chunks and not conn.eof:
            deadline = None if timeout is None else conn.loop.time() + timeout
            while not conn.chunks and not conn.eof:
                try:
                    await conn.wait(None if deadline is None else deadline - conn.loop.time(), reading=True)
                except TimeoutError:
                    raise httpcore.ReadTimeout("timed out reading from the connection") from None
        if conn.chunks:
            chunk = conn.chunks.popleft()
            if len(chunk) > max_bytes:
                conn.chunks.appendleft(chunk[max_bytes:])
                chunk = chunk[:max_bytes]
            conn.size -= len(chunk)
            if conn.reading_paused and conn.size <= READ_HIGH_WATER // 4 and conn.transport is not None:
                conn.reading_paused = False
                conn.transport.resume_reading()
            return chunk
        if conn.error is not None:
            raise httpcore.ReadError(str(conn.error) or type(conn.error).__name__) from conn.error
        return b""

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        conn = self._connection
        transport = conn.transport
        if transport is None or transport.is_closing() or conn.error is not None:
            raise httpcore.WriteError("the connection is closed")
        transport.write(buffer)
        deadline = None if timeout is None else conn.loop.time() + timeout
        while conn.writing_paused:
            try:
                await conn.wait(None if deadline is None else deadline - conn.loop.time(), reading=False)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out writing to the connection") from None
        if conn.error is not None:
            raise httpcore.WriteError(str(conn.error) or type(conn.error).__name__) from conn.error

    async def aclose(self) -> None:
        transport = self._connection.transport
        if transport is not None and not transport.is_closing():
            transport.close()
            await asyncio.sleep(0)  # the close flushes what it can at once (as httpcore's anyio backend)
            transport.abort()  # then the socket is released even when the peer stopped reading

    def get_extra_info(self, info: str) -> Any:
        conn = self._connection
        transport = conn.transport
        if transport is None:
            return None
        if info == "ssl_object":
            return transport.get_extra_info("ssl_object")
        if info in ("client_addr", "server_addr"):
            address = transport.get_extra_info("sockname" if info == "client_addr" else "peername")
            return tuple(address[:2]) if isinstance(address, tuple) else address
        if info == "socket":
            return transport.get_extra_info("socket")
        if info == "is_readable":
            return bool(conn.chunks) or conn.eof or _readable(transport.get_extra_info("socket"))
        return None


def _apply(transport: asyncio.BaseTransport, options: Iterable[SocketOption] | None) -> None:
    sock = transport.get_extra_info("socket")
    for option in options or ():
        sock.setsockopt(*option)


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """Opens :class:`AsyncioStream` connections on the running loop."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, conn = await loop.create_connection(
                    lambda: _Connection(loop),
                    host,
                    port,
                    local_addr=(local_address, 0) if local_address else None,
                    happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY_S,
                )
            _apply(transport, socket_options)  # TCP_NODELAY is asyncio's default
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return AsyncioStream(conn)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, conn = await loop.create_unix_connection(lambda: _Connection(loop), path)
            _apply(transport, socket_options)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"timed out connecting to {path}") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return AsyncioStream(conn)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


_EXCEPTIONS: tuple[tuple[type[Exception], type[httpx.HTTPError]], ...] = (
    # most specific first: the first match is raised
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


@contextmanager
def _httpx_errors() -> Iterator[None]:
    """Raises httpcore's exceptions as the httpx exceptions httpx's own transport raises for them."""
    try:
        yield
    except Exception as exc:
        for source, target in _EXCEPTIONS:
            if isinstance(exc, source):
                raise target(str(exc)) from exc
        raise


class _ResponseStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        aclose = getattr(self._stream, "aclose", None)
        if aclose is not None:
            with _httpx_errors():
                await aclose()


class AsyncioTransport(httpx.AsyncBaseTransport):
    """``httpx.AsyncHTTPTransport`` for plain ``http://`` origins on :class:`AsyncioBackend`: the same
    pool limits as httpx's defaults, the same request/response mapping and exception types."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        limits = limits or httpx.Limits(
            max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0
        )
        self.pool = httpcore.AsyncConnectionPool(
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _httpx_errors():
            response = await self.pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_ResponseStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        with _httpx_errors():
            await self.pool.aclose()
