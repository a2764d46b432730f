"""The ``inbox_entries`` table (migration 6): the durable per-agent inbox, on every backend.

Contracts:

- :func:`insert_entries` runs inside a write transaction: it checks that the recipient agent belongs to
  the session (``validation_error``), holds the agent's row (PostgreSQL ``FOR UPDATE``; a SQLite write
  transaction is serialised already) so concurrent deliveries count one after another, and refuses the
  whole delivery when it would leave more than ``max_entries`` unread entries (``validation_error`` naming
  ``agents.inbox_max_entries``; nothing is stored, never a silent drop).
- :func:`ack_entries` marks entries ``acked`` with the id of the node that carries them, inside that
  node's own transaction (``SessionStore.append(..., inbox_ack=...)``): an entry is acknowledged exactly
  when that node commits. An entry another drain acknowledged meanwhile makes the transaction fail with
  :class:`InboxAckConflict` (the node is not written; the drain reads the inbox again), so no entry ever
  reaches a model twice.
- Reads return unread entries oldest first (insertion order).
- :class:`InboxTables` holds the store methods (``deliver_inbox``, ``pending_inbox``, ``inbox_depths``,
  ``list_inbox``) that ``SqlSessionStore`` mixes in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_core._redaction import Redactor
from agent_core._storage.columns import where_equal
from agent_core._storage.writer import Txn, TxnQueue
from agent_core.errors import AgentCoreError, ErrorCode, StorageError
from agent_core.types.base import format_ts, parse_ts
from agent_core.types.inbox import InboxEntry

COLUMNS = (
    "entry_id",
    "session_id",
    "agent_id",
    "kind",
    "sender",
    "content",
    "request_id",
    "metadata_json",
    "status",
    "node_id",
    "created_at",
    "acked_at",
)
SELECT = f"SELECT {', '.join(COLUMNS)} FROM inbox_entries"
_INSERT = f"INSERT INTO inbox_entries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)})"


@dataclass(frozen=True, slots=True)
class StoredEntry:
    """One row of ``inbox_entries``: the entry and where it stands."""

    entry: InboxEntry
    session_id: str
    agent_id: str
    status: str
    node_id: str | None = None

    @property
    def entry_id(self) -> str:
        assert self.entry.entry_id is not None
        return self.entry.entry_id


@dataclass(frozen=True, slots=True)
class InboxAck:
    """Entries of ``agent_id`` acknowledged by the node ``node_id`` written in the same transaction."""

    agent_id: str
    entry_ids: tuple[str, ...]
    node_id: str


class InboxAckConflict(StorageError):
    """Another drain acknowledged one of the entries first; the node carrying them was not written."""

    def __init__(self, entry_ids: Sequence[str]) -> None:
        super().__init__(
            ErrorCode.storage_error,
            "inbox entries were acknowledged by another drain meanwhile",
            details={"entry_ids": list(entry_ids)},
        )


def stored_entry(row: Sequence[Any]) -> StoredEntry:
    data = dict(zip(COLUMNS, tuple(row), strict=True))
    entry = InboxEntry.model_validate(
        {
            "entry_id": data["entry_id"],
            "kind": data["kind"],
            "from": data["sender"],
            "content": data["content"],
            "request_id": data["request_id"],
            "created_at": parse_ts(str(data["created_at"])),
            "metadata": json.loads(data["metadata_json"]) if data["metadata_json"] else {},
        }
    )
    return StoredEntry(
        entry=entry,
        session_id=str(data["session_id"]),
        agent_id=str(data["agent_id"]),
        status=str(data["status"]),
        node_id=data["node_id"],
    )


def entry_row(session_id: str, agent_id: str, entry: InboxEntry) -> tuple[Any, ...]:
    """The row of a complete entry (``entry_id`` and ``created_at`` set); the caller redacts its text."""
    assert entry.entry_id is not None and entry.created_at is not None
    return (
        entry.entry_id,
        session_id,
        agent_id,
        entry.kind,
        entry.from_,
        entry.content,
        entry.request_id,
        json.dumps(entry.metadata, ensure_ascii=False) if entry.metadata else None,
        "pending",
        None,
        format_ts(entry.created_at),
        None,
    )


def insert_entries(
    txn: Txn,
    session_id: str,
    agent_id: str,
    rows: Sequence[tuple[Any, ...]],
    *,
    max_entries: int,
    row_lock: str = "",
) -> int:
    """Stores ``rows`` (:func:`entry_row`) for one recipient; returns its unread count afterwards."""
    found = txn.fetchall(f"SELECT session_id FROM agents WHERE agent_id = ?{row_lock}", (agent_id,))
    if not found or found[0][0] != session_id:
        raise AgentCoreError(
            ErrorCode.validation_error,
            f"unknown agent {agent_id!r} in session {session_id!r}",
            details={"session_id": session_id, "agent_id": agent_id},
        )
    depth = int(
        txn.scalar(
            "SELECT COUNT(*) FROM inbox_entries WHERE session_id = ? AND agent_id = ? AND status = 'pending'",
            (session_id, agent_id),
        )
    )
    if depth + len(rows) > max_entries:
        raise AgentCoreError(
            ErrorCode.validation_error,
            f"the inbox of agent {agent_id} holds {depth} unread entries and takes at most {max_entries} "
            f"([agents] inbox_max_entries = {max_entries}); nothing was delivered, try again once it was read",
            details={
                "limit": "agents.inbox_max_entries",
                "max_entries": max_entries,
                "depth": depth,
                "session_id": session_id,
                "agent_id": agent_id,
            },
        )
    txn.executemany(_INSERT, rows)
    return depth + len(rows)


def ack_entries(txn: Txn, session_id: str, ack: InboxAck) -> None:
    """Marks the entries of ``ack`` acknowledged by its node (:class:`InboxAckConflict` when one was not
    pending any more: the whole transaction rolls back)."""
    now = format_ts()
    changed = 0
    for entry_id in ack.entry_ids:
        changed += txn.execute(
            "UPDATE inbox_entries SET status = 'acked', node_id = ?, acked_at = ? "
            "WHERE entry_id = ? AND session_id = ? AND agent_id = ? AND status = 'pending'",
            (ack.node_id, now, entry_id, session_id, ack.agent_id),
        )
    if changed != len(ack.entry_ids):
        raise InboxAckConflict(ack.entry_ids)


def pending_sql(*, limit: int | None = None) -> str:
    tail = f" LIMIT {int(limit)}" if limit is not None else ""
    return f"{SELECT} WHERE session_id = ? AND agent_id = ? AND status = 'pending' ORDER BY rowid{tail}"


DEPTHS_SQL = "SELECT agent_id, COUNT(*) FROM inbox_entries WHERE session_id = ? AND status = 'pending' GROUP BY agent_id"


class InboxTables:
    """The inbox methods of the portable session store (``SqlSessionStore`` mixes them in; it provides
    the writer queue, the read path, the redactor and the row lock)."""

    ROW_LOCK = ""
    _redactor: Redactor

    def _queue(self) -> TxnQueue:
        raise NotImplementedError

    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    async def deliver_inbox(
        self,
        session_id: str,
        agent_id: str,
        entries: Sequence[InboxEntry],
        *,
        max_entries: int,
        guard: Callable[[Txn], bool] | None = None,
    ) -> int | None:
        """Stores complete ``entries`` (ids and times set) for one agent in ONE transaction; returns the
        agent's unread count afterwards. ``guard`` runs first in the same transaction: ``False`` stores
        nothing and returns ``None`` (a job result delivered once). Over ``max_entries`` unread entries:
        ``validation_error`` and nothing is stored (:func:`agent_core._storage.inbox.insert_entries`)."""
        rows = [
            entry_row(
                session_id,
                agent_id,
                e.model_copy(
                    update={
                        "content": self._redactor.text(e.content),
                        "from_": self._redactor.text(e.from_),
                        "metadata": self._redactor.value(e.metadata),
                    }
                ),
            )
            for e in entries
        ]
        lock = self.ROW_LOCK

        def op(txn: Txn) -> int | None:
            if guard is not None and not guard(txn):
                return None
            return insert_entries(txn, session_id, agent_id, rows, max_entries=max_entries, row_lock=lock)

        return await self._queue().submit(op)

    async def pending_inbox(
        self, session_id: str, agent_id: str, limit: int | None = None
    ) -> list[StoredEntry]:
        """Unread entries of one agent, oldest first."""
        rows = await self._read(pending_sql(limit=limit), (session_id, agent_id))
        return [stored_entry(r) for r in rows]

    async def inbox_depths(self, session_id: str) -> dict[str, int]:
        """Unread entry count per agent of the session (agents without unread entries are absent)."""
        return {str(a): int(n) for a, n in await self._read(DEPTHS_SQL, (session_id,))}

    async def list_inbox(self, session_id: str, agent_id: str | None = None) -> list[StoredEntry]:
        """Every entry (read or not) of the session, or of one of its agents, oldest first."""
        where, params = where_equal(session_id=session_id, agent_id=agent_id)
        return [stored_entry(r) for r in await self._read(f"{SELECT}{where} ORDER BY rowid", params)]
