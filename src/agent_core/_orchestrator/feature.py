"""The Task board and orchestrator feature of one runtime (``RunFeatures.tasks``): :func:`install`.

The Task and worker tools are registered at open with their static definitions; the orchestrator
(:class:`~agent_core._orchestrator.orchestration.Orchestration`: Task registry, worker pools, dispatcher)
is built on first need — an orchestrator run, a session that has Task WALs to restore, or the first Task
or worker tool call. A normal run in a session without Tasks never imports it (cold start, issue 16); what
it would have done for such a run (restore nothing, no board) is what happens without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from agent_core._agents.feature import Agents
from agent_core._orchestrator.tool_definitions import orchestrator_tool_definitions
from agent_core._runtime.features import TaskBoard
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core._tasks.tool_definitions import task_tool_definitions
from agent_core._tasks.wal_files import list_wal_files
from agent_core.tools._lazy import LazyToolAdapter
from agent_core.tools.adapter import ToolAdapter
from agent_core.types.enums import AgentRole
from agent_core.types.runtime import TaskInspectView

if TYPE_CHECKING:
    from agent_core._orchestrator.orchestration import Orchestration


class TaskFeature:
    """``RunFeatures.tasks``: answers for the orchestrator, building it when a run needs it."""

    def __init__(self, manager: RunManager, agents: Agents) -> None:
        self.manager = manager
        self.agents = agents
        self._wal_root = Path(manager.services.settings.task.wal_dir).resolve()
        self._orchestration: Orchestration | None = None
        self.board_listeners: list[Callable[[str], None]] = []
        """Told the session id after every ``agent.task_*`` call on a Task board (autonomous teammates)."""

    @property
    def loaded(self) -> Orchestration | None:
        """The orchestrator when it was built already."""
        return self._orchestration

    def load(self) -> Orchestration:
        """The orchestrator (built on first call)."""
        if self._orchestration is None:
            from agent_core._orchestrator.orchestration import Orchestration

            self._orchestration = Orchestration(self.manager, self.agents, self.board_listeners)
        return self._orchestration

    def _has_wals(self, session_id: str) -> bool:
        """Whether the session may have Tasks: WAL files in its directory (another medium: assume so)."""
        if self.manager.services.storage.task_wal_writer() is not None:
            return True
        return bool(list_wal_files(self._wal_root / session_id))

    def _task_tools(self) -> ToolAdapter:
        return self.load().task_tools

    def _orchestrator_tools(self) -> ToolAdapter:
        return self.load().orchestrator_tools

    # ---- RunFeatures.tasks --------------------------------------------------------------------------
    async def check(self) -> None:
        await self.load().check()

    async def before_root_run(self, state: RunState) -> None:
        if (
            self._orchestration is None
            and state.role != AgentRole.orchestrator
            and not self._has_wals(state.session_id)
        ):
            return  # nothing to restore
        await self.load().before_root_run(state)

    def task_board_for(self, state: RunState, role: AgentRole) -> TaskBoard | None:
        def board() -> str | None:
            orchestration = self._orchestration
            if orchestration is None:
                return None
            per_run = orchestration.task_board_for(state, role)
            return per_run() if per_run is not None else None

        return board

    async def task_views(self, session_id: str) -> list[TaskInspectView]:
        if self._orchestration is None and not self._has_wals(session_id):
            return []
        return await self.load().task_views(session_id)

    def active_wal_paths(self) -> list[Path]:
        return self._orchestration.active_wal_paths() if self._orchestration is not None else []


def install(manager: RunManager, agents: Agents) -> TaskFeature:
    """Registers the Task and worker tools (static definitions) and returns the feature. Autonomous worker
    pools (docs/multi-agent.md#autonomous-workers) need the orchestrator from the start."""
    feature = TaskFeature(manager, agents)
    tools = manager.services.tools
    tools.register_adapter(LazyToolAdapter(task_tool_definitions(), feature._task_tools), internal=True)
    tools.register_adapter(
        LazyToolAdapter(orchestrator_tool_definitions(), feature._orchestrator_tools), internal=True
    )
    if any(pool.autonomous for pool in manager.services.settings.agents.worker_pools):
        feature.load()
    return feature
