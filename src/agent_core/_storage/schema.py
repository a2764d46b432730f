"""SQL text: global-table DDL (migration 1), versioned per-session DDL and per-session statements.

Session ids are validated (``^[A-Za-z0-9_]+$``) before any per-session SQL is built, and the table
names are always double-quoted identifiers (docs/storage.md#tables). :class:`SessionSql` bundles every
statement of one session so the strings are built once and reused (sqlite3 caches the prepared statements).
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core._ids import validate_session_id
from agent_core.types.storage import (
    AgentRecord,
    ArtifactRecord,
    EventRecord,
    NodeRecord,
    RunRecord,
    SessionRecord,
)

SCHEMA_MIGRATIONS_DDL = """CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  applied_at TEXT NOT NULL
)"""

GLOBAL_TABLES_V1: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS sessions (
  session_id        TEXT PRIMARY KEY,
  cwd               TEXT NOT NULL,
  root_agent_id     TEXT NOT NULL,
  active_node_id    TEXT,
  parent_session_id TEXT,
  status            TEXT NOT NULL,
  metadata_json     TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS agents (
  agent_id          TEXT PRIMARY KEY,
  session_id        TEXT NOT NULL,
  parent_agent_id   TEXT,
  agent_type        TEXT NOT NULL,
  created_by_run_id TEXT,
  fork_from_node_id TEXT,
  status            TEXT NOT NULL,
  result_json       TEXT,
  metadata_json     TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS runs (
  run_id        TEXT PRIMARY KEY,
  session_id    TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  status        TEXT NOT NULL,
  start_node_id TEXT,
  end_node_id   TEXT,
  end_reason    TEXT,
  turn_count    INTEGER,
  usage_json    TEXT,
  error_json    TEXT,
  metadata_json TEXT,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL
)""",
    """CREATE TABLE IF NOT EXISTS artifacts (
  artifact_id   TEXT PRIMARY KEY,
  session_id    TEXT NOT NULL,
  agent_id      TEXT,
  run_id        TEXT,
  node_id       TEXT,
  tool_call_id  TEXT,
  path          TEXT NOT NULL,
  filename      TEXT,
  mime_type     TEXT,
  size_bytes    INTEGER,
  summary       TEXT,
  metadata_json TEXT,
  created_at    TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_agents_session ON agents(session_id)",
    "CREATE INDEX IF NOT EXISTS idx_runs_session ON runs(session_id)",
    "CREATE INDEX IF NOT EXISTS idx_runs_agent ON runs(agent_id)",
    "CREATE INDEX IF NOT EXISTS idx_artifacts_session ON artifacts(session_id)",
    "CREATE INDEX IF NOT EXISTS idx_artifacts_run ON artifacts(run_id)",
)
"""Migration 1: the four global tables and their indexes (docs/storage.md#global-tables)."""

GLOBAL_TABLES: tuple[str, ...] = ("sessions", "agents", "runs", "artifacts")

BACKGROUND_JOBS_V3: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS background_jobs (
  job_id       TEXT PRIMARY KEY,
  session_id   TEXT NOT NULL,
  agent_id     TEXT NOT NULL,
  run_id       TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  tool_name    TEXT NOT NULL,
  status       TEXT NOT NULL,
  artifact_id  TEXT,
  summary      TEXT,
  error_json   TEXT,
  delivered    INTEGER NOT NULL DEFAULT 0,
  created_at   TEXT NOT NULL,
  updated_at   TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_background_jobs_session ON background_jobs(session_id)",
)
"""Migration 3: background jobs of offloaded tool calls (docs/jobs-and-schedules.md#background-jobs)."""

SCHEDULES_V4: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS schedules (
  schedule_id     TEXT PRIMARY KEY,
  cron            TEXT NOT NULL,
  message         TEXT NOT NULL,
  project         TEXT NOT NULL,
  session_id      TEXT,
  next_due_at     TEXT NOT NULL,
  last_fired_at   TEXT,
  last_session_id TEXT,
  last_run_id     TEXT,
  last_error      TEXT,
  created_at      TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_schedules_project ON schedules(project)",
)
"""Migration 4: cron schedules that produce user messages (docs/jobs-and-schedules.md#schedules)."""

TOOL_CLAIMS_V5: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS tool_turns (
  run_id     TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  plan_id    TEXT NOT NULL,
  updated_at TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_tool_turns_session ON tool_turns(session_id)",
    """CREATE TABLE IF NOT EXISTS tool_call_claims (
  claim_key    TEXT PRIMARY KEY,
  run_id       TEXT NOT NULL,
  session_id   TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  owner        TEXT NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('running', 'done', 'released')),
  attempts     INTEGER NOT NULL,
  claimed_at   TEXT NOT NULL,
  updated_at   TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_tool_call_claims_run ON tool_call_claims(run_id, status)",
    "CREATE INDEX IF NOT EXISTS idx_tool_call_claims_session ON tool_call_claims(session_id)",
    """CREATE TABLE IF NOT EXISTS stopped_attempts (
  attempt_key TEXT PRIMARY KEY,
  run_id      TEXT NOT NULL,
  session_id  TEXT NOT NULL,
  stopped_at  TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_stopped_attempts_session ON stopped_attempts(session_id)",
)
"""Migration 5: the temporal engine's claims (docs/scale-out.md#3-what-a-workflow-does crash semantics): each
run's current tool plan (``tool_turns``: a call of an older plan claims nothing), one claim per tool call by
the process that executes it (``tool_call_claims``) and the step attempts that stopped after being superseded
(``stopped_attempts``)."""

TEAMS_V6: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS inbox_entries (
  entry_id      TEXT PRIMARY KEY,
  session_id    TEXT NOT NULL,
  agent_id      TEXT NOT NULL,
  kind          TEXT NOT NULL,
  sender        TEXT NOT NULL,
  content       TEXT NOT NULL,
  request_id    TEXT,
  metadata_json TEXT,
  status        TEXT NOT NULL CHECK (status IN ('pending', 'acked')),
  node_id       TEXT,
  created_at    TEXT NOT NULL,
  acked_at      TEXT
)""",
    "CREATE INDEX IF NOT EXISTS idx_inbox_entries_agent ON inbox_entries(session_id, agent_id, status)",
    """CREATE TABLE IF NOT EXISTS teammates (
  session_id      TEXT PRIMARY KEY,
  agent_id        TEXT NOT NULL,
  lead_session_id TEXT NOT NULL,
  lead_agent_id   TEXT NOT NULL,
  name            TEXT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('active', 'stopped')),
  settings_json   TEXT NOT NULL,
  created_at      TEXT NOT NULL,
  updated_at      TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS idx_teammates_lead ON teammates(lead_session_id)",
    """CREATE TABLE IF NOT EXISTS team_requests (
  request_id      TEXT PRIMARY KEY,
  kind            TEXT NOT NULL,
  lead_session_id TEXT NOT NULL,
  from_session_id TEXT NOT NULL,
  from_agent_id   TEXT NOT NULL,
  from_name       TEXT NOT NULL,
  to_session_id   TEXT NOT NULL,
  to_agent_id     TEXT NOT NULL,
  to_name         TEXT NOT NULL,
  content         TEXT NOT NULL,
  status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
  reason          TEXT,
  created_at      TEXT NOT NULL,
  answered_at     TEXT
)""",
    "CREATE INDEX IF NOT EXISTS idx_team_requests_lead ON team_requests(lead_session_id)",
)
"""Migration 6: the durable per-agent inbox (``inbox_entries``: ``pending`` until the node that carries
an entry to the model commits, then ``acked`` with that node's id), the teammates of a lead session
(``teammates``: one row per teammate session) and their protocol requests (``team_requests``: a
``plan_approval`` or ``shutdown`` request, answered once)."""

APPROVALS_V2: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS pending_approvals (
  request_id   TEXT PRIMARY KEY,
  run_id       TEXT NOT NULL,
  session_id   TEXT NOT NULL,
  request_json TEXT NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'expired')),
  answer_json  TEXT,
  created_at   TEXT NOT NULL,
  answered_at  TEXT,
  updated_at   TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS pending_approvals_status ON pending_approvals(status, created_at)",
    "CREATE INDEX IF NOT EXISTS pending_approvals_session ON pending_approvals(session_id)",
)
"""DDL of schema version 2 (``storage.migrations``): durable pending approvals (``storage.approvals``)."""

