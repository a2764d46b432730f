"""Replay, inspect, node paths and branch switching (docs/runs.md#replay-and-inspect,
docs/storage.md#deleting-and-cleaning-up); deletion and cleanup live in :mod:`agent_core._api.maintenance`."""

from __future__ import annotations

import contextlib
from operator import attrgetter
from typing import Any

from pydantic_core import from_json

from agent_core._api._args import check_type
from agent_core._context.conversation import is_skipped_assistant
from agent_core._context.render import render_node
from agent_core._ids import validate_session_id
from agent_core._redaction import REDACTED, has_sensitive_keys, redact_sensitive_keys
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core._storage.decode import run_infos
from agent_core.errors import (
    ErrorCode,
    InvalidArgumentError,
    NotFoundError,
    SessionBusyError,
    SessionNotFoundError,
)
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import AgentRole, EventType
from agent_core.types.mappers import artifact_from_record, load_json_object, run_info_from_record
from agent_core.types.runtime import (
    ArtifactRef,
    ChildAgentResult,
    ChildSummary,
    InspectAgent,
    InspectResult,
    Node,
    ReplayResult,
    RuntimeEvent,
    TaskInspectView,
    UsageTotals,
)
from agent_core.types.storage import AgentRecord, RunRecord

_DEBUG_ARTIFACT_KINDS = {"provider_raw", "hook_log"}
_HOOK_EVENTS = frozenset({EventType.hook_failed, EventType.hook_completed})
"""Events whose captured output is replaced by a marker in a redacted replay."""
_EVENT_TYPE = attrgetter("event_type")
_CHILD_SUMMARY_EVENTS = {
    EventType.child_agent_created,
    EventType.worker_dispatched,
    EventType.worker_dispatch_failed,
    EventType.child_agent_completed,
    EventType.child_agent_failed,
    EventType.child_agent_cancelled,
}


def _redact_node(node: Node) -> Node:
    if not has_sensitive_keys(node.metadata) and not any(
        has_sensitive_keys(b.model_dump()) for b in node.content
    ):
        return node  # nothing to mask: no copy (replay of long sessions)
    return node.model_copy(
        update={
            "metadata": redact_sensitive_keys(node.metadata),
            "content": [type(b).model_validate(redact_sensitive_keys(b.model_dump())) for b in node.content],
        }
    )


def _redact_event(event: RuntimeEvent, keys_masked: bool = False) -> RuntimeEvent:
    """``keys_masked``: storage already masked sensitive keys (``list_events(redact_keys=True)``)."""
    hook = event.event_type in _HOOK_EVENTS
    if not hook and (keys_masked or not has_sensitive_keys(event.data)):
        return event  # nothing to mask: no copy (replay of long sessions)
    payload = event.data if keys_masked else redact_sensitive_keys(event.data)
    if hook:
        for key in ("stderr_summary", "stdout_summary", "logs"):
            if key in payload:
                payload[key] = REDACTED
    return event.model_copy(update={"data": payload})


def _redact_artifact(ref: ArtifactRef) -> ArtifactRef:
    update: dict[str, Any] = {"metadata": redact_sensitive_keys(ref.metadata)}
    if ref.metadata.get("kind") in _DEBUG_ARTIFACT_KINDS:
        update["summary"] = REDACTED
    return ref.model_copy(update=update)


async def _root_agent_ids(manager: RunManager, session_id: str) -> tuple[str, list[AgentRecord]]:
    record = await manager.services.storage.get_session(session_id)
    if record is None:
        raise SessionNotFoundError(
            ErrorCode.validation_error, f"unknown session {session_id!r}", details={"session_id": session_id}
        )
    agents = await manager.services.storage.list_agents(session_id)
    return record.root_agent_id, agents


