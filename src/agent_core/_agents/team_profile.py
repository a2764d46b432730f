"""How a teammate's root runs differ from a plain session's (:class:`SessionProfile`): its model and agent
definition, the team block, its worktree, the lead's ``[limits]`` budget and no ``agent.team_spawn``.

The team block is fixed for the teammate's whole life (its name, its lead, resident or not), so it stays
in the stable part of the prompt; everything that changes reaches the teammate through its inbox.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_core._agents.registry import AgentDefinitionRegistry
from agent_core._agents.team_store import TeammateRecord
from agent_core._agents.team_tool_definitions import TEAM_SPAWN
from agent_core._loop._limits import Budget, LimitConfig
from agent_core._loop.outcome import LoopOutcome
from agent_core._orchestrator.worktrees import (
    GitError,
    Worktree,
    create_worktree,
    finish_worktree,
    reopen_worktree,
    worktree_record,
)
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState, SessionProfile, SessionState
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.types.inbox import InboxEntry
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import AgentDefinition, Node

OnDrained = Callable[[RunState, Sequence[InboxEntry]], Awaitable[LoopOutcome | None]]

log = logging.getLogger("agent_core._agents")
TEAM_BLOCK_PRIORITY = 101
"""Right after the agent definition's block (100)."""
WORKTREE_TASK = "team"
"""``soong/team/<name>``: the branch of a teammate's worktree."""


@dataclass(slots=True)
class Prepared:
    """What a teammate needs besides its row: its definition, model and worktree."""

    definition: AgentDefinition | None = None
    model: ResolvedModelConfig | None = None
    worktree: Worktree | None = None

    @property
    def branch(self) -> str | None:
        return self.worktree.branch if self.worktree is not None else None

    def settings(self) -> dict[str, Any]:
        if self.worktree is None:
            return {}
        return {"worktree": worktree_record(self.worktree), "branch": self.worktree.branch}


def team_text(record: TeammateRecord) -> str:
    resident = bool(record.setting("resident", True))
    lines = [
        "<team>",
        f'You are "{record.name}", a teammate in a team led by another agent ("lead"). You have your own '
        "conversation; the lead and the other teammates do not see it. Messages, requests and answers "
        "reach you as <inbox> notes.",
        '- Report progress and results to your lead with agent.team_send(to="lead", content=...); reach '
        "another teammate by its name. agent.team_list shows the team.",
        '- A plan your lead must approve before you act on it: agent.team_request(to="lead", '
        'kind="plan_approval", content=<the plan>). The call returns the answer; after a rejection, revise.',
        "- Answer requests from your inbox with agent.team_respond(request_id, approve, reason).",
    ]
    if resident:
        lines.append("- After each reply you wait until your inbox brings something new.")
    else:
        lines.append("- Your final answer to your task is sent to your lead, then you stop.")
    if record.setting("autonomous", False):
        lines.append(
            "- When you are idle you claim ready steps of your lead's Task board "
            f"(worker pool {record.setting('worker_pool_id')}); record each outcome with agent.task_update_step."
        )
    lines.append("</team>")
    return "\n".join(lines)


class TeamProfiles:
    """Builds and restores teammates' session profiles; keeps their worktrees."""

    def __init__(self, manager: RunManager, registry: AgentDefinitionRegistry, on_drained: OnDrained) -> None:
        self.manager = manager
        self.registry = registry
        self.on_drained = on_drained
        self._worktrees: dict[str, Worktree] = {}
        self._budgets: dict[str, Budget] = {}

    @property
    def _project(self) -> Path:
        return self.manager.services.config.project

    async def prepare(self, definition_id: str | None, isolation: str, name: str) -> Prepared:
        """Resolves the definition and model (``validation_error`` / ``config_error``) and creates the
        worktree (``config_error`` outside a git repository with a commit)."""
        prepared = Prepared()
        if definition_id:
            prepared.definition = self.registry.for_child(definition_id)
            prepared.model = self._model(prepared.definition)
        if isolation == "worktree":
            prepared.worktree = await create_worktree(self._project, WORKTREE_TASK, name)
        return prepared

    def _model(self, definition: AgentDefinition) -> ResolvedModelConfig | None:
        if not definition.model_profile:
            return None
        model = self.registry.resolve_model(definition, purpose="main")
        if model.provider not in self.manager.services.providers:
            raise ConfigError(
                ErrorCode.config_error,
                f"agent definition {definition.agent_definition_id!r}: model provider {model.provider!r} "
                "is not registered",
            )
        return model

    def build(self, record: TeammateRecord, prepared: Prepared) -> SessionProfile:
        if prepared.worktree is not None:
            self._worktrees[record.session_id] = prepared.worktree
        sources: list[Any] = [_fixed(self._team_block(record))]
        if prepared.definition is not None:
            sources.insert(0, _fixed(self.registry.definition_block(prepared.definition)))
        lead = record.lead_session_id
        reason = record.setting("stopped_reason") or "stopped"
        return SessionProfile(
            name=record.name,
            model=prepared.model,
            remove_tools=frozenset({TEAM_SPAWN}),
            dynamic_sources=sources,
            workdir=prepared.worktree.workdir if prepared.worktree is not None else None,
            budget=lambda: self.budget(lead),
            on_drained=self.on_drained,
            closed=None
            if record.state == "active"
            else f"teammate {record.name!r} has stopped ({reason}); its inbox takes no more entries",
        )

    async def restore(self, record: TeammateRecord) -> SessionProfile:
        """The profile of a teammate whose session is loaded again (a restarted runtime)."""
        prepared = Prepared()
        definition_id = record.setting("agent_definition_id")
        if definition_id:
            try:
                prepared.definition = self.registry.for_child(definition_id)
                prepared.model = self._model(prepared.definition)
            except AgentCoreError as exc:
                log.warning("teammate %s: its agent definition is unusable now: %s", record.name, exc.message)
                prepared.definition = prepared.model = None
        stored = record.setting("worktree")
        if isinstance(stored, dict):
            prepared.worktree = await reopen_worktree(WORKTREE_TASK, {k: str(v) for k, v in stored.items()})
        return self.build(record, prepared)

    def _team_block(self, record: TeammateRecord) -> SystemBlock:
        return SystemBlock(
            block_id="team",
            source="team",
            content=team_text(record),
            priority=TEAM_BLOCK_PRIORITY,
            dynamic=True,
            metadata={"teammate": record.name},
        )

    async def commit_worktree(self, session: SessionState) -> None:
        """Commits what the teammate left in its worktree on its branch (after each of its runs)."""
        worktree = self._worktrees.get(session.session_id)
        if worktree is None:
            return
        try:
            await finish_worktree(worktree, WORKTREE_TASK, session.profile.name if session.profile else None)
        except (GitError, AgentCoreError, OSError) as exc:
            log.warning("could not commit the worktree of %s: %s", worktree.path, exc)

    def budget(self, lead_session_id: str) -> Budget:
        """The ``[limits]`` budget a teammate's run spends: its lead's run in progress's, else the one the
        team spent last (a new one when there is none yet)."""
        lead = self.manager.sessions.get(lead_session_id)
        active = lead.active if lead is not None else None
        if active is not None and active.budget is not None:
            self._budgets[lead_session_id] = active.budget
        budget = self._budgets.get(lead_session_id)
        if budget is None:
            budget = Budget(LimitConfig.from_section(self.manager.services.settings.limits))
            self._budgets[lead_session_id] = budget
        return budget


def _fixed(block: SystemBlock) -> Any:
    def source(_path: Sequence[Node]) -> list[SystemBlock]:
        return [block]

    return source
