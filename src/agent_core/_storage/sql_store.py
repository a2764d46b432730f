"""The portable session store (docs/storage.md#backends, docs/storage.md#tables): everything a backend does in
portable SQL.

:class:`SqlSessionStore` holds the logic both backends share — every write as one queued transaction on a
:class:`~agent_core._storage.writer.TxnQueue`, the node/event append with its sequence counters, and every
read — on top of what each backend provides: connecting and migrating (:meth:`open`/:meth:`close`), the
writer queue (``_writer``), the read path (:meth:`_read`), the session lease, run-owner liveness and the
Task WAL medium. The backends are siblings: ``sqlite`` (:class:`agent_core._storage.sqlite.StorageManager`)
and ``postgres`` (:class:`agent_core._storage.postgres.store.PostgresStorage`); neither derives from the
other.

Contracts:

- Every write method is ONE queued writer operation = ONE transaction; on failure nothing is stored,
  caches/counters are untouched and the caller gets ``StorageError(storage_error)`` (invalid arguments:
  ``AgentCoreError(validation_error)``).
- Reads never wait behind the writer queue; they see committed data.
- ``node_seq`` / ``seq`` are per-session counters starting at 1, ``run_seq`` a per-run counter starting
  at 1, allocated inside the write transaction (:class:`~agent_core._storage.caches.StoreCaches`: cached
  while no other process wrote the database since, read again in a ``stale`` transaction).
- Node content/metadata, event payloads, ``*_json`` columns and artifact summaries are redacted with
  the :class:`Redactor` before they are serialised (write-time redaction, docs/storage.md#redaction).
"""

from __future__ import annotations

import asyncio
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from agent_core._ids import validate_session_id
from agent_core._redaction import Redactor
from agent_core._storage import schema as S
from agent_core._storage._reports import MARKER, ids_by_seq, wants_node_index
from agent_core._storage.caches import StoreCaches
from agent_core._storage.columns import (
    invalid,
    merge_session_metadata,
    redact_record,
    update_statement,
    where_equal,
)
from agent_core._storage.decode import events_from_rows, in_seq_order, nodes_from_rows, runs_from_rows
from agent_core._storage.drafts import UNSET, AppendResult, EventDraft, NodeDraft, Tip, TipMarker, Unset
from agent_core._storage.inbox import InboxAck, InboxTables, ack_entries
from agent_core._storage.migrations import MIGRATIONS, Migration
from agent_core._storage.rows import jsonable, prepare_event, prepare_node
from agent_core._storage.writer import Txn, TxnQueue
from agent_core.errors import AgentCoreError, ErrorCode, NotFoundError, SessionNotFoundError, StorageError
from agent_core.types.base import format_ts
from agent_core.types.enums import RunStatus
from agent_core.types.mappers import record_from_row
from agent_core.types.runtime import Node, RuntimeEvent
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    RunRecord,
    SessionRecord,
    StorageRecord,
)

if TYPE_CHECKING:
    from agent_core._storage.protocol import SessionLease
    from agent_core._tasks.wal import WalWriter
    from agent_core.types._results import DeleteCounts

R = TypeVar("R", bound=StorageRecord)
T = TypeVar("T")

NON_TERMINAL_RUN_STATUSES = (RunStatus.queued, RunStatus.pending, RunStatus.running)


def _ends_run(fields: dict[str, Any]) -> bool:
    """A ``runs`` update setting a terminal status."""
    status = fields.get("status")
    return status is not None and status in _TERMINAL_RUN_STATUS_VALUES


_TERMINAL_RUN_STATUS_VALUES = frozenset(s.value for s in RunStatus if s.terminal)


