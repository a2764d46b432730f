"""Task board: the Task DAG, its append-only JSONL WAL, the per-session service and the ``agent.task_*``
tools (task-board.md).

Module map: ``models`` (state + WAL record schema), ``inputs`` (tool inputs, patch ops), ``dag`` (state +
``apply``, the only mutation), ``decide`` / ``patch`` (pure decisions → records), ``wal`` (file names, the
single writer, replay), ``wal_cleanup`` (terminal-WAL cleanup; it reads only each WAL's last line).
The per-session :class:`TaskService` is composed of ``store`` (state, restore, commit protocol), ``access``
(role checks, worker pools), ``reads`` (get/list/query, inspect views, the board) and ``worker_runs``
(dispatch checks, worker-run-end fallback), and holds the write operations; ``registry`` (one service per
session), ``scope`` (callers and worker scope), ``views``, ``board``, ``tools`` (the adapter).
"""

from agent_core.tasks.dag import CORE, Actor, IllegalTransition, TaskDag
from agent_core.tasks.models import Task, TaskStep, TaskWalEvent, parse_wal_event
from agent_core.tasks.registry import TaskRegistry
from agent_core.tasks.scope import TASK_SCOPE_KEY, TaskCaller, WorkerTaskScope
from agent_core.tasks.service import TaskService
from agent_core.tasks.tools import TASK_TOOL_NAMES, TaskToolAdapter, task_tool_definitions
from agent_core.tasks.wal import WalWriter, replay_wal
from agent_core.tasks.worker_runs import DispatchCheck, WorkerRunEnd

__all__ = [
    "CORE",
    "TASK_SCOPE_KEY",
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
