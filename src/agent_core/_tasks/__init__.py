"""Task board: the Task DAG, its append-only JSONL WAL, the per-session service and the ``agent.task_*``
tools (docs/task-board.md).

Module map: ``models`` (state + WAL record schema), ``inputs`` (tool inputs, patch ops), ``dag`` (state +
``apply``, the only mutation), ``decide`` / ``patch`` (pure decisions → records), ``wal`` (file names, the
single writer, replay), ``wal_cleanup`` (terminal-WAL cleanup; it reads only each WAL's last line).
The per-session :class:`TaskService` is composed of ``store`` (state, restore, commit protocol), ``access``
(role checks, worker pools), ``reads`` (get/list/query, inspect views, the board) and ``worker_runs``
(dispatch checks, worker-run-end fallback), and holds the write operations; ``registry`` (one service per
session), ``scope`` (callers and worker scope), ``views``, ``board``, ``tools`` (the adapter).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core._tasks.dag import CORE, Actor, IllegalTransition, TaskDag
    from agent_core._tasks.models import Task, TaskStep, TaskWalEvent, parse_wal_event
    from agent_core._tasks.registry import TaskRegistry
    from agent_core._tasks.scope import TaskCaller, WorkerTaskScope
    from agent_core._tasks.service import TaskService
    from agent_core._tasks.tool_definitions import TASK_TOOL_NAMES, task_tool_definitions
    from agent_core._tasks.tools import TaskToolAdapter
    from agent_core._tasks.wal import WalWriter, replay_wal
    from agent_core._tasks.worker_runs import DispatchCheck, WorkerRunEnd

__all__ = [
    "CORE",
    "TASK_TOOL_NAMES",
    "Actor",
    "DispatchCheck",
    "IllegalTransition",
    "Task",
    "TaskCaller",
    "TaskDag",
    "TaskRegistry",
    "TaskService",
    "TaskStep",
    "TaskToolAdapter",
    "TaskWalEvent",
    "WalWriter",
    "WorkerRunEnd",
    "WorkerTaskScope",
    "parse_wal_event",
    "replay_wal",
    "task_tool_definitions",
]

_HOMES = {
    "Actor": "agent_core._tasks.dag",
    "CORE": "agent_core._tasks.dag",
    "DispatchCheck": "agent_core._tasks.worker_runs",
    "IllegalTransition": "agent_core._tasks.dag",
    "TASK_TOOL_NAMES": "agent_core._tasks.tool_definitions",
    "Task": "agent_core._tasks.models",
    "TaskCaller": "agent_core._tasks.scope",
    "TaskDag": "agent_core._tasks.dag",
    "TaskRegistry": "agent_core._tasks.registry",
    "TaskService": "agent_core._tasks.service",
    "TaskStep": "agent_core._tasks.models",
    "TaskToolAdapter": "agent_core._tasks.tools",
    "TaskWalEvent": "agent_core._tasks.models",
    "WalWriter": "agent_core._tasks.wal",
    "WorkerRunEnd": "agent_core._tasks.worker_runs",
    "WorkerTaskScope": "agent_core._tasks.scope",
    "parse_wal_event": "agent_core._tasks.models",
    "replay_wal": "agent_core._tasks.wal",
    "task_tool_definitions": "agent_core._tasks.tool_definitions",
}


def __getattr__(name: str) -> Any:
    """Imports a name's module on first use: a run that never touches Tasks does not load them."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
