"""Backend-neutral builders for the conformance suite (only the storage protocol is used)."""

from __future__ import annotations

from typing import Any

from agent_core._ids import new_id
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core._storage.protocol import SessionStore
from agent_core.types.base import format_ts
from agent_core.types.content import TextBlock
from agent_core.types.enums import AgentType, EventType, RunStatus
from agent_core.types.storage import AgentRecord, RunRecord, SessionRecord


async def new_session(store: SessionStore, cwd: str = "/project") -> tuple[str, str]:
    """A session with its root agent: ``(session_id, agent_id)``."""
    now = format_ts()
    sid, aid = new_id("sess_"), new_id("agent_")
    await store.create_session(
        SessionRecord(session_id=sid, cwd=cwd, root_agent_id=aid, created_at=now, updated_at=now),
        AgentRecord(agent_id=aid, session_id=sid, agent_type=AgentType.main, created_at=now, updated_at=now),
    )
    return sid, aid


async def new_agent(store: SessionStore, session_id: str) -> str:
    now = format_ts()
    aid = new_id("agent_")
    await store.insert_agent(
        AgentRecord(
            agent_id=aid, session_id=session_id, agent_type=AgentType.sub, created_at=now, updated_at=now
        )
    )
    return aid


async def new_run(
    store: SessionStore, session_id: str, agent_id: str, status: RunStatus = RunStatus.running
) -> str:
    now = format_ts()
    rid = new_id("run_")
    await store.insert_run(
        RunRecord(
            run_id=rid,
            session_id=session_id,
            agent_id=agent_id,
            status=status,
            created_at=now,
            updated_at=now,
        )
    )
    return rid


def node(agent_id: str, text: str = "hi", **kw: Any) -> NodeDraft:
    return NodeDraft(agent_id=agent_id, role="user", content=[TextBlock(text=text)], **kw)


def event(draft: NodeDraft | None = None, **kw: Any) -> EventDraft:
    kw.setdefault("event_type", EventType.message_created)
    if draft is not None:
        kw.setdefault("agent_id", draft.agent_id)
        kw.setdefault("run_id", draft.run_id)
        kw.setdefault("node_id", draft.node_id)
    return EventDraft(**kw)