QUESTIONS_V7: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS pending_questions (
  request_id   TEXT PRIMARY KEY,
  run_id       TEXT NOT NULL,
  session_id   TEXT NOT NULL,
  request_json TEXT NOT NULL,
  status       TEXT NOT NULL CHECK (status IN ('pending', 'answered', 'expired')),
  answer_json  TEXT,
  created_at   TEXT NOT NULL,
  answered_at  TEXT,
  updated_at   TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS pending_questions_status ON pending_questions(status, created_at)",
    "CREATE INDEX IF NOT EXISTS pending_questions_session ON pending_questions(session_id)",
)
"""DDL of schema version 7: durable questions of ``internal.ask_user`` shown by ``soong-agent serve``
(``storage.approvals.QuestionStore``; same shape as ``pending_approvals``)."""

SESSION_DDL_VERSION = 1
"""Version of the per-session DDL below; a migration changing it must iterate over ``sessions``."""


def _insert(table: str, columns: tuple[str, ...], verb: str = "INSERT") -> str:
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' for _ in columns)})"


INSERT_SESSION = _insert("sessions", SessionRecord.columns())
INSERT_AGENT = _insert("agents", AgentRecord.columns())
INSERT_RUN = _insert("runs", RunRecord.columns())
INSERT_ARTIFACT = _insert("artifacts", ArtifactRecord.columns())

