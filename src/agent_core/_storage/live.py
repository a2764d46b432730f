"""The live channel: a run's transient events from the process executing it to the one following it.

Live deltas (``message_delta``, ``tool_progress``, …) are never stored. When a run executes in another
process (a Temporal worker), they reach the runtime that started the run through this channel, beside
the store — best effort, in order — together with wake-ups when the run stored new events, so the
follower reads the store at once instead of on its next poll. Nothing here is durable.

A message is one JSON object ``{"a": <seq>, "e": [<event json>, …]}``: the events that followed the
run's stored event ``a`` (the follower delivers them after it delivered that one), or, without ``e``, a
wake-up saying the run stored events up to ``a``; ``"p": 1`` in a wake-up says the run is asking for
permission (the follower reads the request where the engine keeps it).

Backends: ``postgres`` — ``NOTIFY`` on the channel ``soong_live_<run id>`` (a follower ``LISTEN``\\ s on one
connection per runtime; a message stays under PostgreSQL's 8000-byte payload limit, larger batches are
split and a single larger event is dropped); ``sqlite`` (all processes on one machine) — UDP datagrams
on 127.0.0.1 to the port the follower wrote to ``<database dir>/live/<run id>.port``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_core._concurrency import TaskOwner, cancel_and_wait
from agent_core._private_fs import make_private_dirs, open_private_new

if TYPE_CHECKING:
    from agent_core._storage.protocol import SessionStore
    from agent_core.config.schema import Settings

log = logging.getLogger(__name__)

PG_PAYLOAD_LIMIT = 7900
"""Bytes of one ``NOTIFY`` payload (PostgreSQL's limit is 8000)."""
UDP_PAYLOAD_LIMIT = 60_000


@dataclass(slots=True)
class LiveFeed:
    """What a follower receives for one run: batches ``(after_seq, event JSON texts)`` in arrival order,
    and ``stored_seq``, the highest stored seq a wake-up announced (``woken`` is set on each message)."""

    batches: list[tuple[int, list[str]]] = field(default_factory=list)
    stored_seq: int = 0
    woken: asyncio.Event = field(default_factory=asyncio.Event)
    permission: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when a message said the run is asking for permission."""

    def receive(self, text: str) -> None:
        try:
            data = json.loads(text)
            after = int(data["a"])
        except (ValueError, KeyError, TypeError):
            return
        events = data.get("e")
        if isinstance(events, list) and events:
            self.batches.append((after, [json.dumps(e) if not isinstance(e, str) else e for e in events]))
        self.stored_seq = max(self.stored_seq, after)
        if data.get("p"):
            self.permission.set()
        self.woken.set()

    async def wait(self, timeout: float) -> None:
        """Until a message arrives or ``timeout`` passed."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.woken.wait(), timeout)
        self.woken.clear()

    def take(self, delivered_seq: int) -> list[str]:
        """The events that follow stored events up to ``delivered_seq``, in order; later ones stay."""
        ready: list[str] = []
        while self.batches and self.batches[0][0] <= delivered_seq:
            ready.extend(self.batches.pop(0)[1])
        return ready


class LiveChannel(Protocol):
    async def publish(
        self, run_id: str, after_seq: int, events: Sequence[str], *, permission: bool = False
    ) -> None:
        """Sends ``events`` (JSON texts) of ``run_id`` that followed its stored event ``after_seq`` (none:
        a wake-up; with ``permission``: the run is asking for permission); never raises."""

    def follow(self, run_id: str) -> contextlib.AbstractAsyncContextManager[LiveFeed]:
        """Receives ``run_id``'s messages while the context is open."""

    async def close(self) -> None: ...


def messages(after_seq: int, events: Sequence[str], limit: int, *, permission: bool = False) -> list[str]:
    """``events`` as messages of at most ``limit`` bytes each (a larger single event is dropped); none:
    a wake-up (``permission``: saying the run asks for permission)."""
    if not events:
        return [json.dumps({"a": after_seq, "p": 1} if permission else {"a": after_seq})]
    out: list[str] = []
    head = f'{{"a": {after_seq}, "e": ['
    batch: list[str] = []
    size = len(head) + 2
    for event in events:
        n = len(event.encode()) + 2
        if len(head) + 2 + n > limit:
            log.debug("a live event of %d bytes is over the channel's limit; dropped", n)
            continue
        if batch and size + n > limit:
            out.append(head + ", ".join(batch) + "]}")
            batch, size = [], len(head) + 2
        batch.append(event)
        size += n
    if batch:
        out.append(head + ", ".join(batch) + "]}")
    return out


class LoopbackLive:
    """The sqlite backend's channel: UDP on 127.0.0.1, the follower's port in a file per run."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._sock: socket.socket | None = None
        self._ports: dict[str, int] = {}

    def _port_file(self, run_id: str) -> Path:
        return self.directory / f"{run_id}.port"

    async def publish(
        self, run_id: str, after_seq: int, events: Sequence[str], *, permission: bool = False
    ) -> None:
        port = self._ports.get(run_id)
        if port is None:
            try:
                port = int(self._port_file(run_id).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return  # nobody follows the run live
            self._ports[run_id] = port
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        for message in messages(after_seq, events, UDP_PAYLOAD_LIMIT, permission=permission):
            try:
                self._sock.sendto(message.encode(), ("127.0.0.1", port))
            except OSError:  # full buffer, or the follower is gone: best effort
                self._ports.pop(run_id, None)
                return

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[LiveFeed]:
        feed = LiveFeed()
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Receiver(feed), local_addr=("127.0.0.1", 0), family=socket.AF_INET
        )
        path = self._port_file(run_id)
        try:
            port = transport.get_extra_info("sockname")[1]
            make_private_dirs(self.directory)
            temp = path.with_suffix(f".{os.getpid()}.tmp")
            with contextlib.suppress(FileNotFoundError):
                temp.unlink()
            with os.fdopen(open_private_new(temp), "w", encoding="utf-8") as handle:
                handle.write(str(port))
            temp.replace(path)
            yield feed
        finally:
            transport.close()
            with contextlib.suppress(OSError):
                path.unlink()

    async def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class _Receiver(asyncio.DatagramProtocol):
    def __init__(self, feed: LiveFeed) -> None:
        self.feed = feed

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.feed.receive(data.decode(errors="replace"))


def pg_channel(run_id: str) -> str:
    return "soong_live_" + "".join(c if c.isalnum() else "_" for c in run_id.lower())[:50]


class PostgresLive:
    """The postgres backend's channel: ``NOTIFY`` to publish, one ``LISTEN`` connection to follow (its
    reader runs the ``LISTEN`` / ``UNLISTEN`` statements between waits for notifications)."""

    def __init__(self, dsn: str) -> None:
        self._dsn = dsn
        self._publisher: Any = None
        self._listener: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._tasks = TaskOwner("postgres live listener")
        self._pending: list[tuple[str, asyncio.Future[None]]] = []
        self._feeds: dict[str, LiveFeed] = {}
        self._publish_lock = asyncio.Lock()
        self._listen_lock = asyncio.Lock()

    async def publish(
        self, run_id: str, after_seq: int, events: Sequence[str], *, permission: bool = False
    ) -> None:
        try:
            async with self._publish_lock:
                if self._publisher is None:
                    import psycopg

                    self._publisher = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
                channel = pg_channel(run_id)
                for message in messages(after_seq, events, PG_PAYLOAD_LIMIT, permission=permission):
                    await self._publisher.execute("SELECT pg_notify(%s, %s)", (channel, message))
        except Exception as exc:  # best effort: a lost connection is opened again next time
            log.debug("live publish of %s failed: %s", run_id, type(exc).__name__)
            self._publisher = None

    @contextlib.asynccontextmanager
    async def follow(self, run_id: str) -> AsyncIterator[LiveFeed]:
        feed = LiveFeed()
        channel = pg_channel(run_id)
        self._feeds[channel] = feed
        try:
            try:
                await self._listen(f'LISTEN "{channel}"')
            except Exception as exc:  # without the channel the follower polls the store
                log.debug("cannot follow %s live: %s", run_id, type(exc).__name__)
            yield feed
        finally:
            self._feeds.pop(channel, None)
            with contextlib.suppress(Exception):
                await self._listen(f'UNLISTEN "{channel}"')

    async def _listen(self, statement: str) -> None:
        async with self._listen_lock:
            if self._listener is None:
                import psycopg

                self._listener = await psycopg.AsyncConnection.connect(self._dsn, autocommit=True)
            if self._reader is None or self._reader.done():
                self._reader = self._tasks.spawn(self._read(self._listener))
            done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._pending.append((statement, done))
        await done

    async def _read(self, conn: Any) -> None:
        try:
            while True:
                while self._pending:
                    statement, done = self._pending.pop(0)
                    try:
                        await conn.execute(statement)
                    except Exception as exc:
                        done.set_exception(exc)
                        raise
                    done.set_result(None)
                async for note in conn.notifies(timeout=0.05):
                    feed = self._feeds.get(note.channel)
                    if feed is not None:
                        feed.receive(note.payload)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the followers go on polling the store
            log.debug("the live listener stopped: %s", type(exc).__name__)
            self._listener = None
            for _statement, done in self._pending:
                if not done.done():
                    done.set_exception(exc)
            self._pending = []

    async def close(self) -> None:
        await cancel_and_wait(*self._tasks.tasks)
        for conn in (self._publisher, self._listener):
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()
        self._publisher = self._listener = self._reader = None


def live_channel(storage: SessionStore, settings: Settings) -> LiveChannel:
    """The channel of ``storage``'s backend."""
    if storage.backend == "postgres":
        from agent_core._storage.postgres.connection import dsn_from_env

        return PostgresLive(dsn_from_env(os.environ, settings.storage.postgres.dsn_env or ""))
    db_path = getattr(storage, "db_path", None)
    if not isinstance(db_path, Path):
        raise TypeError(f"no live channel for the {storage.backend!r} storage backend")
    return LoopbackLive(db_path.parent / "live")
