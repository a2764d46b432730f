"""The request and the outcome of one child run (docs/multi-agent.md).

:class:`ChildSpec` is what an agent tool hands to :class:`~agent_core._agents.children.ChildLauncher`
(already validated arguments, the first node text, the initial active path, a worker's Task scope);
:class:`ChildOutcome` is what the launcher returns: the child's state, its ``ChildAgentResult`` and the
tool-result error, turned into the parent's :class:`ToolResult` by :meth:`ChildOutcome.tool_result`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agent_core._runtime.state import RunState
from agent_core.tools.context import WorkerTaskScope
from agent_core.types.content import ErrorPayload, JsonBlock, TextBlock
from agent_core.types.enums import AgentRole
from agent_core.types.runtime import AgentDefinition, ChildAgentResult, Node
from agent_core.types.tools import ToolResult


@dataclass(kw_only=True, eq=False, slots=True)
class ChildSpec:
    """One child run requested by an agent tool (arguments already schema-validated)."""

    role: AgentRole
    definition: AgentDefinition
    tool_call_id: str
    first_text: str
    """Body of the first synthetic user node, already wrapped (``<delegated_task>…``)."""
    purpose: str
    allowed_tools: list[str] | None = None
    expected_output_schema: dict[str, Any] | None = None
    timeout_ms: int | None = None
    base_path: Sequence[Node] = ()
    """The child's initial active path (fork: the parent's path up to the calling assistant node)."""
    fork_from_node_id: str | None = None
    agent_id: str | None = None
    """An existing agent to run (workers); ``None`` creates a one-shot agent."""
    worker_entry_tools: Sequence[str] | None = None
    agent_metadata: dict[str, Any] = field(default_factory=dict)
    run_metadata: dict[str, Any] = field(default_factory=dict)
    first_node_metadata: dict[str, Any] = field(default_factory=dict)
    task_scope: WorkerTaskScope | None = None
    """A worker's Task scope (:attr:`RunScope.task_scope <agent_core.tools.context.RunScope.task_scope>`)."""
    workdir: Path | None = None
    """The run's project directory, cwd and write root instead of the project (a worker worktree)."""
    task_board: Callable[[], str | None] | None = None
    step_id: Callable[[RunState], str | None] | None = None
    """Workers: the claimed step for ``ChildAgentResult.step_id`` (core-set)."""
    on_ended: Callable[[RunState], Awaitable[None]] | None = None
    """Called once the run is terminal, before its result is assembled (workers: the Task board catches
    up with the records the run appended in another process)."""
    run_id: str | None = None
    """The child's run id when the caller fixes it (``None``: a fresh id)."""
    attach: bool = False
    """The run ``run_id`` was already started by a previous attempt of the calling tool step (a step the
    temporal engine retried): its rows and start events exist; the launcher registers it and awaits it."""
    on_admitted: Callable[[RunState], Awaitable[None]] | None = None
    """Called once the child passed admission and is registered, before its rows are written (workers:
    create the reused agent lazily, point the cursor at its tree, announce the dispatch). Raising
    aborts the start like a failed row write."""


@dataclass(kw_only=True, eq=False, slots=True)
class ChildOutcome:
    """What the agent tool returns to its parent."""

    state: RunState
    result: ChildAgentResult
    error: ErrorPayload | None
    schema_errors: list[dict[str, str]] = field(default_factory=list)

    @property
    def ids(self) -> dict[str, str]:
        return {
            "child_agent_id": self.state.agent_id,
            "child_run_id": self.state.run_id,
            "stream_id": self.state.run_id,
        }

    def tool_result(self, tool_call_id: str, tool_name: str, body: dict[str, Any]) -> ToolResult:
        """``body`` (ids, result, ...) as JSON content; an error adds its message and ``error``."""
        data = dict(body)
        if self.schema_errors:
            data["errors"] = self.schema_errors
        content: list[Any] = [JsonBlock(data=data)]
        if self.error is not None:
            content.insert(0, TextBlock(text=f"child agent error ({self.error.code}): {self.error.message}"))
        return ToolResult(
            tool_call_id=tool_call_id,
            tool_name=tool_name,
            content=content,
            is_error=self.error is not None,
            error=self.error,
            metadata=self.ids,
        )


class RemoteChildRuns(Protocol):
    """Executes a child run elsewhere than this process (the temporal engine's worker dispatch).

    The launcher admits the child, writes its rows and awaits it exactly as for an in-process run; only
    the run's execution moves: :meth:`execute` is the child's task and returns once the run is terminal
    (its ``RunState`` finished with the stored outcome). A set ``cancel_event`` must reach the run."""

    def handles(self, spec: ChildSpec) -> bool: ...

    def run_id(self, parent_run_id: str, tool_call_id: str) -> str:
        """The run id of the child started by this tool call (the same when its step is retried)."""
        ...

    async def execute(self, state: RunState, parent: RunState, spec: ChildSpec) -> None: ...
