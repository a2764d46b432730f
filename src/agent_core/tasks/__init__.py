"""Task board: the Task DAG, its append-only JSONL WAL, the per-session service and the ``agent.task_*``
tools (task-board.md). Module map: ``models`` (state + WAL record schema), ``inputs`` (tool inputs, patch
ops), ``dag`` (state + ``apply``), ``decide`` (pure decisions → records), ``wal`` (files, writer, replay),
``service`` / ``registry`` (commit protocol, restore, leases, dispatch helpers), ``views``, ``board``,
``tools`` (the adapter), ``cleanup``.
"""

from agent_core.tasks.dag import CORE, Actor, IllegalTransition, TaskDag
from agent_core.tasks.models import Task, TaskStep, TaskWalEvent, parse_wal_event
from agent_core.tasks.registry import TaskRegistry
from agent_core.tasks.scope import TASK_SCOPE_KEY, TaskCaller, WorkerTaskScope
from agent_core.tasks.service import DispatchCheck, TaskService, WorkerRunEnd
from agent_core.tasks.tools import TASK_TOOL_NAMES, TaskToolAdapter, task_tool_definitions
from agent_core.tasks.wal import WalWriter, replay_wal

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
