"""The storage protocol (docs/storage.md#backends): what every session-store backend provides.

Backends: ``sqlite`` (:class:`agent_core._storage.sqlite.StorageManager`, the embedded default) and
``postgres`` (:class:`agent_core._storage.postgres.store.PostgresStorage`, the ``postgres`` extra), chosen by
``[storage] backend`` (:func:`agent_core._storage.backend.session_store`). They are siblings sharing the
portable SQL of :class:`agent_core._storage.sql_store.SqlSessionStore`. One conformance suite
(``tests/conformance``) runs unchanged against both.

Contracts every backend keeps:

- Each write method is one transaction: all of it is stored or nothing is (``StorageError`` /
  ``AgentCoreError(validation_error)`` for invalid arguments), and it is visible to reads once it returns.
- ``node_seq`` and ``seq`` are per-session, ``run_seq`` per-run counters starting at 1 and contiguous,
  also when several processes write one database (both backends).
- One root run runs per session across every process that opens the database (:meth:`session_lease`);
  crash recovery closes only runs whose owner is gone (:meth:`runs_live_elsewhere`).
- Node content, event payloads, ``*_json`` columns and summaries are redacted before they are stored;
  ``redact_keys`` on reads masks values under sensitive-looking keys (read-time redaction).
- :meth:`write` runs a synchronous operation on a :class:`~agent_core._storage.writer.Txn` whose SQL uses
  ``?`` placeholders and portable SQL (every global table has an insertion-ordered ``rowid``); feature
  stores (approvals, background jobs, schedules) are written this way and run on every backend.
- The inbox (:mod:`agent_core._storage.inbox`): a delivery is one transaction bounded by the recipient's
  unread count; an entry is acknowledged in the transaction of the node that carries it
  (``append(..., inbox_ack=...)``), exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from agent_core._redaction import Redactor
from agent_core._storage.drafts import AppendResult, EventDraft, NodeDraft, Tip, Unset
from agent_core._storage.inbox import InboxAck, StoredEntry
from agent_core._storage.writer import Txn
from agent_core.types.inbox import InboxEntry
from agent_core.types.runtime import Node, RuntimeEvent
from agent_core.types.storage import AgentRecord, ArtifactRecord, RunRecord, SessionRecord

if TYPE_CHECKING:
    from agent_core._tasks.wal import WalWriter
    from agent_core.types._results import DeleteCounts

T = TypeVar("T")


class SessionLease(Protocol):
    """A session's lease, held by a root run while it runs (``async with``)."""

    queue_position: int
    """After :meth:`try_enter` returned ``False``: how many runs are ahead of this one."""

    def try_enter(self) -> bool | None:
        """Takes the lease now if that needs no waiting: ``True`` taken (``async with`` then only holds
        it), ``False`` another run holds it or waits for it, ``None`` cannot tell without waiting."""

    async def __aenter__(self) -> object:
        """Waits for the lease (in FIFO order) and takes it."""

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Gives the lease up."""


class SessionStore(Protocol):
    """Sessions, agents, runs, the node tree, events, artifact metadata and feature tables."""

    @property
    def backend(self) -> str:
        """``"sqlite"`` or ``"postgres"``."""

    @property
    def SHARED(self) -> bool:
        """True when other processes may write the same database (postgres)."""

    @property
    def is_open(self) -> bool: ...

    @property
    def ROW_LOCK(self) -> str:
        """Appended to a ``SELECT`` of a row its write transaction then changes (``" FOR UPDATE"`` on
        PostgreSQL; empty on SQLite, whose write transactions are serialised already)."""

    @property
    def redactor(self) -> Redactor: ...

    async def open(self) -> None:
        """Idempotent: connects and applies the missing migrations (``migration_failed`` on failure)."""

    async def close(self) -> None:
        """Finishes every queued write, then disconnects. Idempotent."""

    async def write(self, op: Callable[[Txn], T]) -> T:
        """Runs ``op`` as one queued write transaction and returns its result."""

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """Rows of one read (committed data only)."""

    def session_lease(self, session_id: str) -> SessionLease:
        """Held by a root run while it runs: one running root run per session across every process
        sharing the database, waiters in FIFO order (SQLite: a file lock beside the database)."""

    async def session_busy(self, session_id: str) -> str | None:
        """Who else holds (or waits for) ``session_id``'s lease, for a message; ``None`` when nobody."""

    async def writes_elsewhere(self) -> int:
        """A number that stays the same between two calls only if no other process (or store) wrote the
        database in between (then what this process read of it is still current)."""

    async def runs_live_elsewhere(self, run_ids: Sequence[str]) -> set[str]:
        """Which of ``run_ids`` another live process (or open store) runs: crash recovery must leave
        them alone."""

    @property
    def claim_owner(self) -> str:
        """This open store's process as the owner of the claims it takes (``tool_call_claims``)."""

    async def live_owners(self, owners: Sequence[str]) -> set[str]:
        """Which of the claim ``owners`` are alive: a frozen process is, a killed one is not (SQLite: the
        process exists; PostgreSQL: its store's owner lock is held)."""

    def task_wal_writer(self) -> WalWriter | None:
        """Where this backend keeps Task WALs (``None``: JSONL files under ``task.wal_dir``)."""

    async def create_session(self, session: SessionRecord, root_agent: AgentRecord) -> None: ...

    async def insert_agent(self, record: AgentRecord) -> None: ...

    async def insert_run(self, record: RunRecord) -> None: ...

    async def insert_artifact(self, record: ArtifactRecord) -> None: ...

    async def update_agent(self, agent_id: str, /, **fields: Any) -> None: ...

    async def update_run(self, run_id: str, /, **fields: Any) -> None: ...

    async def merge_run_metadata(self, run_id: str, key: str, value: Any) -> None:
        """Sets one key of a run's metadata object atomically (concurrent merges of other keys survive)."""

    async def delete_artifact_row(self, artifact_id: str) -> bool: ...

    async def delete_session_rows(self, session_id: str) -> DeleteCounts: ...

    async def append(
        self,
        session_id: str,
        *,
        nodes: Sequence[NodeDraft] = (),
        events: Sequence[EventDraft] = (),
        active_node_id: str | Unset | None = ...,
        run_update: tuple[str, dict[str, Any]] | None = None,
        agent_update: tuple[str, dict[str, Any]] | None = None,
        tip: Tip | None = None,
        session_metadata: dict[str, Any] | None = None,
        inbox_ack: InboxAck | None = None,
    ) -> AppendResult:
        """Nodes + events (+ active node, run/agent update, metadata merge, inbox acknowledgement) in one
        transaction."""

    async def deliver_inbox(
        self,
        session_id: str,
        agent_id: str,
        entries: Sequence[InboxEntry],
        *,
        max_entries: int,
        guard: Callable[[Txn], bool] | None = None,
    ) -> int | None:
        """Stores complete inbox entries for one agent (one transaction, bounded by ``max_entries`` unread
        ones: ``validation_error`` and nothing stored); the unread count after, ``None`` if ``guard``
        refused."""

    async def pending_inbox(
        self, session_id: str, agent_id: str, limit: int | None = None
    ) -> list[StoredEntry]:
        """Unread entries of one agent, oldest first."""

    async def inbox_depths(self, session_id: str) -> dict[str, int]:
        """Unread entry count per agent of the session."""

    async def list_inbox(self, session_id: str, agent_id: str | None = None) -> list[StoredEntry]:
        """Every entry (read or not) of the session or of one agent, oldest first."""

    async def get_session(self, session_id: str) -> SessionRecord | None: ...

    async def list_sessions(self) -> list[SessionRecord]: ...

    async def get_agent(self, agent_id: str) -> AgentRecord | None: ...

    async def list_agents(self, session_id: str) -> list[AgentRecord]: ...

    async def get_run(self, run_id: str) -> RunRecord | None: ...

    async def list_runs(self, session_id: str) -> list[RunRecord]: ...

    async def list_non_terminal_runs(self, session_id: str) -> list[RunRecord]: ...

    async def get_node(self, session_id: str, node_id: str) -> Node | None: ...

    async def list_nodes(
        self,
        session_id: str,
        *,
        run_id: str | None = None,
        agent_id: str | None = None,
        redact_keys: bool = False,
    ) -> list[Node]: ...

    async def node_path(self, session_id: str, node_id: str) -> list[Node]: ...

    async def find_node_session(self, node_id: str) -> str | None: ...

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
    ) -> list[RuntimeEvent]: ...

    async def get_artifact(self, artifact_id: str) -> ArtifactRecord | None: ...

    async def list_artifacts(
        self, *, session_id: str | None = None, run_id: str | None = None
    ) -> list[ArtifactRecord]: ...
