"""A pool worker's agent row and its context-tree root (docs/multi-agent.md#worker-pools,
docs/multi-agent.md#agentlist_workers).

A worker of a pool is one agent per session (``agent_worker_…``), created lazily at its first dispatch
there: an ``agents`` row (``agent_type = sub``, the pool, the worker and its agent definition in the
metadata, ``root_node_id`` naming its tree root) and a never-rendered ``system_note`` root node below which
each dispatch starts a new branch. A later dispatch — in this process or another one sharing the store —
loads both instead.
"""

from __future__ import annotations

import json

from agent_core._ids import new_id
from agent_core._jsontext import compact_json
from agent_core._orchestrator.pools import WorkerSlot
from agent_core._runtime.state import RunState
from agent_core._storage.drafts import NodeDraft
from agent_core._storage.protocol import SessionStore
from agent_core.errors import ErrorCode, InternalError
from agent_core.types.base import format_ts
from agent_core.types.content import TextBlock
from agent_core.types.enums import AgentStatus, AgentType, MessageRole, NodeType
from agent_core.types.storage import AgentRecord


async def ensure_worker_agent(storage: SessionStore, slot: WorkerSlot, parent: RunState) -> bool:
    """Loads or creates the worker's agent row and tree root into ``slot.root``; True when it was created
    now (the caller then announces ``child_agent_created``)."""
    if slot.root is not None:
        return False
    record = await storage.get_agent(slot.agent_id)
    if record is not None:
        meta = json.loads(record.metadata_json or "{}")
        root_id = meta.get("root_node_id")
        node = await storage.get_node(slot.session_id, root_id) if isinstance(root_id, str) else None
        if record.session_id != slot.session_id or node is None:
            raise InternalError(
                ErrorCode.internal_error, f"worker agent {slot.agent_id} has no context tree root"
            )
        slot.root = node
        return False
    worker = slot.worker
    definition = worker.definition
    now = format_ts()
    root_id = new_id("node_")
    meta = {
        "name": definition.name,
        "purpose": "worker",
        "agent_definition_id": definition.agent_definition_id,
        "definition_source": definition.source,
        "mode": parent.mode.value,
        "worker_pool_id": worker.pool_id,
        "worker_id": worker.worker_id,
        "root_node_id": root_id,
    }
    await storage.insert_agent(
        AgentRecord(
            agent_id=slot.agent_id,
            session_id=slot.session_id,
            parent_agent_id=parent.agent_id,
            agent_type=AgentType.sub,
            created_by_run_id=parent.run_id,
            status=AgentStatus.idle,
            metadata_json=compact_json(meta),
            created_at=now,
            updated_at=now,
        )
    )
    text = (
        f"Context tree of worker {worker.worker_id} (pool {worker.pool_id}, agent definition "
        f"{definition.agent_definition_id}). Each dispatch starts a new branch below this note."
    )
    result = await storage.append(
        slot.session_id,
        nodes=[
            NodeDraft(
                node_id=root_id,
                agent_id=slot.agent_id,
                role=MessageRole.user,
                node_type=NodeType.system_note,
                content=[TextBlock(text=text)],
                metadata={
                    "never_render": True,
                    "synthetic": True,
                    "source": "worker_root",
                    "worker_pool_id": worker.pool_id,
                    "worker_id": worker.worker_id,
                },
                parent_id=None,
            )
        ],
    )
    slot.root = result.nodes[0]
    return True