SELECT_SESSION = f"SELECT {', '.join(SessionRecord.columns())} FROM sessions"
SELECT_AGENT = f"SELECT {', '.join(AgentRecord.columns())} FROM agents"
SELECT_RUN = f"SELECT {', '.join(RunRecord.columns())} FROM runs"
SELECT_ARTIFACT = f"SELECT {', '.join(ArtifactRecord.columns())} FROM artifacts"

UPDATABLE_AGENT_COLUMNS = frozenset(AgentRecord.columns()) - {"agent_id", "session_id", "created_at"}
UPDATABLE_RUN_COLUMNS = frozenset(RunRecord.columns()) - {"run_id", "session_id", "agent_id", "created_at"}


def nodes_table(session_id: str) -> str:
    """Double-quoted ``nodes_<session_id>`` identifier (validates the id first)."""
    return f'"nodes_{validate_session_id(session_id)}"'


def events_table(session_id: str) -> str:
    """Double-quoted ``events_<session_id>`` identifier (validates the id first)."""
    return f'"events_{validate_session_id(session_id)}"'


@dataclass(frozen=True, slots=True)
class SessionSql:
    """Every per-session statement for one (validated) session id."""

    session_id: str
    nodes: str
    events: str
    create: tuple[str, ...]
    drop: tuple[str, ...]
    insert_node: str
    insert_event: str
    max_node_seq: str
    max_seq: str
    max_run_seq: str
    select_nodes: str
    select_events: str
    count_nodes: str
    count_events: str
    node_exists: str
    node_path: str

    @classmethod
    def build(cls, session_id: str, table_key: str | None = None) -> SessionSql:
        """``table_key`` (default: the session id) names the tables and indexes (``nodes_<key>`` …)."""
        validate_session_id(session_id)
        sid = validate_session_id(table_key) if table_key is not None else session_id
        nodes, events = nodes_table(sid), events_table(sid)
        node_cols = ", ".join(NodeRecord.columns())
        event_cols = ", ".join(EventRecord.columns())
        aliased = ", ".join(f"n.{c}" for c in NodeRecord.columns())
        create = (
            f"""CREATE TABLE {nodes} (
  node_id       TEXT PRIMARY KEY,
  node_seq      INTEGER NOT NULL,
  parent_id     TEXT NULL,
  agent_id      TEXT NOT NULL,
  run_id        TEXT NULL,
  role          TEXT NOT NULL,
  node_type     TEXT NOT NULL,
  content_json  TEXT NOT NULL,
  metadata_json TEXT,
  token_count   INTEGER,
  created_at    TEXT NOT NULL
)""",
            f"""CREATE TABLE {events} (
  event_id     TEXT PRIMARY KEY,
  seq          INTEGER NOT NULL,
  run_seq      INTEGER,
  agent_id     TEXT,
  run_id       TEXT,
  level        TEXT NOT NULL,
  event_type   TEXT NOT NULL,
  node_id      TEXT,
  tool_call_id TEXT,
  payload_json TEXT,
  created_at   TEXT NOT NULL
)""",
            f'CREATE UNIQUE INDEX "ux_nodes_{sid}_seq" ON {nodes}(node_seq)',
            f'CREATE INDEX "ix_nodes_{sid}_parent" ON {nodes}(parent_id)',
            f'CREATE INDEX "ix_nodes_{sid}_agent" ON {nodes}(agent_id)',
            f'CREATE UNIQUE INDEX "ux_events_{sid}_seq" ON {events}(seq)',
            f'CREATE INDEX "ix_events_{sid}_run" ON {events}(run_id, run_seq)',
        )
        return cls(
            session_id=session_id,
            nodes=nodes,
            events=events,
            create=create,
            drop=(f"DROP TABLE IF EXISTS {nodes}", f"DROP TABLE IF EXISTS {events}"),
            insert_node=_insert(nodes, NodeRecord.columns()),
            insert_event=_insert(events, EventRecord.columns()),
            max_node_seq=f"SELECT COALESCE(MAX(node_seq), 0) FROM {nodes}",
            max_seq=f"SELECT COALESCE(MAX(seq), 0) FROM {events}",
            max_run_seq=f"SELECT COALESCE(MAX(run_seq), 0) FROM {events} WHERE run_id = ?",
            select_nodes=f"SELECT {node_cols} FROM {nodes}",
            select_events=f"SELECT {event_cols} FROM {events}",
            count_nodes=f"SELECT COUNT(*) FROM {nodes}",
            count_events=f"SELECT COUNT(*) FROM {events}",
            node_exists=f"SELECT 1 FROM {nodes} WHERE node_id = ?",
            node_path=(
                f"WITH RECURSIVE path(node_id, parent_id, depth) AS ("
                f" SELECT node_id, parent_id, 0 FROM {nodes} WHERE node_id = ?"
                f" UNION ALL"
                f" SELECT n.node_id, n.parent_id, p.depth + 1 FROM {nodes} n"
                f" JOIN path p ON n.node_id = p.parent_id WHERE p.depth < 1000000)"
                f" SELECT {aliased} FROM path p JOIN {nodes} n ON n.node_id = p.node_id"
                f" ORDER BY p.depth DESC"
            ),
        )
