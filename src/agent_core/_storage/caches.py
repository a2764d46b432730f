"""The storage manager's in-memory mirror of committed data (docs/storage.md#tables): known sessions, the
per-session ``node_seq``/``seq`` and per-run ``run_seq`` counters, node id → session, the node id →
``node_seq`` index of sessions that write compact context reports, and the per-session SQL.

Counters are read once (``MAX(...)``) inside a write transaction and advanced only in its after-commit
callback, so a failed transaction never moves them. A :attr:`~agent_core._storage.writer.Txn.stale`
transaction (another process wrote the database since, or the previous write failed) reads them again, and
its first after-commit callback, :meth:`StoreCaches.forget_foreign`, drops everything another process may
have changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_core._storage import schema as S
from agent_core._storage._reports import NodeIndex
from agent_core._storage.writer import Txn

NODE_SESSION_CACHE = 200_000
NODE_INDEX_SESSIONS = 16
"""Sessions whose node id → ``node_seq`` index the writer keeps (compact context reports)."""
SESSION_SQL_CACHE = 4096


class StoreCaches:
    """What the single writer knows about committed rows; owned by one :class:`StorageManager`."""

    KEEP_NODE_INDEX = True
    """Keep node id → ``node_seq`` indexes across writes (compact context reports). An index that misses
    another process's nodes is safe: a list naming a node it does not hold is stored whole."""

    def __init__(self) -> None:
        self.sql: dict[str, S.SessionSql] = {}
        self.known_sessions: set[str] = set()
        self.node_seq: dict[str, int] = {}
        self.seq: dict[str, int] = {}
        self.run_seq: dict[str, int] = {}
        self.node_sessions: dict[str, str] = {}
        self.node_index: dict[str, NodeIndex] = {}

    def clear(self) -> None:
        """Forgets the counters (the database is closed); node → session and SQL stay valid."""
        self.known_sessions.clear()
        self.node_seq.clear()
        self.seq.clear()
        self.run_seq.clear()
        self.node_index.clear()

    def session_sql(self, session_id: str) -> S.SessionSql:
        sql = self.sql.get(session_id)
        if sql is None:
            sql = S.SessionSql.build(session_id)
            if len(self.sql) >= SESSION_SQL_CACHE:  # bound the cache against lookups of bogus ids
                self.sql.clear()
            self.sql[session_id] = sql
        return sql

    def forget_foreign(self) -> None:
        """Another process wrote the database (or a write failed): forgets what it may have changed —
        counters, known sessions and node → session. The per-session SQL stays valid, and so do the node
        indexes' entries (committed nodes keep their seqs); an index that misses another process's nodes
        is dropped by the next write of its session (:attr:`NodeIndex.upto`)."""
        self.known_sessions.clear()
        self.node_seq.clear()
        self.seq.clear()
        self.run_seq.clear()
        self.node_sessions.clear()

    @staticmethod
    def counter(txn: Txn, cache: dict[str, int], key: str, sql: str, *params: Any) -> int:
        """The committed value of a counter: the cached one, else (or in a stale ``txn``) ``MAX(...)``
        read in ``txn``."""
        value = None if txn.stale else cache.get(key)
        if value is None:
            value = int(txn.scalar(sql, params) or 0)
        return value

    def forget_session(self, session_id: str, run_ids: Sequence[str]) -> None:
        self.known_sessions.discard(session_id)
        self.sql.pop(session_id, None)
        self.node_seq.pop(session_id, None)
        self.seq.pop(session_id, None)
        self.node_index.pop(session_id, None)
        for run_id in run_ids:
            self.run_seq.pop(run_id, None)
        stale = [n for n, s in self.node_sessions.items() if s == session_id]
        for node_id in stale:
            del self.node_sessions[node_id]

    def session_node_index(self, session_id: str) -> NodeIndex | None:
        """Node id → ``node_seq`` of a session's committed nodes, kept for the last few sessions that
        wrote a context report (compact reports, ``storage/_reports.py``). The first report of a session
        after opening is stored verbatim; its transaction loads the index, later commits extend it."""
        index = self.node_index.pop(session_id, None)
        if index is not None:
            self.node_index[session_id] = index  # most recently used last
        return index

    def drop_node_index(self, session_id: str) -> None:
        self.node_index.pop(session_id, None)

    def keep_node_index(self, session_id: str, index: dict[str, int]) -> None:
        self.node_index.pop(session_id, None)
        while len(self.node_index) >= NODE_INDEX_SESSIONS:
            self.node_index.pop(next(iter(self.node_index)))
        self.node_index[session_id] = NodeIndex(index)

    def remember_node(self, node_id: str, session_id: str) -> None:
        if len(self.node_sessions) >= NODE_SESSION_CACHE:
            self.node_sessions.pop(next(iter(self.node_sessions)))
        self.node_sessions[node_id] = session_id
