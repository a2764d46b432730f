"""Crash recovery when a session is loaded into a runtime (docs/runs.md#crash-recovery,
docs/architecture.md#invariants).

A process that died mid-run leaves runs rows in a non-terminal status and, possibly, assistant tool calls
without results on the session's active path. Before the session is used again:

- every orphaned non-terminal run (not owned by this runtime) is closed as ``failed`` with an
  ``internal_error`` "interrupted" error and a ``loop_failed`` event, so every run ends in exactly one
  terminal status;
- every dangling tool call on the root agent's active path is closed with an error tool result (code
  ``cancelled``, type ``interrupted``) and a ``tool_failed`` event, so no provider request ever contains a
  tool call without its result.

Several processes (and runtimes) may open one store (issue 40): a session may be loaded while another
process runs it, so a run whose owner is alive (``runs_live_elsewhere``: another live process or open
store) is not an orphan, and while one is, the dangling tool calls are left alone too (that run may be
between a tool call and its result). That process may die later: :func:`recover_before_root_run` runs the
same recovery again when a root run of this process holds the session's lease, another process wrote the
store since this one last read the session, and runs of dead owners are found, before the run's first
model request.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Set as AbstractSet

from agent_core._ids import new_id
from agent_core._runtime.services import Services
from agent_core._runtime.state import SessionState
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core.errors import ErrorCode
from agent_core.types import events as ev
from agent_core.types.content import ErrorPayload, TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.enums import EndReason, MessageRole, NodeType, RunStatus
from agent_core.types.storage import RunRecord

log = logging.getLogger("agent_core._runtime")

INTERRUPTED_MESSAGE = "the tool call was interrupted: the process stopped before it finished"
OWNER_EXIT_WAIT_S = 10.0
"""How long a root run holding the session lease waits for the owner of a ``running`` run of the session
to disappear (a dead process's connections close one by one: its lease may be gone before its owner lock)."""
_OWNER_POLL_S = 0.05


async def recover_session(
    services: Services, session: SessionState, *, live_run_ids: AbstractSet[str]
) -> None:
    """Load-time recovery: closes orphaned runs and, unless another live process has runs of the session,
    the dangling tool calls of the active path."""
    storage = services.storage
    runs = [
        r for r in await storage.list_non_terminal_runs(session.session_id) if r.run_id not in live_run_ids
    ]
    # runs another live process (or open store) owns are not orphans
    elsewhere = await storage.runs_live_elsewhere([r.run_id for r in runs]) if runs else set()
    session.live_elsewhere = bool(elsewhere)
    await _close_orphans(services, session, [r for r in runs if r.run_id not in elsewhere])
    if not elsewhere:  # a run of another process may be between a tool call and its result
        await _close_dangling_calls(services, session)


async def recover_before_root_run(
    services: Services, session: SessionState, *, live_run_ids: AbstractSet[str]
) -> bool:
    """Run-start recovery, called while this process holds the session's lease, when another process
    wrote the store since the session was read or ran a run of the session then (it may have died since,
    without writing).

    Finds non-terminal runs of the session that this process does not run and whose owners are dead,
    closes them and the dangling tool calls of the (re-read) active path, exactly as
    :func:`recover_session`. A ``running`` root run whose owner still looks alive cannot be running (this
    process holds the lease): its owner is dying, so it is waited for up to :data:`OWNER_EXIT_WAIT_S`
    (child runs and compaction forks of a live process hold no lease: they are left alone).
    Returns whether anything was recovered (the cursor then holds the stored active path).
    """
    storage = services.storage
    runs = [
        r for r in await storage.list_non_terminal_runs(session.session_id) if r.run_id not in live_run_ids
    ]
    session.live_elsewhere = False
    if not runs:
        return False
    deadline = time.monotonic() + OWNER_EXIT_WAIT_S
    while True:
        elsewhere = await storage.runs_live_elsewhere([r.run_id for r in runs])
        busy = [  # root runs hold the lease; child runs and compaction forks do not
            r
            for r in runs
            if r.run_id in elsewhere and r.status == RunStatus.running and r.agent_id == session.root_agent_id
        ]
        if not busy or time.monotonic() >= deadline:
            break
        await asyncio.sleep(_OWNER_POLL_S)
    session.live_elsewhere = bool(elsewhere)
    orphans = [r for r in runs if r.run_id not in elsewhere]
    if not orphans:
        return False
    log.warning(
        "session %s: recovering %d run(s) of stopped processes before the next run: %s",
        session.session_id,
        len(orphans),
        ", ".join(r.run_id for r in orphans),
    )
    record = await storage.get_session(session.session_id)
    session.active_node_id = record.active_node_id if record else None
    active = session.active_node_id
    session.cursor.reset(await storage.node_path(session.session_id, active) if active else [])
    await _close_orphans(services, session, orphans)
    if not busy:
        await _close_dangling_calls(services, session)
    return True


async def _close_orphans(services: Services, session: SessionState, runs: list[RunRecord]) -> None:
    """Closes each run as ``failed`` (``internal_error`` "interrupted", a ``loop_failed`` event)."""
    for run in runs:
        error = ErrorPayload(
            type="interrupted",
            code=ErrorCode.internal_error,
            message="the run was interrupted: the process stopped before it finished",
            redacted=True,
        )
        await services.storage.append(
            session.session_id,
            events=[
                EventDraft.of(
                    ev.LoopFailed(end_reason=EndReason.failed.value, error=error.model_dump(mode="json")),
                    agent_id=run.agent_id,
                    run_id=run.run_id,
                )
            ],
            run_update=(
                run.run_id,
                {
                    "status": RunStatus.failed.value,
                    "end_reason": EndReason.failed.value,
                    "error_json": error.model_dump_json(),
                },
            ),
        )


async def _close_dangling_calls(services: Services, session: SessionState) -> None:
    path = session.cursor.path
    answered = {
        block.tool_call_id for node in path for block in node.content if isinstance(block, ToolResultBlock)
    }
    dangling: list[tuple[ToolCallBlock, str | None]] = []
    for node in path:
        if node.role != MessageRole.assistant:
            continue
        for block in node.content:
            if isinstance(block, ToolCallBlock) and block.tool_call_id not in answered:
                dangling.append((block, node.run_id))
    for call, run_id in dangling:
        error = ErrorPayload(
            type="interrupted", code=ErrorCode.cancelled, message=INTERRUPTED_MESSAGE, redacted=True
        )
        result = ToolResultBlock(
            tool_call_id=call.tool_call_id,
            is_error=True,
            content=[TextBlock(text=INTERRUPTED_MESSAGE)],
            error=error,
            metadata={"aborted": True, "interrupted": True, "partial": False, "abort_reason": "interrupted"},
        )
        node_id = new_id("node_")
        written = await services.storage.append(
            session.session_id,
            nodes=[
                NodeDraft(
                    node_id=node_id,
                    parent_id=session.cursor.tip,
                    agent_id=session.root_agent_id,
                    run_id=run_id,
                    role=MessageRole.tool,
                    node_type=NodeType.message,
                    content=[result],
                    metadata={"tool_name": call.name, "aborted": True, "interrupted": True},
                    token_count=services.counter.blocks([result]),
                )
            ],
            events=[
                EventDraft.of(
                    ev.ToolFailed(
                        tool_name=call.name,
                        error=error.model_dump(mode="json"),
                        aborted=True,
                        reason="interrupted",
                    ),
                    agent_id=session.root_agent_id,
                    run_id=run_id,
                    node_id=node_id,
                    tool_call_id=call.tool_call_id,
                )
            ],
            active_node_id=node_id,
        )
        session.cursor.append(written.nodes[0])
        session.active_node_id = node_id