async def replay_session(
    manager: RunManager, session_id: str, from_seq: int | None, to_seq: int | None, include_sensitive: bool
) -> ReplayResult:
    """The root agent's history of the session (its runs, nodes and events) from ``from_seq`` to ``to_seq``."""
    validate_session_id(session_id)
    check_type("from_seq", from_seq, int, optional=True)
    check_type("to_seq", to_seq, int, optional=True)
    storage = manager.services.storage
    root_id, agents = await _root_agent_ids(manager, session_id)
    agent_by_id = {a.agent_id: a for a in agents}
    masked = not include_sensitive  # read-time key redaction done while decoding the rows
    # One read after the other, not queued at once: Python 3.11's sqlite3 releases the GIL around every
    # column value it fetches, so a read thread fetching while this thread decodes hands the GIL back and
    # forth ~100,000 times per table (a 10,000-node replay took ~15 % more CPU time that way).
    runs = await storage.list_runs(session_id)
    nodes = await storage.list_nodes(session_id, agent_id=root_id, redact_keys=masked)
    events = await storage.list_events(
        session_id,
        from_seq=from_seq,
        to_seq=to_seq,
        redact_keys=masked,
        agent_ids=(root_id, None),
        session_nodes=nodes,  # all of them when the root agent is the session's only writer
    )
    artifact_records = await storage.list_artifacts(session_id=session_id)
    root_runs = [r for r in runs if r.agent_id == root_id]
    artifacts = [artifact_from_record(a) for a in artifact_records if a.agent_id in (root_id, None)]
    children = []
    for run in runs:
        if run.agent_id == root_id:
            continue
        agent = agent_by_id.get(run.agent_id)
        meta = _json_object(agent.metadata_json) if agent else {}
        per_run = _json_object(run.metadata_json).get("result")  # workers: one result per run
        child_result = (
            per_run if isinstance(per_run, dict) else (_json_object(agent.result_json) if agent else {})
        )
        children.append(
            ChildSummary(
                child_run_id=run.run_id,
                child_agent_id=run.agent_id,
                agent_type=agent.agent_type if agent else None,
                purpose=meta.get("purpose"),
                status=run.status,
                result_summary=child_result.get("summary"),
            )
        )
    tasks = await _task_views(manager, session_id)
    root = agent_by_id.get(root_id)
    root_meta = load_json_object(root.metadata_json, "agents.metadata_json") if root else None
    result = ReplayResult(
        session_id=session_id,
        runs=run_infos(root_runs, root, root_meta or {}),
        nodes=nodes,
        events=events,
        artifacts=artifacts,
        children=children,
        tasks=tasks,
        usage=UsageTotals.from_records([_json_object(r.usage_json) for r in runs]),
        redacted=not include_sensitive,
    )
    return result if include_sensitive else _redacted(result, keys_masked=True)


def _redacted(result: ReplayResult, keys_masked: bool = False) -> ReplayResult:
    """``keys_masked``: nodes and events were read with ``redact_keys=True`` (then only hook events change:
    found by a C-level scan of the event types, not an enum hash per event)."""
    events = result.events
    if not keys_masked:
        events = [_redact_event(e) for e in events]
    elif any(map(list(map(_EVENT_TYPE, events)).__contains__, _HOOK_EVENTS)):
        events = [_redact_event(e, True) if e.event_type in _HOOK_EVENTS else e for e in events]
    return result.model_copy(
        update={
            "nodes": result.nodes if keys_masked else [_redact_node(n) for n in result.nodes],
            "events": events,
            "artifacts": [_redact_artifact(a) for a in result.artifacts],
            "runs": [
                r if r.error is None else r.model_copy(update={"error": _redact_error(r.error)})
                for r in result.runs
            ],
        }
    )


def _redact_error(error: ErrorPayload | None) -> ErrorPayload | None:
    if error is None:
        return None
    return error.model_copy(update={"details": redact_sensitive_keys(error.details)})


