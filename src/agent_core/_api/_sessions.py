"""Listing and forking sessions (chat's ``/sessions`` and ``/fork``, serve's
``GET /api/sessions`` and fork; docs/runs.md#branches-and-forks).

Contracts:

- :func:`list_sessions`: the sessions whose project (``cwd``) is this runtime's project, most recently
  updated first; ``title`` is the first user message of the root agent, or for a session only its inbox
  woke (a teammate's, a schedule's) the first entry it read (whitespace folded, cut to
  :data:`TITLE_LIMIT` characters); ``status`` is the status of the root agent's latest run (``None`` for
  a session without runs).
- :func:`fork_session`: copies the root agent's path from the session root down to ``node_id`` into a
  new session of the same mode (``parent_session_id`` = the source), with fresh node ids; node-id values
  inside copied metadata are remapped to the copies, ``run_id`` is cleared (runs stay in the source) and
  each copy records ``forked_from`` ``{session_id, node_id}``. The new session's active leaf is the copy
  of ``node_id``. One storage transaction writes the nodes and the active node. The source is unchanged.
  ``node_id`` must be a node of the source's root agent and not a partial/failed assistant node
  (``validation_error``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent_core._api._args import check_type
from agent_core._context.conversation import is_skipped_assistant
from agent_core._ids import new_id, validate_session_id
from agent_core._runtime.runs import RunManager
from agent_core._storage.drafts import NodeDraft
from agent_core.errors import (
    ErrorCode,
    InvalidArgumentError,
    NotFoundError,
    SessionNotFoundError,
    StorageError,
)
from agent_core.types._results import SessionSummary
from agent_core.types.base import format_ts
from agent_core.types.content import text_of
from agent_core.types.runtime import Node
from agent_core.types.storage import AgentRecord, SessionRecord

TITLE_LIMIT = 80


_ENTRY_TEXT = re.compile(r"<entry [^>]*>\n(.*?)\n</entry>", re.S)


def _title(nodes: list[Node]) -> str:
    """The first user message; for a session woken by its inbox only (a teammate's, a schedule's), the
    first entry's text."""
    for node in nodes:
        if node.role == "user" and node.node_type == "message":
            text = " ".join(text_of(node.content).split())
            if text:
                return _cut(text)
    for node in nodes:
        if node.node_type == "system_note" and node.metadata.get("source") == "inbox":
            found = _ENTRY_TEXT.search(text_of(node.content))
            if found and found.group(1).strip():
                return _cut(" ".join(found.group(1).split()))
    return ""


def _cut(text: str) -> str:
    return text if len(text) <= TITLE_LIMIT else text[: TITLE_LIMIT - 3] + "..."


def _mode(record: SessionRecord) -> str:
    try:
        meta = json.loads(record.metadata_json or "{}")
    except ValueError:
        meta = {}
    mode = meta.get("mode") if isinstance(meta, dict) else None
    return mode if mode in ("normal", "orchestrator") else "normal"


async def list_sessions(manager: RunManager, limit: int | None) -> list[SessionSummary]:
    check_type("limit", limit, int, optional=True)
    if limit is not None and limit < 1:
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"limit must be a positive integer, got {limit!r}"
        )
    storage = manager.services.storage
    project = str(manager.services.config.project)
    out: list[SessionSummary] = []
    for record in await storage.list_sessions():
        if record.cwd != project:
            continue
        nodes = await storage.list_nodes(record.session_id, agent_id=record.root_agent_id)
        runs = [r for r in await storage.list_runs(record.session_id) if r.agent_id == record.root_agent_id]
        out.append(
            SessionSummary(
                session_id=record.session_id,
                title=_title(nodes),
                mode=_mode(record),
                status=runs[-1].status.value if runs else None,
                run_count=len(runs),
                active_node_id=record.active_node_id,
                parent_session_id=record.parent_session_id,
                created_at=record.created_at,
                updated_at=record.updated_at,
            )
        )
        if limit is not None and len(out) >= limit:
            break
    return out


def _remap(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_remap(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _remap(v, ids) for k, v in value.items()}
    return value


async def fork_session(manager: RunManager, session_id: str, node_id: str) -> str:
    validate_session_id(session_id)
    storage = manager.services.storage
    source = await storage.get_session(session_id)
    if source is None:
        raise SessionNotFoundError(
            ErrorCode.validation_error, f"unknown session {session_id!r}", details={"session_id": session_id}
        )
    node = await storage.get_node(session_id, node_id) if isinstance(node_id, str) and node_id else None
    if node is None:
        raise NotFoundError(ErrorCode.validation_error, f"unknown node {node_id!r} in session {session_id!r}")
    if node.agent_id != source.root_agent_id:
        raise InvalidArgumentError(ErrorCode.validation_error, f"node {node_id!r} belongs to a child agent")
    if is_skipped_assistant(node) is not None:
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"node {node_id!r} is a partial or failed assistant node"
        )
    path = await storage.node_path(session_id, node_id)
    root = await storage.get_agent(source.root_agent_id)
    if root is None:
        raise StorageError(ErrorCode.storage_error, f"session {session_id!r} has no root agent row")
    new_session = new_id("sess_")
    while await storage.get_session(new_session) is not None:
        new_session = new_id("sess_")
    agent_id = new_id("agent_")
    now = format_ts()
    await storage.create_session(
        SessionRecord(
            session_id=new_session,
            cwd=source.cwd,
            root_agent_id=agent_id,
            parent_session_id=session_id,
            metadata_json=source.metadata_json,
            created_at=now,
            updated_at=now,
        ),
        AgentRecord(
            agent_id=agent_id,
            session_id=new_session,
            agent_type=root.agent_type,
            metadata_json=root.metadata_json,
            created_at=now,
            updated_at=now,
        ),
    )
    ids = {n.node_id: new_id("node_") for n in path}
    drafts = [
        NodeDraft(
            agent_id=agent_id,
            role=n.role,
            node_type=n.node_type,
            content=list(n.content),
            node_id=ids[n.node_id],
            parent_id=ids[n.parent_id] if n.parent_id is not None else None,
            metadata={
                **_remap(n.metadata, ids),
                "forked_from": {"session_id": session_id, "node_id": n.node_id},
            },
            token_count=n.token_count,
            created_at=n.created_at,
        )
        for n in path
    ]
    await storage.append(new_session, nodes=drafts, active_node_id=ids[node_id])
    return new_session
