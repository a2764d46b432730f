"""Crash recovery when a session is loaded into a runtime (storage.md §11.1, ARCHITECTURE.md invariants).

A process that died mid-run leaves runs rows in a non-terminal status and, possibly, assistant tool calls
without results on the session's active path. Before the session is used again:

- every orphaned non-terminal run (not owned by this runtime) is closed as ``failed`` with an
  ``internal_error`` "interrupted" error and a ``loop_failed`` event, so every run ends in exactly one
  terminal status;
- every dangling tool call on the root agent's active path is closed with an error tool result (code
  ``cancelled``, type ``interrupted``) and a ``tool_failed`` event, so no provider request ever contains a
  tool call without its result.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from agent_core._events import payloads as ev
from agent_core._ids import new_id
from agent_core._runtime.services import Services
from agent_core._runtime.state import SessionState
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core.errors import ErrorCode
from agent_core.types.content import ErrorPayload, TextBlock, ToolCallBlock, ToolResultBlock
from agent_core.types.enums import EndReason, MessageRole, NodeType, RunStatus

INTERRUPTED_MESSAGE = "the tool call was interrupted: the process stopped before it finished"


async def recover_session(
    services: Services, session: SessionState, *, live_run_ids: AbstractSet[str]
) -> None:
    storage = services.storage
    runs = [
        r for r in await storage.list_non_terminal_runs(session.session_id) if r.run_id not in live_run_ids
    ]
    # a store shared by several processes: runs another live process owns are not orphans
    elsewhere = (
        await storage.runs_live_elsewhere([r.run_id for r in runs]) if storage.SHARED and runs else set()
    )
    for run in runs:
        if run.run_id in elsewhere:
            continue
        error = ErrorPayload(
            type="interrupted",
            code=ErrorCode.internal_error,
            message="the run was interrupted: the process stopped before it finished",
            redacted=True,
        )
        await storage.append(
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
    if not elsewhere:  # a run of another process may be between a tool call and its result
        await _close_dangling_calls(services, session)


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
