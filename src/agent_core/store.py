"""Direct access to a runtime's session store, for surfaces that need more than replay.

``AgentRuntime.store`` (once the runtime is open) is the runtime's :class:`SessionStore`: the SQLite or
PostgreSQL backend behind every run, with typed reads of sessions, runs, nodes and events
(``get_session``, ``get_run``, ``list_runs``, ``get_node``, ``list_events(session_id, from_seq=...)`` ...;
records in :mod:`agent_core.types.storage`). ``soong-agent serve`` follows live runs through it. Change
state through the runtime's methods, not by writing here.

:class:`ApprovalStore` keeps the durable permission requests of ``soong-agent serve`` in the same store
(``pending`` until answered once, ``expired`` when the run stopped waiting or the server restarted), and
:class:`QuestionStore` the ``internal.ask_user`` questions the same way (both :class:`PendingStore`; a row
is a :class:`PendingRow`, ``store.view(row)`` its API form).
"""

from agent_core._storage.approvals import (
    ApprovalRow,
    ApprovalStatus,
    ApprovalStore,
    PendingRow,
    PendingStore,
    QuestionAnswer,
    QuestionRow,
    QuestionStore,
)
from agent_core._storage.protocol import SessionStore

__all__ = [
    "ApprovalRow",
    "ApprovalStatus",
    "ApprovalStore",
    "PendingRow",
    "PendingStore",
    "QuestionAnswer",
    "QuestionRow",
    "QuestionStore",
    "SessionStore",
]
