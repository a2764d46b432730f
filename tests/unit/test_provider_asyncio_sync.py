"""httpcore's locks, events, timeouts and shields on asyncio (providers/_asyncio_sync.py): anyio's contract
for what httpcore uses, and the pool timeout through httpx. That a plain run's first request leaves anyio's
asyncio backend unloaded is checked in a fresh interpreter by tests/unit/test_cold_imports.py."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import sys

import anyio
import httpx
import pytest

from agent_core.providers._asyncio_net import use_asyncio_backend
from agent_core.providers._asyncio_sync import ANYIO_ASYNCIO_BACKEND, PRIMITIVES, FailAfter, install


async def test_fail_after_raises_timeout_error_and_takes_its_cancellation_back() -> None:
    task = asyncio.current_task()
    assert task is not None
    with pytest.raises(TimeoutError):
        with FailAfter(0.01):
            await asyncio.sleep(5)
    assert task.cancelling() == 0
    for delay in (5.0, None):
        with FailAfter(delay):
            await asyncio.sleep(0)
    await asyncio.sleep(0.02)  # no late cancellation arrives from a finished block


async def test_fail_after_lets_an_outside_cancellation_through() -> None:
    entered = asyncio.Event()

    async def body() -> None:
        with FailAfter(5):
            entered.set()
            await asyncio.sleep(5)

    task = asyncio.ensure_future(body())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_the_shield_is_anyio_own_once_its_asyncio_backend_is_loaded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    importlib.import_module(ANYIO_ASYNCIO_BACKEND)
    scope = PRIMITIVES.CancelScope(shield=True)
    assert isinstance(scope, anyio.CancelScope)
    with scope:
        await asyncio.sleep(0)
    monkeypatch.delitem(sys.modules, ANYIO_ASYNCIO_BACKEND)
    assert isinstance(PRIMITIVES.CancelScope(shield=True), contextlib.nullcontext)


async def test_semaphore_is_bounded_like_anyio() -> None:
    semaphore = PRIMITIVES.Semaphore(1, max_value=1)
    await semaphore.acquire()
    semaphore.release()
    with pytest.raises(ValueError):
        semaphore.release()


def test_install_replaces_only_anyio_and_is_idempotent(monkeypatch: pytest.MonkeyPatch) -> None:
    module = sys.modules["httpcore._synchronization"]
    monkeypatch.setattr(module, "anyio", anyio)
    assert install() is True
    assert module.anyio is PRIMITIVES
    assert install() is True
    monkeypatch.setattr(module, "anyio", None)  # httpcore without anyio: left alone
    assert install() is False
    assert module.anyio is None


async def test_a_full_pool_gives_pool_timeout_through_httpx() -> None:
    held = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab")  # the body never completes
        await writer.drain()
        held.set()
        await reader.read()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server, httpx.AsyncClient(limits=httpx.Limits(max_connections=1)) as client:
        assert use_asyncio_backend(client) is True
        assert sys.modules["httpcore._synchronization"].anyio is PRIMITIVES
        async with client.stream("GET", f"http://127.0.0.1:{port}/"):
            await held.wait()
            with pytest.raises(httpx.PoolTimeout):
                await client.get(f"http://127.0.0.1:{port}/", timeout=httpx.Timeout(5, pool=0.05))