def _json_object(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    with contextlib.suppress(ValueError):
        value = from_json(text)
        if isinstance(value, dict):
            return value
    return {}


async def _task_views(manager: RunManager, session_id: str) -> list[TaskInspectView]:
    tasks = manager.features.tasks
    return await tasks.task_views(session_id) if tasks is not None else []


async def replay_run(manager: RunManager, run_id: str, include_sensitive: bool) -> ReplayResult:
    storage = manager.services.storage
    run = await storage.get_run(run_id)
    if run is None:
        raise NotFoundError(ErrorCode.validation_error, f"unknown run {run_id!r}")
    agent = await storage.get_agent(run.agent_id)
    masked = not include_sensitive
    nodes = await storage.list_nodes(run.session_id, run_id=run_id, redact_keys=masked)
    events = await storage.list_events(run.session_id, run_id=run_id, redact_keys=masked)
    artifacts = [artifact_from_record(a) for a in await storage.list_artifacts(run_id=run_id)]
    tree = _run_tree(run_id, await storage.list_runs(run.session_id))
    result = ReplayResult(
        session_id=run.session_id,
        run_id=run_id,
        runs=[run_info_from_record(run, agent)],
        nodes=nodes,
        events=events,
        artifacts=artifacts,
        usage=UsageTotals.from_records([_json_object(r.usage_json) for r in tree]),
        redacted=not include_sensitive,
    )
    return result if include_sensitive else _redacted(result, keys_masked=True)


def _run_tree(run_id: str, runs: list[RunRecord]) -> list[RunRecord]:
    """The run and its descendants (``parent_run_id`` in the run metadata): the usage of one agent tree."""
    parent_of = {r.run_id: _json_object(r.metadata_json).get("parent_run_id") for r in runs}
    members = {run_id}
    changed = True
    while changed:
        changed = False
        for rid, parent in parent_of.items():
            if parent in members and rid not in members:
                members.add(rid)
                changed = True
    return [r for r in runs if r.run_id in members]


async def get_node_path(manager: RunManager, node_id: str) -> list[Node]:
    storage = manager.services.storage
    if not isinstance(node_id, str) or not node_id:
        raise InvalidArgumentError(ErrorCode.validation_error, "node_id must be a non-empty string")
    session_id = await storage.find_node_session(node_id)
    if session_id is None:
        raise NotFoundError(ErrorCode.validation_error, f"unknown node {node_id!r}")
    return await storage.node_path(session_id, node_id)


async def inspect_child(
    manager: RunManager, parent: RunState, child_run_id: str, include_sensitive: bool
) -> InspectResult:
    storage = manager.services.storage
    run = await storage.get_run(child_run_id)
    agent = await storage.get_agent(run.agent_id) if run else None
    is_child = child_run_id in parent.children or (
        run is not None
        and run.session_id == parent.session_id
        and _parent_run_of(run_meta=run.metadata_json) == parent.run_id
    )
    if run is None or agent is None or not is_child:
        raise NotFoundError(
            ErrorCode.validation_error, f"run {child_run_id!r} is not a child run of {parent.run_id!r}"
        )
    meta = _json_object(agent.metadata_json)
    nodes = await storage.list_nodes(run.session_id, run_id=child_run_id)
    events = await storage.list_events(run.session_id, run_id=child_run_id)
    artifacts = [artifact_from_record(a) for a in await storage.list_artifacts(run_id=child_run_id)]
    per_run = _json_object(run.metadata_json).get("result")  # workers: one result per run
    result_data = per_run if isinstance(per_run, dict) else _json_object(agent.result_json)
    child_result = None
    if result_data:
        with contextlib.suppress(Exception):
            child_result = ChildAgentResult.model_validate(result_data)
    model_request = _latest_request_view(events, nodes)
    result = InspectResult(
        run=run_info_from_record(run, agent),
        agent=InspectAgent(
            agent_id=agent.agent_id,
            agent_type=agent.agent_type,
            purpose=meta.get("purpose"),
            agent_definition_id=meta.get("agent_definition_id"),
            parent_agent_id=agent.parent_agent_id,
        ),
        nodes=nodes,
        events=events,
        artifacts=artifacts,
        result=child_result,
        model_request=model_request,
        redacted=not include_sensitive,
    )
    if include_sensitive:
        return result
    return result.model_copy(
        update={
            "nodes": [_redact_node(n) for n in nodes],
            "events": [_redact_event(e) for e in events],
            "artifacts": [_redact_artifact(a) for a in artifacts],
            "model_request": redact_sensitive_keys(model_request) if model_request else None,
        }
    )


def _parent_run_of(*, run_meta: str | None) -> str | None:
    value = _json_object(run_meta).get("parent_run_id")
    return value if isinstance(value, str) else None


def _latest_request_view(events: list[RuntimeEvent], nodes: list[Node]) -> dict[str, Any] | None:
    """Provider-neutral view of the latest turn rebuilt from its ``context_built`` report and the nodes."""
    report = next((e.data for e in reversed(events) if e.event_type == EventType.context_built), None)
    if report is None:
        return None
    by_id = {n.node_id: n for n in nodes}
    messages = []
    for node_id in report.get("included_node_ids", []):
        node = by_id.get(node_id)
        if node is None:
            continue
        message = render_node(node)
        if message is not None:
            messages.append(message.model_dump(mode="json"))
    return {
        "turn": report.get("turn"),
        "provider": report.get("provider"),
        "model": report.get("model"),
        "system_blocks": report.get("system_blocks", []),
        "messages": messages,
        "task_board": report.get("task_board"),
    }


async def switch_node(manager: RunManager, session_id: str, node_id: str) -> Node:
    session = await manager.get_session(session_id)
    # A background compact fork never blocks a switch: its result turns stale instead
    # (docs/compaction.md#stale-compactions).
    if session.busy or any(
        not r.terminal and r.role != AgentRole.compact for r in session.live_runs.values()
    ):
        raise SessionBusyError(
            ErrorCode.session_active, f"session {session_id!r} has a queued or running run"
        )
    storage = manager.services.storage
    node = await storage.get_node(session_id, node_id)
    if node is None:
        raise NotFoundError(ErrorCode.validation_error, f"unknown node {node_id!r} in session {session_id!r}")
    if is_skipped_assistant(node) is not None:
        raise InvalidArgumentError(
            ErrorCode.validation_error, f"node {node_id!r} is a partial or failed assistant node"
        )
    if node.agent_id != session.root_agent_id:
        raise InvalidArgumentError(ErrorCode.validation_error, f"node {node_id!r} belongs to a child agent")
    await storage.append(session_id, active_node_id=node_id)
    session.active_node_id = node_id
    session.cursor.reset(await storage.node_path(session_id, node_id))
    return node


__all__ = ["replay_run", "replay_session"]
