"""``AgentRuntime.rewind``: files and conversation back to a node of a session (issue 37 item 1).

Holds the session's lock for the whole rewind (no run of the session starts meanwhile) and refuses a
session with a queued or running run (``session_active``). With ``conversation`` the target must be a node
``switch_node`` accepts (the root agent's, not a partial reply); this is checked before any file is
touched. With ``files`` the plan of :mod:`agent_core._checkpoints.rewind` is made; a conflict refuses the
whole rewind (``path_conflict`` with ``details.conflicts``, nothing written); else the files are put back,
the rewind is journaled (its checkpoints are never undone twice) and the active path switched.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from pathlib import Path

from agent_core._checkpoints.model import CheckpointRecord, RewindRecord
from agent_core._checkpoints.rewind import Applied, apply_plan, conflict_error, plan_rewind, to_undo
from agent_core._checkpoints.service import CheckpointService
from agent_core._context.conversation import is_skipped_assistant
from agent_core._ids import new_id, validate_session_id
from agent_core._runtime.runs import RunManager
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.permissions._protected import WHY, protected_kind
from agent_core.tools._paths import resolve_dir, user_home, within_roots
from agent_core.types._results import RewindResult, RewindSkip
from agent_core.types.enums import AgentRole

READ_LIMIT = 1 << 30


def _other_sessions(home: Path, session_id: str, since: float) -> list[CheckpointRecord]:
    """Checkpoints of the other sessions of this home whose journal changed at or after ``since``
    (a checkpoint open at the same time as one of ours closed after it opened), without undone ones."""
    out: list[CheckpointRecord] = []
    sessions = home / "sessions"
    try:
        listing = list(os.scandir(sessions))
    except OSError:
        return out
    for entry in listing:
        if entry.name == session_id or not entry.is_dir(follow_symlinks=False):
            continue
        journal = Path(entry.path) / "checkpoints" / "journal.jsonl"
        try:
            if journal.stat().st_mtime < since - 1:
                continue
            lines = journal.read_bytes().splitlines()
        except OSError:
            continue
        records: list[CheckpointRecord] = []
        undone: set[str] = set()
        for line in lines:
            with contextlib.suppress(ValueError):
                data = json.loads(line)
                if isinstance(data, dict) and data.get("type") == "rewind":
                    undone.update(RewindRecord.model_validate(data).checkpoint_ids)
                elif isinstance(data, dict):
                    records.append(CheckpointRecord.model_validate(data))
        out.extend(r for r in records if r.checkpoint_id not in undone)
    return out


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(READ_LIMIT)
    finally:
        os.close(fd)


class _Refusals:
    """Why a path may never be written by a rewind (``None``: it may)."""

    def __init__(self, service: CheckpointService, project: Path, soong_home: Path) -> None:
        self.project = resolve_dir(project)
        self.roots = service.roots(self.project)
        self.soong_home = resolve_dir(soong_home)
        self.home = user_home()

    def __call__(self, raw: str) -> str | None:
        path = Path(raw)
        if not path.is_absolute() or not within_roots(path, self.roots):
            return "outside the write roots: left alone"
        kind = protected_kind(
            path, project=self.project, soong_home=self.soong_home, home=self.home, write=True
        )
        if kind is not None:
            return f"protected path ({WHY[kind]}): a rewind never writes it"
        existing = path.parent
        while not os.path.lexists(existing) and existing != existing.parent:
            existing = existing.parent
        if os.path.realpath(existing) != os.fspath(existing):
            return "below a symlinked directory: left alone"
        return None


async def rewind(
    manager: RunManager, session_id: str, node_id: str, *, files: bool, conversation: bool
) -> RewindResult:
    validate_session_id(session_id)
    session = await manager.get_session(session_id)
    services = manager.services
    storage = services.storage
    async with session.lock:
        if session.busy or any(
            not r.terminal and r.role != AgentRole.compact for r in session.live_runs.values()
        ):
            raise AgentCoreError(
                ErrorCode.session_active, f"session {session_id!r} has a queued or running run"
            )
        node = await storage.get_node(session_id, node_id)
        if node is None:
            raise AgentCoreError(
                ErrorCode.validation_error, f"unknown node {node_id!r} in session {session_id!r}"
            )
        if conversation:
            if is_skipped_assistant(node) is not None:
                raise AgentCoreError(
                    ErrorCode.validation_error, f"node {node_id!r} is a partial or failed assistant node"
                )
            if node.agent_id != session.root_agent_id:
                raise AgentCoreError(
                    ErrorCode.validation_error,
                    f"node {node_id!r} belongs to a child agent (rewind the conversation to a node of the "
                    "main agent, or pass conversation=False)",
                )
        result = RewindResult(session_id=session_id, node_id=node_id, files=files, conversation=conversation)
        if files:
            applied, undone = await _rewind_files(manager, session_id, node_id, node.node_seq)
            result.checkpoints = undone
            result.restored, result.removed = applied.restored, applied.removed
            result.skipped = [RewindSkip(path=s.path, reason=s.reason) for s in applied.skipped]
        if conversation:
            await storage.append(session_id, active_node_id=node_id)
            session.active_node_id = node_id
            session.cursor.reset(await storage.node_path(session_id, node_id))
        result.active_node_id = session.active_node_id
        return result


async def _rewind_files(
    manager: RunManager, session_id: str, node_id: str, boundary: int
) -> tuple[Applied, list[str]]:
    services = manager.services
    service = services.checkpoints
    store = service.session(session_id).store
    nodes = await services.storage.list_nodes(session_id)
    node_seqs = {
        str(n.metadata["checkpoint_id"]): n.node_seq
        for n in nodes
        if isinstance(n.metadata.get("checkpoint_id"), str)
    }
    journal = await asyncio.to_thread(store.records)
    undo = to_undo(journal, boundary, node_seqs)
    if not undo:
        return Applied(), []
    since = min(r.opened_at for r in undo)
    others = await asyncio.to_thread(_other_sessions, services.config.home, session_id, since)
    refuse = _Refusals(service, services.config.project, services.config.home)
    plan = await asyncio.to_thread(plan_rewind, undo, service.peek, others=others, refuse=refuse)
    if plan.conflicts:
        raise conflict_error(plan.conflicts)
    try:
        applied = await asyncio.to_thread(apply_plan, plan, store, _read)
    except (OSError, ValueError, AgentCoreError) as exc:
        message = exc.message if isinstance(exc, AgentCoreError) else str(exc)
        raise AgentCoreError(
            ErrorCode.storage_error, f"rewind failed and was undone: {message}", cause=exc
        ) from exc
    applied.skipped[:0] = plan.skipped
    record = RewindRecord(
        rewind_id=new_id("rewind_"), node_id=node_id, checkpoint_ids=plan.checkpoint_ids, at=time.time()
    )
    await asyncio.to_thread(store.append, record)
    return applied, plan.checkpoint_ids