class SqlSessionStore(InboxTables, ABC):
    """The portable part of a session store; a backend subclass connects it (see the module docstring)."""

    BACKEND = ""
    SHARED = False
    """True when other processes write the same database (then :meth:`session_lease` is cluster-wide)."""

    def __init__(
        self,
        *,
        redactor: Redactor,
        migrations: Sequence[Migration] = MIGRATIONS,
        caches: StoreCaches | None = None,
    ) -> None:
        self._redactor = redactor
        self._migrations = tuple(migrations)
        self._writer: TxnQueue | None = None
        self._open_lock = asyncio.Lock()
        self._caches = caches if caches is not None else StoreCaches()

    # ---- lifecycle (the backend's) --------------------------------------------------------------

    @property
    def backend(self) -> str:
        return self.BACKEND

    @property
    def is_open(self) -> bool:
        return self._writer is not None and not self._writer.closing

    @property
    def redactor(self) -> Redactor:
        return self._redactor

    @abstractmethod
    async def open(self) -> None:
        """Idempotent: connects, applies the missing migrations and starts ``_writer``."""

    @abstractmethod
    async def close(self) -> None:
        """Finishes every queued write (:meth:`_stop_writer`), then disconnects. Idempotent."""

    async def _stop_writer(self) -> None:
        """Refuses new writes, finishes the queued ones and forgets the cached counters."""
        writer, self._writer = self._writer, None
        if writer is not None:
            await writer.drain_and_stop()
        self._caches.clear()

    @abstractmethod
    def session_lease(self, session_id: str) -> SessionLease:
        """Held by a root run while it runs: one running root run per session across every process
        sharing the database, in FIFO order."""

    @abstractmethod
    async def session_busy(self, session_id: str) -> str | None:
        """Who else holds (or waits for) ``session_id``'s lease, for a message; ``None`` when nobody."""

    @abstractmethod
    async def writes_elsewhere(self) -> int:
        """Unchanged between two calls only if no other process (or store) wrote the database between."""

    @abstractmethod
    async def runs_live_elsewhere(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` belong to another live process or open store (crash recovery leaves
        them alone)."""

    @property
    @abstractmethod
    def claim_owner(self) -> str:
        """This open store's process as the owner of the claims it takes (``tool_call_claims``)."""

    @abstractmethod
    async def live_owners(self, owners: Sequence[str]) -> set[str]:
        """Which of the claim ``owners`` are alive (see :mod:`agent_core._storage.owners`)."""

    @abstractmethod
    def task_wal_writer(self) -> WalWriter | None:
        """The Task WAL medium of this backend; ``None`` means JSONL files (the default writer)."""

    def _queue(self) -> TxnQueue:
        if self._writer is None or self._writer.closing:
            raise StorageError(ErrorCode.storage_error, "the storage manager is not open")
        return self._writer

    async def write(self, op: Callable[[Txn], T]) -> T:
        """Runs ``op`` as one queued write transaction (for feature stores owning their own global
        tables, e.g. jobs and schedules); the caller redacts what it stores."""
        return await self._queue().submit(op)

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read on the read connection (committed data only)."""
        return await self._read(sql, params)

    # ---- simple writes --------------------------------------------------------------------------

    async def create_session(self, session: SessionRecord, root_agent: AgentRecord) -> None:
        """Inserts the session + root agent rows and creates ``nodes_<sid>``/``events_<sid>`` (one txn)."""
        sql = self._caches.session_sql(validate_session_id(session.session_id))
        if root_agent.session_id != session.session_id:
            raise invalid("the root agent must belong to the new session")
        session_row = redact_record(session, self._redactor).row()
        agent_row = redact_record(root_agent, self._redactor).row()
        sid = session.session_id

        def op(txn: Txn) -> None:
            if txn.scalar("SELECT 1 FROM sessions WHERE session_id = ?", (sid,)):
                raise invalid(f"session {sid!r} already exists")
            txn.execute(S.INSERT_SESSION, session_row)
            txn.execute(S.INSERT_AGENT, agent_row)
            for statement in sql.create:
                txn.execute(statement)

            def committed() -> None:
                self._caches.known_sessions.add(sid)
                self._caches.node_seq[sid] = 0
                self._caches.seq[sid] = 0

            txn.after_commit(committed)

        await self._queue().submit(op)

    async def _insert(
        self, statement: str, record: AgentRecord | RunRecord | ArtifactRecord, *, agent_id: str | None = None
    ) -> None:
        """Inserts one row after checking that its session (and ``agent_id``, if given) exists."""
        row = redact_record(record, self._redactor).row()
        session_id = record.session_id

        def op(txn: Txn) -> None:
            self._ensure_session(txn, session_id)
            if agent_id is not None and not txn.scalar(
                "SELECT 1 FROM agents WHERE agent_id = ? AND session_id = ?", (agent_id, session_id)
            ):
                raise invalid(f"unknown agent {agent_id!r} in session {session_id!r}")
            txn.execute(statement, row)
            if isinstance(record, RunRecord):
                self._record_run_owner(txn, record)

        await self._queue().submit(op)

    @abstractmethod
    def _record_run_owner(self, txn: Txn, record: RunRecord) -> None:
        """Inside the transaction inserting ``record``: notes which open store runs it (read by
        :meth:`runs_live_elsewhere`)."""

    @abstractmethod
    def _forget_session_extras(self, txn: Txn, session_id: str) -> None:
        """Inside the transaction deleting a session (after its runs rows): deletes the backend's own
        rows of it (run owners)."""

    async def insert_agent(self, record: AgentRecord) -> None:
        """Inserts an agent row of an existing session."""
        await self._insert(S.INSERT_AGENT, record)

    async def insert_run(self, record: RunRecord) -> None:
        """Inserts a run row of an existing session and agent."""
        await self._insert(S.INSERT_RUN, record, agent_id=record.agent_id)

    async def insert_artifact(self, record: ArtifactRecord) -> None:
        """Inserts an artifact registry row of an existing session."""
        await self._insert(S.INSERT_ARTIFACT, record)

    async def _update(self, table: str, key: str, key_value: str, fields: dict[str, Any]) -> None:
        allowed = S.UPDATABLE_RUN_COLUMNS if table == "runs" else S.UPDATABLE_AGENT_COLUMNS
        statement, params = update_statement(table, key, key_value, fields, allowed, self._redactor)

        def op(txn: Txn) -> None:
            if txn.execute(statement, params) == 0:
                raise invalid(f"unknown {table[:-1]} {key_value!r}")

        await self._queue().submit(op)

    async def update_agent(self, agent_id: str, /, **fields: Any) -> None:
        """Updates agent columns (``*_json`` accept dicts/models/JSON text); ``updated_at`` is set."""
        await self._update("agents", "agent_id", agent_id, fields)

    async def update_run(self, run_id: str, /, **fields: Any) -> None:
        """Updates run columns (``*_json`` accept dicts/models/JSON text); ``updated_at`` is set."""
        await self._update("runs", "run_id", run_id, fields)

    async def merge_run_metadata(self, run_id: str, key: str, value: Any) -> None:
        """Sets ``key`` of a run's ``metadata_json`` object to ``value`` and leaves its other keys as
        stored: read, merged and written in one transaction holding the run's row, so concurrent merges
        of different keys (by several processes) all survive; ``updated_at`` is set."""

        def op(txn: Txn) -> None:
            self._merge_run_metadata(txn, run_id, key, value)

        await self._queue().submit(op)

    ROW_LOCK = ""
    """Appended to the ``SELECT`` of a row its transaction then updates (postgres: ``FOR UPDATE``; a
    SQLite write transaction is ``BEGIN IMMEDIATE``, which serialises the writers already)."""

    def _merge_run_metadata(self, txn: Txn, run_id: str, key: str, value: Any) -> None:
        found = txn.fetchall(f"SELECT metadata_json FROM runs WHERE run_id = ?{self.ROW_LOCK}", (run_id,))
        if not found:
            raise NotFoundError(ErrorCode.validation_error, f"unknown run {run_id!r}")
        meta = json.loads(found[0][0] or "{}")
        meta[key] = value
        fields = {"metadata_json": meta}
        statement, params = update_statement(
            "runs", "run_id", run_id, fields, S.UPDATABLE_RUN_COLUMNS, self._redactor
        )
        txn.execute(statement, params)

    async def delete_artifact_row(self, artifact_id: str) -> bool:
        def op(txn: Txn) -> bool:
            return txn.execute("DELETE FROM artifacts WHERE artifact_id = ?", (artifact_id,)) > 0

        return await self._queue().submit(op)

    async def delete_session_rows(self, session_id: str) -> DeleteCounts:
        """Drops ``nodes_<sid>``/``events_<sid>`` and deletes the session's rows in every global table."""
        from agent_core.types._results import DeleteCounts  # imported on first use (cold start)

        sql = self._caches.session_sql(session_id)

        def op(txn: Txn) -> tuple[DeleteCounts, list[str]]:
            self._ensure_session(txn, session_id)
            run_ids = [
                r[0] for r in txn.fetchall("SELECT run_id FROM runs WHERE session_id = ?", (session_id,))
            ]
            counts = DeleteCounts(
                nodes=int(txn.scalar(sql.count_nodes)),
                events=int(txn.scalar(sql.count_events)),
                runs=txn.execute("DELETE FROM runs WHERE session_id = ?", (session_id,)),
                agents=txn.execute("DELETE FROM agents WHERE session_id = ?", (session_id,)),
                artifacts=txn.execute("DELETE FROM artifacts WHERE session_id = ?", (session_id,)),
            )
            txn.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            for table in ("tool_turns", "tool_call_claims", "stopped_attempts", "inbox_entries", "teammates"):
                txn.execute(f"DELETE FROM {table} WHERE session_id = ?", (session_id,))
            self._forget_session_extras(txn, session_id)
            txn.execute("DELETE FROM team_requests WHERE lead_session_id = ?", (session_id,))
            for statement in sql.drop:
                txn.execute(statement)

            def committed() -> None:
                self._caches.forget_session(session_id, run_ids)

            txn.after_commit(committed)
            return counts, run_ids

        counts, _ = await self._queue().submit(op, offload=True)  # dropping big tables may take a while
        return counts

    def _ensure_session(self, txn: Txn, session_id: str, *, ending_run: bool = False) -> None:
        """The session exists (``validation_error``); ``ending_run``: the write only ends a run (its
        terminal events and status), which a shared store writes even after losing the session's lease."""
        if session_id in self._caches.known_sessions and not txn.stale:
            return
        if not txn.scalar("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)):
            raise SessionNotFoundError(
                ErrorCode.validation_error,
                f"unknown session {session_id!r}",
                details={"session_id": session_id},
            )
        sid = session_id
        txn.after_commit(lambda: self._caches.known_sessions.add(sid))

    # ---- the hot path ---------------------------------------------------------------------------

    async def append(
        self,
        session_id: str,
        *,
        nodes: Sequence[NodeDraft] = (),
        events: Sequence[EventDraft] = (),
        active_node_id: str | Unset | None = UNSET,
        run_update: tuple[str, dict[str, Any]] | None = None,
        agent_update: tuple[str, dict[str, Any]] | None = None,
        tip: Tip | None = None,
        session_metadata: dict[str, Any] | None = None,
        inbox_ack: InboxAck | None = None,
    ) -> AppendResult:
        """Writes nodes + events (+ active node, run/agent update) in ONE transaction.

        Allocates ``node_seq`` / ``seq`` / ``run_seq``; a draft with ``parent_id=FROM_TIP`` is chained
        onto ``tip`` (then onto the previous node of this call); after commit ``tip`` points at the
        last node written. On failure nothing is stored and no counter moves. ``session_metadata``
        merges top-level keys into ``sessions.metadata_json`` (a ``None`` value removes the key) in the
        same transaction (read-modify-write inside the writer, so concurrent merges never lose keys).
        ``inbox_ack`` acknowledges inbox entries carried by one of ``nodes`` in the same transaction
        (:func:`agent_core._storage.inbox.ack_entries`: an entry no longer pending fails the whole write).
        """
        return await self._queue().submit(
            self._append_op(
                session_id,
                nodes=nodes,
                events=events,
                active_node_id=active_node_id,
                run_update=run_update,
                agent_update=agent_update,
                tip=tip,
                session_metadata=session_metadata,
                inbox_ack=inbox_ack,
            )
        )

    def append_nowait(
        self,
        session_id: str,
        *,
        events: Sequence[EventDraft],
        run_update: tuple[str, dict[str, Any]] | None = None,
    ) -> asyncio.Future[AppendResult]:
        """:meth:`append` of events (+ a run update) enqueued now, without waiting for the commit.

        The transaction takes its place in the writer's FIFO before this returns (so every write
        submitted afterwards commits after it, with later seqs); the returned future resolves with the
        committed result or fails with the write's error. Invalid arguments raise here."""
        return self._queue().enqueue(self._append_op(session_id, events=events, run_update=run_update))

    def _append_op(
        self,
        session_id: str,
        *,
        nodes: Sequence[NodeDraft] = (),
        events: Sequence[EventDraft] = (),
        active_node_id: str | Unset | None = UNSET,
        run_update: tuple[str, dict[str, Any]] | None = None,
        agent_update: tuple[str, dict[str, Any]] | None = None,
        tip: Tip | None = None,
        session_metadata: dict[str, Any] | None = None,
        inbox_ack: InboxAck | None = None,
    ) -> Callable[[Txn], AppendResult]:
        """The prepared write operation of :meth:`append` (drafts redacted and encoded here)."""
        if inbox_ack is not None and inbox_ack.node_id not in {d.node_id for d in nodes}:
            raise invalid("inbox_ack must name a node written by the same append")
        sql = self._caches.session_sql(session_id)
        secrets = self._redactor.secrets()
        prepared_nodes = [prepare_node(d, secrets) for d in nodes]
        node_seqs = self._caches.session_node_index(session_id)
        load_index = (
            self._caches.KEEP_NODE_INDEX
            and node_seqs is None
            and any(d.event_type == "context_built" and wants_node_index(d.payload) for d in events)
        )
        new_nodes = {d.node_id: -(k + 1) for k, d in enumerate(nodes)} if node_seqs is not None else None
        prepared_events = [prepare_event(d, secrets, node_seqs, new_nodes) for d in events]
        if tip is None and any(p.draft.parent_id is TipMarker.FROM_TIP for p in prepared_nodes):
            raise invalid("parent_id=FROM_TIP needs a tip")
        meta_updates = (
            jsonable(session_metadata, "sessions.metadata_json", secrets) if session_metadata else None
        )
        updates: list[tuple[str, list[Any], str]] = []
        if run_update is not None:
            stmt, params = update_statement(
                "runs", "run_id", *run_update, S.UPDATABLE_RUN_COLUMNS, self._redactor
            )
            updates.append((stmt, params, f"run {run_update[0]!r}"))
        if agent_update is not None:
            stmt, params = update_statement(
                "agents", "agent_id", *agent_update, S.UPDATABLE_AGENT_COLUMNS, self._redactor
            )
            updates.append((stmt, params, f"agent {agent_update[0]!r}"))
        now = format_ts()
        ending_run = not nodes and run_update is not None and _ends_run(run_update[1])

        def op(txn: Txn) -> AppendResult:
            self._ensure_session(txn, session_id, ending_run=ending_run)
            index = self._caches.node_index.get(session_id) if txn.stale else None
            if index is not None and int(txn.scalar(sql.max_node_seq) or 0) != index.upto:
                txn.after_commit(
                    lambda: self._caches.drop_node_index(session_id)
                )  # misses nodes of elsewhere
            result = AppendResult()
            node_seq = seq = 0
            if prepared_nodes:
                node_seq = self._caches.counter(txn, self._caches.node_seq, session_id, sql.max_node_seq)
                chain = tip.node_id if tip is not None else None
                rows = []
                for p in prepared_nodes:
                    node_seq += 1
                    parent = p.draft.parent_id
                    if isinstance(parent, TipMarker):
                        parent = chain
                    rows.append(p.row(node_seq, parent))
                    result.nodes.append(p.node(session_id, node_seq, parent))
                    chain = p.draft.node_id
                txn.executemany(sql.insert_node, rows)
            first_new_seq = node_seq - len(prepared_nodes) + 1  # resolves compact context reports
            run_seqs: dict[str, int] = {}
            if prepared_events:
                seq = self._caches.counter(txn, self._caches.seq, session_id, sql.max_seq)
                rows = []
                for p_e in prepared_events:
                    seq += 1
                    run_id = p_e.draft.run_id
                    run_seq: int | None = None
                    if run_id is not None:
                        if run_id not in run_seqs:
                            run_seqs[run_id] = self._caches.counter(
                                txn, self._caches.run_seq, run_id, sql.max_run_seq, run_id
                            )
                        run_seq = run_seqs[run_id] = run_seqs[run_id] + 1
                    rows.append(p_e.row(seq, run_seq, first_new_seq))
                    result.events.append(p_e.event(session_id, seq, run_seq))
                txn.executemany(sql.insert_event, rows)
            if not isinstance(active_node_id, Unset):
                txn.execute(
                    "UPDATE sessions SET active_node_id = ?, updated_at = ? WHERE session_id = ?",
                    (active_node_id, now, session_id),
                )
            for stmt, params, what in updates:
                if txn.execute(stmt, params) == 0:
                    raise invalid(f"unknown {what}")
            if meta_updates:
                merge_session_metadata(txn, session_id, meta_updates, now)
            if inbox_ack is not None:
                ack_entries(txn, session_id, inbox_ack)
            loaded = txn.fetchall(f"SELECT node_id, node_seq FROM {sql.nodes}") if load_index else None

            def committed() -> None:
                if loaded is not None:
                    self._caches.keep_node_index(session_id, dict(loaded))
                if prepared_nodes:
                    self._caches.node_seq[session_id] = node_seq
                    index = self._caches.node_index.get(session_id)
                    for node in result.nodes:
                        self._caches.remember_node(node.node_id, session_id)
                        if index is not None:
                            index[node.node_id] = node.node_seq
                    if index is not None:
                        index.upto = node_seq
                    if tip is not None:
                        tip.node_id = result.nodes[-1].node_id
                if prepared_events:
                    self._caches.seq[session_id] = seq
                self._caches.run_seq.update(run_seqs)

            txn.after_commit(committed)
            return result

        return op

    # ---- reads ----------------------------------------------------------------------------------

    @abstractmethod
    async def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read on the backend's read path (``StorageError`` when it fails)."""

    async def _records(self, cls: type[R], sql: str, params: Sequence[Any] = ()) -> list[R]:
        columns = tuple(cls.model_fields)
        return [record_from_row(cls, columns, row) for row in await self._read(sql, params)]

    async def _require_session(self, session_id: str) -> S.SessionSql:
        sql = self._caches.session_sql(session_id)
        if session_id not in self._caches.known_sessions:
            if not await self._read("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)):
                raise SessionNotFoundError(
                    ErrorCode.validation_error,
                    f"unknown session {session_id!r}",
                    details={"session_id": session_id},
                )
            self._caches.known_sessions.add(session_id)
        return sql

    async def get_session(self, session_id: str) -> SessionRecord | None:
        rows = await self._records(SessionRecord, f"{S.SELECT_SESSION} WHERE session_id = ?", (session_id,))
        return rows[0] if rows else None

    async def list_sessions(self) -> list[SessionRecord]:
        """Most recently updated first."""
        return await self._records(SessionRecord, f"{S.SELECT_SESSION} ORDER BY updated_at DESC, rowid DESC")

    async def get_agent(self, agent_id: str) -> AgentRecord | None:
        rows = await self._records(AgentRecord, f"{S.SELECT_AGENT} WHERE agent_id = ?", (agent_id,))
        return rows[0] if rows else None

    async def list_agents(self, session_id: str) -> list[AgentRecord]:
        """In creation order."""
        return await self._records(
            AgentRecord, f"{S.SELECT_AGENT} WHERE session_id = ? ORDER BY rowid", (session_id,)
        )

    async def get_run(self, run_id: str) -> RunRecord | None:
        rows = await self._records(RunRecord, f"{S.SELECT_RUN} WHERE run_id = ?", (run_id,))
        return rows[0] if rows else None

    async def list_runs(self, session_id: str) -> list[RunRecord]:
        """In creation order."""
        return runs_from_rows(
            await self._read(f"{S.SELECT_RUN} WHERE session_id = ? ORDER BY rowid", (session_id,))
        )

    async def list_non_terminal_runs(self, session_id: str) -> list[RunRecord]:
        """Runs still ``queued`` / ``pending`` / ``running`` (in creation order)."""
        marks = ", ".join("?" for _ in NON_TERMINAL_RUN_STATUSES)
        return await self._records(
            RunRecord,
            f"{S.SELECT_RUN} WHERE session_id = ? AND status IN ({marks}) ORDER BY rowid",
            (session_id, *(s.value for s in NON_TERMINAL_RUN_STATUSES)),
        )

    async def _nodes(
        self, session_id: str, sql: str, params: Sequence[Any], redact_keys: bool = False
    ) -> list[Node]:
        return nodes_from_rows(await self._read(sql, params), session_id, redact_keys=redact_keys)

    async def get_node(self, session_id: str, node_id: str) -> Node | None:
        sql = await self._require_session(session_id)
        nodes = await self._nodes(session_id, f"{sql.select_nodes} WHERE node_id = ?", (node_id,))
        return nodes[0] if nodes else None

    async def list_nodes(
        self,
        session_id: str,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        redact_keys: bool = False,
    ) -> list[Node]:
        """Nodes ordered by ``node_seq``, optionally filtered by run and/or agent; ``redact_keys`` masks
        values under sensitive-looking keys (read-time redaction, ``redact_sensitive_keys``)."""
        sql = await self._require_session(session_id)
        where, params = where_equal(run_id=run_id, agent_id=agent_id)
        rows = in_seq_order(await self._read(f"{sql.select_nodes}{where}", params))
        return nodes_from_rows(rows, session_id, redact_keys=redact_keys)

    async def node_path(self, session_id: str, node_id: str) -> list[Node]:
        """Nodes from the root to ``node_id`` along ``parent_id``; unknown node → ``validation_error``."""
        sql = await self._require_session(session_id)
        path = await self._nodes(session_id, sql.node_path, (node_id,))
        if not path:
            raise NotFoundError(
                ErrorCode.validation_error, f"unknown node {node_id!r} in session {session_id!r}"
            )
        return path

    async def find_node_session(self, node_id: str) -> str | None:
        """The session holding ``node_id``: cache first, then sessions most-recently-updated first."""
        cached = self._caches.node_sessions.get(node_id)
        if cached is not None:
            return cached
        for (session_id,) in await self._read(
            "SELECT session_id FROM sessions ORDER BY updated_at DESC, rowid DESC"
        ):
            try:
                sql = self._caches.session_sql(session_id)
            except AgentCoreError:
                continue
            if await self._read(sql.node_exists, (node_id,)):
                self._caches.remember_node(node_id, session_id)
                return str(session_id)
        return None

    async def list_events(
        self,
        session_id: str,
        *,
        from_seq: int | None = None,
        to_seq: int | None = None,
        run_id: str | None = None,
        redact_keys: bool = False,
        agent_ids: Sequence[str | None] | None = None,
        session_nodes: Sequence[Node] | None = None,
    ) -> list[RuntimeEvent]:
        """Persisted events ordered by ``seq``; ``from_seq``/``to_seq`` are inclusive bounds; ``agent_ids``
        keeps the events of those agents only (``None`` in it: the events without an agent). Compact
        context reports come back with their full node-id lists; ``redact_keys`` as in :meth:`list_nodes`.
        ``session_nodes``: nodes of this session the caller read already (``list_nodes`` order); when
        they are all of its nodes, the reports are expanded from them instead of reading the node ids.
        """
        sql = await self._require_session(session_id)
        where, params = where_equal(run_id=run_id)
        clauses = [where] if where else []
        if agent_ids is not None:
            named = [a for a in agent_ids if a is not None]
            tests = [f"agent_id IN ({', '.join('?' for _ in named)})"] if named else []
            if None in agent_ids:
                tests.append("agent_id IS NULL")
            clauses.append(f"{' AND' if clauses else ' WHERE'} ({' OR '.join(tests) or 'FALSE'})")
            params.extend(named)
        if from_seq is not None:
            clauses.append(f"{' AND' if clauses else ' WHERE'} seq >= ?")
            params.append(from_seq)
        if to_seq is not None:
            clauses.append(f"{' AND' if clauses else ' WHERE'} seq <= ?")
            params.append(to_seq)
        rows = in_seq_order(await self._read(f"{sql.select_events}{''.join(clauses)}", params))
        seqs = None
        if any(r[6] == "context_built" and r[9] is not None and MARKER in r[9] for r in rows):
            seqs = await self._whole_ids_by_seq(sql, session_nodes) if session_nodes else None
            if seqs is None:
                seqs = ids_by_seq(await self._read(f"SELECT node_seq, node_id FROM {sql.nodes}"))
        return events_from_rows(rows, session_id, ids_by_seq=seqs, redact_keys=redact_keys)

    async def _whole_ids_by_seq(self, sql: S.SessionSql, nodes: Sequence[Node]) -> list[str | None] | None:
        """``ids_by_seq`` of the session from ``nodes`` when they are all of its nodes: their seqs are
        1..N and the table holds N nodes between seq 1 and N (seqs are unique), else ``None``."""
        count = len(nodes)
        if [n.node_seq for n in nodes] != list(range(1, count + 1)):
            return None
        found = await self._read(
            f"SELECT (SELECT COUNT(*) FROM {sql.nodes}), (SELECT MIN(node_seq) FROM {sql.nodes}),"
            f" (SELECT MAX(node_seq) FROM {sql.nodes})"
        )
        if tuple(found[0]) != (count, 1, count):
            return None
        return [None, *(n.node_id for n in nodes)]

    async def get_artifact(self, artifact_id: str) -> ArtifactRecord | None:
        rows = await self._records(
            ArtifactRecord, f"{S.SELECT_ARTIFACT} WHERE artifact_id = ?", (artifact_id,)
        )
        return rows[0] if rows else None

    async def list_artifacts(
        self, *, session_id: str | None = None, run_id: str | None = None
    ) -> list[ArtifactRecord]:
        """Oldest first (``created_at``, then insertion order)."""
        where, params = where_equal(session_id=session_id, run_id=run_id)
        return await self._records(
            ArtifactRecord, f"{S.SELECT_ARTIFACT}{where} ORDER BY created_at, rowid", params
        )
