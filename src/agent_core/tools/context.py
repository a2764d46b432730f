"""The seam between the tool pipeline and the run that calls it.

:class:`RunScope` describes the calling run; :class:`ToolRunSink` is implemented by the loop and is the
only way the tool layer persists results, emits events, creates artifacts or buffers context nodes.
:class:`ToolContext` is what a single handler sees (docs/tools.md#registering-python-tools).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agent_core._media import MediaPolicy
from agent_core.types.content import ArtifactRefBlock, ContentBlock
from agent_core.types.enums import AgentRole, EventLevel, MessageRole, NodeType, RunMode
from agent_core.types.events import EventPayload, ToolProgress, ToolResultEvent
from agent_core.types.permissions import PermissionMode
from agent_core.types.runtime import Node
from agent_core.types.tools import ToolResult

if TYPE_CHECKING:
    from agent_core.tools.preflight import Preflight


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextNodeDraft:
    """A synthetic context node produced by a tool, appended after the turn's tool results."""

    node_type: NodeType
    role: MessageRole
    content: list[ContentBlock]
    metadata: dict[str, Any] = field(default_factory=dict)


class ToolRunSink(Protocol):
    """Run-side services used by the tool pipeline (implemented by the loop)."""

    async def emit(
        self, event: EventPayload, *, tool_call_id: str | None = None, level: EventLevel | None = None
    ) -> None:
        """Emits one event for the run (persisted unless the type is transient)."""

    async def commit_tool_result(self, result: ToolResult, *, event: ToolResultEvent) -> str:
        """Persists the tool node (role ``tool``, one ``tool_result`` block, ``metadata.tool_name``) and
        its ``tool_completed``/``tool_failed``/``tool_denied`` event in one transaction; returns node_id."""

    async def create_artifact(
        self,
        data: bytes | str | Any,
        *,
        filename: str,
        mime_type: str | None = None,
        summary: str | None = None,
        kind: str = "tool_output",
        tool_call_id: str | None = None,
    ) -> ArtifactRefBlock:
        """Writes a redacted artifact for this run and registers it."""

    async def register_artifact(
        self,
        path: Path,
        *,
        filename: str | None = None,
        mime_type: str | None = None,
        summary: str | None = None,
        tool_call_id: str | None = None,
    ) -> ArtifactRefBlock:
        """Copies an existing file into the artifact store and registers it."""

    def add_context_node(self, draft: ContextNodeDraft, *, tool_call_id: str) -> None:
        """Buffers a context node; the loop appends it after the turn's last tool result node."""

    def loaded_instruction_hash(self, path: str) -> str | None:
        """Hash of the instruction file ``path`` already loaded on the run's active path, if any."""

    def active_path(self) -> Sequence[Node]:
        """The calling agent's current active path, root first (read-only view)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class WorkerTaskScope:
    """The Task scope of a worker run started by ``agent.dispatch_worker``: the task, the resolved
    dispatch pool (never null), the worker agent and the steps it may claim (``None``: any; already
    de-duplicated). The one-claim-per-run bookkeeping lives in the Task DAG (it survives restarts)."""

    task_id: str
    worker_pool_id: str
    worker_agent_id: str
    allowed_step_ids: tuple[str, ...] | None = None


@dataclass(kw_only=True, eq=False, slots=True, weakref_slot=True)
class RunScope:
    """The calling run as the tool layer sees it."""

    session_id: str
    agent_id: str
    run_id: str
    agent_role: AgentRole
    project_dir: Path
    home_dir: Path
    cwd: Path
    cancel_event: asyncio.Event
    effective_tools: frozenset[str]
    parent_agent_id: str | None = None
    parent_run_id: str | None = None
    debug: bool = False
    mode: RunMode | None = None
    """The run's mode (``None``: inferred from the role where it matters, e.g. hook inputs)."""
    purpose: str | None = None
    """Why an internal run runs (``memory_extraction``, ``worker``, ...): hooks skip internal purposes."""
    task_scope: WorkerTaskScope | None = None
    """A worker run's Task scope (its dispatch, or a teammate's claimed step); ``None`` otherwise."""
    task_session_id: str | None = None
    """The session whose Task board the run's Task tools use when it is not the run's own (an
    autonomous teammate working a step of its lead's board)."""
    mcp_failed_servers: set[str] = field(default_factory=set)
    """MCP servers that failed during this run: their tools are not offered again in it."""
    permission_mode: PermissionMode = "default"
    """The run's permission mode (``agent_core.permissions._modes``): recorded in every permission audit."""
    media: MediaPolicy | None = None
    """What the run's model reads besides text (images, PDFs) and their limits; ``None``: text only."""


@dataclass(kw_only=True, eq=False, slots=True)
class ToolContext:
    """What one tool handler receives for one call."""

    tool_call_id: str
    tool_name: str
    scope: RunScope
    sink: ToolRunSink
    allowed_outside_roots: bool = False
    """Set by the pipeline when the permission decision explicitly allowed this call although its
    pre-flight reported ``outside_write_roots`` (docs/tools.md#write-roots); adapters refuse such writes
    otherwise."""
    preflight: Preflight | None = None
    """The :class:`~agent_core.tools.preflight.Preflight` the permission decision was made on (set by the
    pipeline); built-in tools act only on the paths it checked."""

    @property
    def session_id(self) -> str:
        return self.scope.session_id

    @property
    def agent_id(self) -> str:
        return self.scope.agent_id

    @property
    def run_id(self) -> str:
        return self.scope.run_id

    @property
    def agent_role(self) -> str:
        return self.scope.agent_role.value

    @property
    def parent_agent_id(self) -> str | None:
        return self.scope.parent_agent_id

    @property
    def parent_run_id(self) -> str | None:
        return self.scope.parent_run_id

    @property
    def project_dir(self) -> Path:
        return self.scope.project_dir

    @property
    def home_dir(self) -> Path:
        return self.scope.home_dir

    @property
    def cwd(self) -> Path:
        return self.scope.cwd

    @property
    def cancel_event(self) -> asyncio.Event:
        return self.scope.cancel_event

    async def emit_progress(self, payload: dict[str, Any]) -> None:
        """Emits a live ``tool_progress`` event with ``progress = payload``."""
        await self.sink.emit(
            ToolProgress(tool_name=self.tool_name, progress=payload), tool_call_id=self.tool_call_id
        )

    async def create_artifact(
        self,
        data: bytes | str,
        filename: str,
        mime_type: str | None = None,
        summary: str | None = None,
    ) -> ArtifactRefBlock:
        return await self.sink.create_artifact(
            data, filename=filename, mime_type=mime_type, summary=summary, tool_call_id=self.tool_call_id
        )

    async def register_artifact(
        self,
        path: Path | str,
        filename: str | None = None,
        mime_type: str | None = None,
        summary: str | None = None,
    ) -> ArtifactRefBlock:
        return await self.sink.register_artifact(
            Path(path),
            filename=filename,
            mime_type=mime_type,
            summary=summary,
            tool_call_id=self.tool_call_id,
        )

    def add_context_node(self, draft: ContextNodeDraft) -> None:
        self.sink.add_context_node(draft, tool_call_id=self.tool_call_id)
