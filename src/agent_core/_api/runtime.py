"""``AgentRuntime``: the SDK entry point (docs/architecture.md#public-surface,
docs/architecture.md#assembling-an-open-runtime).

Construction is synchronous and only resolves paths and validates ``config.toml`` (nothing is created on
disk). Opening (``async with`` or the first awaited call) first checks that every API-key variable the
configuration names is set (a ``config_error`` naming the variable and its key otherwise, before anything
is opened), then opens SQLite, verifies the packaged assets and wires the registries. The runtime facade only assembles parts; their logic lives in their packages.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

from pydantic import BaseModel, ValidationError

from agent_core._api._args import check_type
from agent_core._api.handles import RunHandle
from agent_core._api.wiring import OpenRuntime, open_services
from agent_core._concurrency import TaskOwner, wait_uninterrupted
from agent_core._runtime.runs import RunManager
from agent_core._runtime.state import RunState
from agent_core.config._credentials import check_credentials
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.errors import ErrorCode, InvalidArgumentError, InvalidArgumentTypeError
from agent_core.permissions._deferred import PermissionDeferral
from agent_core.providers.base import ProviderFactory
from agent_core.providers.registry import ProviderRegistry
from agent_core.tools.registry import ToolHandler, ToolRegistry
from agent_core.types.enums import RunMode
from agent_core.types.permissions import (
    PermissionDecision,
    PermissionMode,
    PermissionRequest,
    UserQuestion,
)
from agent_core.types.runtime import AgentDefinition, InspectResult, Node, ReplayResult, UserMessage
from agent_core.types.tools import ToolDefinition

if TYPE_CHECKING:
    from agent_core._loop._output import OutputSchema
    from agent_core._mcp.manager import McpManager
    from agent_core._storage.protocol import SessionStore
    from agent_core.schedules import Clock, Delivered, Firing, Schedule, SchedulerService, ScheduleStore
    from agent_core.tools.files import FileAccess
    from agent_core.types._results import (
        CancelResult,
        CleanupResult,
        DeleteSessionResult,
        RewindResult,
        SessionSummary,
        SkillSummary,
        TaskWalSummary,
    )
    from agent_core.types.content import ContentBlock
    from agent_core.types.hooks import Hook
    from agent_core.types.inbox import InboxDelivery, InboxEntry
    from agent_core.types.mcp import McpPrompt, McpPromptMessage, McpResource
    from agent_core.types.team import TeamEvent, TeammateView
    from agent_core.types.workers import WorkerPoolView

ModelT = TypeVar("ModelT", bound=BaseModel)
PermissionCallback = Callable[[PermissionRequest], Awaitable[PermissionDecision | PermissionDeferral]]
QuestionCallback = Callable[[UserQuestion], Awaitable[str | PermissionDeferral]]
"""Answers ``internal.ask_user`` questions: the answer text, or ``DEFER`` (then ``answer_question``)."""


class AgentRuntime:
    """Runs agents on one project with one user-level configuration."""

    def __init__(
        self,
        project_dir: str | Path | None = None,
        config_path: str | Path | None = None,
        home_dir: str | Path | None = None,
        session_db_path: str | Path | None = None,
        permission_callback: PermissionCallback | None = None,
        provider_registry: ProviderRegistry | None = None,
        tool_registry: ToolRegistry | None = None,
        debug: bool = False,
        hooks: Sequence[Hook] | None = None,
        question_callback: QuestionCallback | None = None,
        file_access: FileAccess | None = None,
    ) -> None:
        """``hooks``: in-process hooks and output guardrails (``agent_core.types.hooks``; ``validation_error``
        for an entry that is not one); they run before the ``hooks.json`` hooks of the same event.
        ``file_access``: the host's hook for the built-in file tools' text reads and writes (an editor's
        buffers; :mod:`agent_core.tools.files`)."""
        self._config: LoadedConfig = load_config(
            home_dir=home_dir,
            config_path=config_path,
            project_dir=project_dir,
            session_db_path=session_db_path,
        )
        self._permission_callback = permission_callback
        self._question_callback = question_callback
        self._hooks: tuple[Hook, ...] = ()
        if hooks is not None:  # imported only when given (cold start)
            from agent_core._hooks.callbacks import check_hooks

            self._hooks = check_hooks(hooks)
        self._providers = provider_registry if provider_registry is not None else ProviderRegistry()
        self._tools = tool_registry if tool_registry is not None else ToolRegistry()
        self._debug = debug
        self._file_access = file_access
        self._code_definitions: list[AgentDefinition] = []
        self._manager: RunManager | None = None
        self._opened: OpenRuntime | None = None
        self._open_lock = asyncio.Lock()
        self._closed = False
        self._closing: asyncio.Task[None] | None = None
        self._shutdowns = TaskOwner("runtime shutdown")
        """Owns the one shutdown task; every :meth:`close` awaits it."""
        self._scheduler: SchedulerService | None = None

    # ---- lifecycle ------------------------------------------------------------------------------
    @property
    def project_dir(self) -> Path:
        return self._config.project

    @property
    def home_dir(self) -> Path:
        return self._config.home

    @property
    def config(self) -> LoadedConfig:
        """The loaded configuration: ``home``, ``project``, ``config_path`` and the validated ``settings``."""
        return self._config

    @property
    def skills_dir(self) -> Path:
        """Where the user's skills live (``<home>/skills``, one ``<name>.md`` each)."""
        from agent_core._skills.catalog import SKILLS_DIR

        return self._config.home / SKILLS_DIR

    def list_skills(self) -> list[SkillSummary]:
        """The user's valid skills, by name (read from :attr:`skills_dir` now)."""
        from agent_core._skills.catalog import SkillCatalog
        from agent_core.types._results import SkillSummary

        catalog = SkillCatalog(self._config.home)
        catalog.refresh()
        return [
            SkillSummary(name=e.name, description=e.description, path=str(e.path)) for e in catalog.entries()
        ]

    async def open(self) -> None:
        """Opens the runtime now: storage, packaged assets, registries (``async with`` does it; so does the
        first awaited call). Idempotent; a closed runtime raises ``validation_error``."""
        await self._open()

    async def __aenter__(self) -> AgentRuntime:
        await self._open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _check_open_allowed(self) -> None:
        if self._closed:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is closed")

    async def _open(self) -> RunManager:
        self._check_open_allowed()
        if self._manager is not None:
            return self._manager
        async with self._open_lock:
            self._check_open_allowed()
            if self._manager is None:
                check_credentials(self._config)  # before anything opens: no session without a key
                self._opened = await open_services(
                    self._config,
                    providers=self._providers,
                    tools=self._tools,
                    permission_callback=self._permission_callback,
                    debug=self._debug,
                    code_definitions=self._code_definitions,
                    hooks=self._hooks,
                    question_callback=self._question_callback,
                    file_access=self._file_access,
                )
                self._manager = self._opened.manager
            return self._manager

    async def close(self) -> None:
        """Stops new runs, cancels queued and active runs, closes adapters, hooks, MCP and storage."""
        if self._closing is None:
            self._closed = True
            self._closing = self._shutdowns.spawn(self._shutdown(), name="runtime shutdown")
        # every caller waits for the one shutdown; a caller cancelled meanwhile still lets it finish
        await wait_uninterrupted(self._closing)

    async def _shutdown(self) -> None:
        if self._scheduler is not None:
            await self._scheduler.stop()
        opened = self._opened
        if opened is None:
            return
        from agent_core._api.wiring import close_services

        await close_services(opened)

    # ---- registration ---------------------------------------------------------------------------
    def register_provider(self, key: str, factory: ProviderFactory) -> None:
        self._check_open_allowed()
        self._providers.register(key, factory)

    def register_tool(self, definition: ToolDefinition, handler: ToolHandler) -> None:
        self._check_open_allowed()
        self._tools.register_tool(definition, handler)

    def register_agent_definition(
        self, definition: AgentDefinition, source: Literal["code"] = "code"
    ) -> None:
        self._check_open_allowed()
        check_type("definition", definition, AgentDefinition)
        definition = definition.model_copy(update={"source": "code"})
        if self._opened is not None:
            self._opened.agents.registry.register(definition)
            return
        self._code_definitions.append(definition)

    # ---- runs ------------------------------------------------------------------------------------
    @overload
    async def start(
        self,
        message: str | UserMessage,
        session_id: str | None = None,
        mode: Literal["normal", "orchestrator"] = "normal",
        output_schema: None = None,
        output_retries: int = 2,
        model_profile: str | None = None,
        max_turns: int | None = None,
        permission_mode: PermissionMode | None = None,
        *,
        wait_if_busy: bool = True,
    ) -> RunHandle[Any]: ...
    @overload
    async def start(
        self,
        message: str | UserMessage,
        session_id: str | None = None,
        mode: Literal["normal", "orchestrator"] = "normal",
        output_schema: type[ModelT] = ...,
        output_retries: int = 2,
        model_profile: str | None = None,
        max_turns: int | None = None,
        permission_mode: PermissionMode | None = None,
        *,
        wait_if_busy: bool = True,
    ) -> RunHandle[ModelT]: ...
    @overload
    async def start(
        self,
        message: str | UserMessage,
        session_id: str | None = None,
        mode: Literal["normal", "orchestrator"] = "normal",
        output_schema: Mapping[str, Any] = ...,
        output_retries: int = 2,
        model_profile: str | None = None,
        max_turns: int | None = None,
        permission_mode: PermissionMode | None = None,
        *,
        wait_if_busy: bool = True,
    ) -> RunHandle[Any]: ...
    async def start(
        self,
        message: str | UserMessage,
        session_id: str | None = None,
        mode: Literal["normal", "orchestrator"] = "normal",
        output_schema: type[BaseModel] | Mapping[str, Any] | None = None,
        output_retries: int = 2,
        model_profile: str | None = None,
        max_turns: int | None = None,
        permission_mode: PermissionMode | None = None,
        *,
        wait_if_busy: bool = True,
    ) -> RunHandle[Any]:
        """Starts (or queues) a run and returns its handle without waiting for completion.

        With ``output_schema`` (a Pydantic model class or a JSON schema dict) the final answer is validated
        against it; an invalid answer goes back to the model at most ``output_retries`` times, then the
        run fails with ``validation_error``. ``await run.output()`` returns the validated value: an
        instance of the class (the handle is a ``RunHandle[ThatClass]``), or the JSON value for a schema
        dict.

        ``model_profile`` runs this run on ``[model]`` with the ``[model_overrides.<name>]`` table over it
        (an unknown name: ``config_error``); ``max_turns`` (>= 1) limits this run's model turns instead
        of ``[limits] max_turns`` / ``[runtime] max_turns`` (the run ends ``max_turns`` when reached).

        A session runs one run at a time, also across processes sharing the session store (``serve``
        beside ``chat`` and ``run`` on one home): a run of a busy session waits for its turn (its stream
        starts with ``run_queued``). ``wait_if_busy=False`` raises ``session_active`` instead.

        ``permission_mode`` (``default``, ``accept_edits``, ``plan``, ``dont_ask``, ``bypass``) decides
        this run's permission requests and those of its child runs (``None``: ``[permissions] mode``);
        each run may use another mode. ``bypass`` is refused (``validation_error``) unless
        ``[tools] sandbox = "bwrap"``.
        """
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
        ):
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"max_turns must be an integer >= 1, got {max_turns!r}",
                details={"argument": "max_turns"},
            )
        if model_profile is not None and not isinstance(model_profile, str):
            raise InvalidArgumentError(
                ErrorCode.validation_error, "model_profile must be the name of a [model_overrides] table"
            )
        manager = await self._open()
        mode_of_run = self._permission_mode(permission_mode)
        if isinstance(message, str):
            try:
                message = UserMessage(content=message)
            except ValidationError as exc:
                raise InvalidArgumentError(
                    ErrorCode.validation_error, f"invalid message: {exc.errors()[0]['msg']}"
                ) from exc
        elif not isinstance(message, UserMessage):
            raise InvalidArgumentTypeError(
                ErrorCode.validation_error,
                f"message must be a str or a UserMessage, not {type(message).__name__}",
            )
        if message.attachments:
            message = await _prepared_attachments(manager, message)
        try:
            run_mode = RunMode(mode)
        except ValueError as exc:
            raise InvalidArgumentError(ErrorCode.validation_error, f"unknown mode {mode!r}") from exc
        if manager.closing:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is closing")
        schema: OutputSchema | None = None
        if output_schema is not None:
            from agent_core._loop._output import OutputSchema  # imported only when used

            if isinstance(output_retries, bool) or not isinstance(output_retries, int) or output_retries < 0:
                raise InvalidArgumentError(
                    ErrorCode.validation_error,
                    f"output_retries must be an integer >= 0, got {output_retries!r}",
                    details={"argument": "output_retries"},
                )
            schema = OutputSchema(output_schema)
        state = await manager.start(
            message,
            session_id,
            run_mode,
            output_schema=schema,
            output_retries=output_retries if schema else None,
            model_profile=model_profile,
            max_turns=max_turns,
            wait_if_busy=wait_if_busy,
            permission_mode=mode_of_run,
        )
        return RunHandle(self, state)

    def _permission_mode(self, value: object) -> PermissionMode:
        """A run's permission mode: ``value`` checked, else ``[permissions] mode``."""
        from agent_core.permissions._modes import check_mode

        settings = self._config.settings
        if value is None:
            return settings.permissions.mode
        try:
            mode = check_mode(value)
        except ValueError as exc:
            raise InvalidArgumentError(
                ErrorCode.validation_error, str(exc), details={"argument": "permission_mode"}
            ) from exc
        if mode == "bypass" and settings.tools.sandbox != "bwrap":
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                'permission mode "bypass" needs the command sandbox: set [tools] sandbox = "bwrap" in '
                f"{self._config.config_path} (or choose another mode)",
                details={"argument": "permission_mode", "config_key": "tools.sandbox"},
            )
        return mode

    async def create_session(self, mode: Literal["normal", "orchestrator"] = "normal") -> str:
        """Creates an empty session of this project (no run yet) and returns its id; ``start(message,
        session_id=...)`` runs in it. For hosts that name a conversation before its first message (an ACP
        editor's ``session/new``); it is listed by :meth:`list_sessions` with an empty title."""
        manager = await self._open()
        try:
            run_mode = RunMode(mode)
        except ValueError as exc:
            raise InvalidArgumentError(ErrorCode.validation_error, f"unknown mode {mode!r}") from exc
        if manager.closing:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is closing")
        if run_mode == RunMode.orchestrator and manager.features.tasks is not None:
            await manager.features.tasks.check()  # as start() does before an orchestrator session
        session = await manager.new_session(run_mode)
        return session.session_id

    async def _cancel_run(self, state: RunState) -> CancelResult:
        if self._manager is None:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is not open")
        return await self._manager.cancel(state)

    async def _inspect_child(
        self, parent: RunState, child_run_id: str, include_sensitive: bool
    ) -> InspectResult:
        manager = await self._open()
        from agent_core._api import replay  # imported on first use: not needed to run agents

        return await replay.inspect_child(manager, parent, child_run_id, include_sensitive)

    async def switch_node(self, session_id: str, node_id: str) -> Node:
        manager = await self._open()
        from agent_core._api import replay  # imported on first use: not needed to run agents

        return await replay.switch_node(manager, session_id, node_id)

    async def rewind(
        self, session_id: str, node_id: str, files: bool = True, conversation: bool = True
    ) -> RewindResult:
        """Puts the session back to just after ``node_id``: with ``files`` every file a tool call of the
        session changed after that node gets its earlier content back (files created are removed), using
        the checkpoints taken around write/edit/command calls; with ``conversation`` the active path ends
        at ``node_id`` (the later nodes stay in the tree as a branch). Per session: changes of other
        sessions are never undone.

        Refused as a whole, nothing changed: a queued or running run (``session_active``); a file changed
        since by someone else or outside this session between its calls (``path_conflict``, the files in
        ``details.conflicts``); an unknown node, or for ``conversation`` a child agent's or partial node
        (``validation_error``). Protected paths (``.git``, ``.soong-agent``, credential files), paths
        below a symlinked directory or outside the write roots, and contents never captured (sensitive,
        too large) are left alone and listed in ``RewindResult.skipped``."""
        manager = await self._open()
        from agent_core._api import rewind  # imported on first use: not needed to run agents

        return await rewind.rewind(manager, session_id, node_id, files=files, conversation=conversation)

    async def answer_permission(
        self,
        request_id: str,
        decision: PermissionDecision | Literal["allow_once", "allow_for_session", "deny"],
    ) -> None:
        """Answers a permission request whose callback returned ``DEFER`` (``agent_core.permissions``).

        Callable from any task of the runtime's event loop; the first answer wins. A request that is not
        pending (unknown, already answered, or abandoned because its run stopped) → ``validation_error``.
        """
        manager = await self._open()
        if isinstance(decision, str):
            try:
                decision = PermissionDecision(decision=decision)
            except ValidationError as exc:
                raise InvalidArgumentError(
                    ErrorCode.validation_error, f"invalid decision {decision!r}"
                ) from exc
        manager.services.gate.deferred.answer(request_id, decision)

    async def answer_question(self, request_id: str, answer: str) -> None:
        """Answers a question the model asked with ``internal.ask_user`` whose question callback returned
        ``DEFER`` (``agent_core.permissions``): ``answer`` is any non-empty text (an option or the user's
        own words). Callable from any task of the runtime's event loop; the first answer wins. A question
        that is not pending (unknown, already answered, or abandoned because its run stopped) →
        ``validation_error``."""
        manager = await self._open()
        manager.services.questions.answer(request_id, answer)

    # ---- the inbox (docs/teams.md) --------------------------------------------------------------
    async def deliver(
        self,
        session_id: str,
        agent_id: str | None,
        entry: InboxEntry | Mapping[str, Any],
        *,
        wake: bool = True,
    ) -> InboxDelivery:
        """Delivers ``entry`` to the inbox of ``agent_id`` (``None``: the session's root agent).

        ``entry`` is an :class:`~agent_core.types.inbox.InboxEntry` or a mapping with ``kind``
        (``message``, ``request``, ``response``, ``job_result``, ``schedule``, ``channel``), ``from``,
        ``content`` and optionally ``request_id`` and ``metadata``. A live run of the agent reads it before
        its next model step as part of one ``<inbox>`` note; an idle session root agent is woken with a
        run for it (``wake=False``: it waits for the next run). Overflow of ``[agents]
        inbox_max_entries`` is a ``validation_error`` and nothing is stored.
        """
        manager = await self._open()
        if manager.closing:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is closing")
        delivery = await self._features().inbox.deliver(session_id, agent_id, entry, wake=wake)
        assert delivery is not None  # no guard: always delivered or raised
        return delivery

    async def team(self, session_id: str) -> list[TeammateView]:
        """The teammates of the team ``session_id`` belongs to (as its lead, or as a teammate), oldest
        first: name, ids, state (``working`` / ``idle`` / ``stopped``) and unread inbox entries. Empty when
        teams are off (``[agents] max_teammates_per_session = 0``)."""
        manager = await self._open()
        await manager.get_session(session_id)  # unknown -> validation_error
        team = self._features().team
        return await team.views(session_id) if team is not None else []

    async def watch_team(self, session_id: str) -> AsyncIterator[TeamEvent]:
        """The live events of the runs of ``session_id``'s teammates in this runtime, each tagged with the
        teammate's name, from now on (a surface shows their activity under their names); the lead's own
        runs its inbox woke come as ``"lead"``. Ends when the runtime closes."""
        await self._open()
        team = self._features().team
        if team is None:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                "teams are off: set [agents] max_teammates_per_session to a positive number",
                details={"config_key": "agents.max_teammates_per_session"},
            )
        async for item in team.watch(session_id):
            yield item

    def run_handle(self, run_id: str) -> RunHandle:
        """The handle of a root run this runtime started (a wake-up run of a delivery, a teammate's run)
        that is live or ended recently; ``validation_error`` when it is not known here."""
        state = self._manager_or_raise().root_run(run_id)
        if state is None:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"run {run_id!r} is not a live or recent root run of this runtime",
                details={"run_id": run_id},
            )
        return RunHandle(self, state)

    async def list_worker_pools(self, session_id: str | None = None) -> list[WorkerPoolView]:
        """Every configured worker pool (config order) with its validity and its workers' state: in
        ``session_id`` when given, else in any session (``agent_core._orchestrator.views``)."""
        manager = await self._open()
        from agent_core._orchestrator.views import worker_pools_view  # imported on first use

        return await worker_pools_view(manager, session_id)

    # ---- MCP resources and prompts (docs/hooks-and-mcp.md) --------------------------------------
    def _mcp(self, manager: RunManager) -> McpManager:
        mcp = manager.services.mcp
        if mcp is None:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"no MCP servers are configured ({self.home_dir / 'mcp.json'} does not exist)",
            )
        return mcp

    async def mcp_resources(self, server_id: str) -> list[McpResource]:
        """The resources and resource templates of one MCP server (connected when needed)."""
        from agent_core.types.mcp import McpResource

        mcp = self._mcp(await self._open())
        return [
            McpResource(
                server_id=server_id,
                uri=r.uri,
                name=r.name,
                description=r.description,
                mime_type=r.mime_type,
                template=r.template,
            )
            for r in await mcp.list_resources(server_id)
        ]

    async def read_mcp_resource(self, server_id: str, uri: str) -> list[ContentBlock]:
        """One resource's contents as content blocks for a user message (text; binary contents are
        described, not attached); what ``chat`` attaches for an ``@server:uri`` mention."""
        mcp = self._mcp(await self._open())
        return await mcp.read_resource_blocks(server_id, uri)

    async def mcp_prompts(self) -> list[McpPrompt]:
        """The prompts of every configured MCP server (a server that cannot be reached lists none)."""
        from agent_core.types.mcp import McpPrompt, McpPromptArgument

        manager = await self._open()
        if manager.services.mcp is None:
            return []
        found = await manager.services.mcp.list_prompts()
        return [
            McpPrompt(
                server_id=server_id,
                name=p.name,
                description=p.description,
                arguments=[
                    McpPromptArgument(name=a.name, description=a.description, required=a.required)
                    for a in p.arguments
                ],
            )
            for server_id, prompts in found.items()
            for p in prompts
        ]

    async def get_mcp_prompt(
        self, server_id: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[McpPromptMessage]:
        """The messages of one MCP prompt, filled in by its server with ``arguments``."""
        from agent_core.types.mcp import McpPromptMessage

        mcp = self._mcp(await self._open())
        messages = await mcp.get_prompt(server_id, name, arguments or {})
        return [McpPromptMessage(role=m.role, text=m.text) for m in messages]

    # ---- replay / inspect -----------------------------------------------------------------------
    async def replay_session(
        self,
        session_id: str,
        from_seq: int | None = None,
        to_seq: int | None = None,
        include_sensitive: bool = False,
    ) -> ReplayResult:
        manager = await self._open()
        from agent_core._api import replay  # imported on first use: not needed to run agents

        return await replay.replay_session(manager, session_id, from_seq, to_seq, include_sensitive)

    async def replay_run(self, run_id: str, include_sensitive: bool = False) -> ReplayResult:
        manager = await self._open()
        from agent_core._api import replay  # imported on first use: not needed to run agents

        return await replay.replay_run(manager, run_id, include_sensitive)

    async def get_node_path(self, node_id: str) -> list[Node]:
        manager = await self._open()
        from agent_core._api import replay  # imported on first use: not needed to run agents

        return await replay.get_node_path(manager, node_id)

    # ---- session list and fork (docs/runs.md#branches-and-forks, docs/serve.md) ----------------------------
    async def list_sessions(self, limit: int | None = None) -> list[SessionSummary]:
        """Sessions of this project, most recently updated first (title, mode, latest run status)."""
        manager = await self._open()
        from agent_core._api import _sessions  # imported on first use: not needed to run agents

        return await _sessions.list_sessions(manager, limit)

    async def fork_session(self, session_id: str, node_id: str) -> str:
        """Copies the root path down to ``node_id`` into a new session (active leaf: the copy of
        ``node_id``); returns the new session id. The source session is unchanged."""
        manager = await self._open()
        from agent_core._api import _sessions  # imported on first use: not needed to run agents

        return await _sessions.fork_session(manager, session_id, node_id)

    # ---- deletion and cleanup -------------------------------------------------------------------
    async def delete_session(self, session_id: str) -> DeleteSessionResult:
        manager = await self._open()
        from agent_core._api import maintenance  # imported on first use: not needed to run agents

        return await maintenance.delete_session(manager, session_id)

    async def read_artifact(self, artifact_id: str) -> tuple[bytes, str]:
        """An artifact's bytes and MIME type (an image or PDF a message carries, a tool's output);
        unknown id or missing file → ``FileOperationError`` (``file_not_found``)."""
        manager = await self._open()
        record = await manager.services.artifacts.get(artifact_id)
        return await manager.services.artifacts.read_bytes(
            artifact_id
        ), record.mime_type or "application/octet-stream"

    async def delete_artifact(self, artifact_id: str) -> CleanupResult:
        manager = await self._open()
        return await manager.services.artifacts.delete(artifact_id)

    async def cleanup_project_tasks(
        self,
        project: str | Path,
        dry_run: bool = True,
        include_failed: bool = False,
        include_cancelled: bool = False,
        older_than: datetime | None = None,
    ) -> CleanupResult:
        manager = await self._open()
        from agent_core._api import maintenance  # imported on first use: not needed to run agents

        return await maintenance.cleanup_project_tasks(
            manager, project, dry_run, include_failed, include_cancelled, older_than
        )

    async def cleanup_artifacts(
        self,
        session_id: str | None = None,
        dry_run: bool = True,
        include_all: bool = False,
        older_than: datetime | None = None,
        max_bytes: int | None = None,
    ) -> CleanupResult:
        manager = await self._open()
        from agent_core._api import maintenance  # imported on first use: not needed to run agents

        return await maintenance.cleanup_artifacts(
            manager, session_id, dry_run, include_all, older_than, max_bytes
        )

    # ---- schedules (docs/jobs-and-schedules.md#schedules) --------------------------------------------------
    def scheduler(
        self,
        *,
        clock: Clock | None = None,
        poll_interval_s: float | None = None,
        on_fired: Callable[[Firing], None] | None = None,
    ) -> SchedulerService:
        """This runtime's scheduler service for its project (created on first call; ``start``/``stop``).

        ``clock`` (and the other options) can only be chosen by the first call; the service uses it for
        due times of schedules added through this runtime too. Closing the runtime stops the service.
        """
        self._check_open_allowed()
        if self._scheduler is None:
            from agent_core.schedules import SchedulerService, ScheduleStore
            from agent_core.schedules._service import DEFAULT_POLL_INTERVAL_S

            runtime = self

            async def start_run(schedule: Schedule) -> Delivered:
                return await runtime._deliver_scheduled(schedule)

            self._scheduler = SchedulerService(
                ScheduleStore(self._storage),
                self.project_dir,
                start_run,
                clock=clock,
                poll_interval_s=poll_interval_s or DEFAULT_POLL_INTERVAL_S,
                on_fired=on_fired,
            )
        elif clock is not None and clock is not self._scheduler.clock:
            raise InvalidArgumentError(
                ErrorCode.validation_error, "this runtime's scheduler already exists with another clock"
            )
        return self._scheduler

    async def _storage(self) -> SessionStore:
        return (await self._open()).services.storage

    async def _schedule_store(self) -> ScheduleStore:
        from agent_core.schedules import ScheduleStore

        return ScheduleStore(self._storage)

    async def add_schedule(self, cron: str, message: str, session_id: str | None = None) -> str:
        """Stores a cron schedule of this project; each firing sends ``message`` as a user message to
        ``session_id`` (or to a new session when ``None``). Returns the schedule id."""
        store = await self._schedule_store()
        if session_id is not None:
            await self._manager_or_raise().get_session(session_id)  # unknown -> validation_error
        schedule = await store.add(
            cron=cron,
            message=message,
            project=self.project_dir,
            session_id=session_id,
            now=self.scheduler().clock.now(),
        )
        return schedule.schedule_id

    async def list_schedules(self, all_projects: bool = False) -> list[Schedule]:
        """This project's schedules (every project's with ``all_projects``), oldest first."""
        store = await self._schedule_store()
        return await store.list(None if all_projects else self.project_dir)

    async def remove_schedule(self, schedule_id: str) -> None:
        """Deletes a schedule (``validation_error`` when unknown)."""
        store = await self._schedule_store()
        await store.remove(schedule_id)

    async def _deliver_scheduled(self, schedule: Schedule) -> Delivered:
        """A firing: the schedule's message as a ``schedule`` inbox entry of its session (a new session
        when it names none), which wakes it."""
        from agent_core.schedules import Delivered

        manager = await self._open()
        if manager.features.engine is not None:  # no wake-up runs there: the firing is a user message
            message = UserMessage(content=schedule.message, metadata={"schedule_id": schedule.schedule_id})
            mode: Literal["normal", "orchestrator"] = "normal"
            if schedule.session_id is not None:
                session = await manager.get_session(schedule.session_id)
                mode = "orchestrator" if session.mode == RunMode.orchestrator else "normal"
            handle = await self.start(message, session_id=schedule.session_id, mode=mode)
            return Delivered(session_id=handle.session_id, entry_id="", run=handle)
        if schedule.session_id is not None:
            session_id = (await manager.get_session(schedule.session_id)).session_id
        else:
            session_id = (await manager.new_session(RunMode.normal)).session_id
        entry = {
            "kind": "schedule",
            "from": f"schedule:{schedule.schedule_id}",
            "content": schedule.message,
            "metadata": {"schedule_id": schedule.schedule_id},
        }
        delivery = await self.deliver(session_id, None, entry)
        state = manager.root_run(delivery.run_id) if delivery.run_id else None
        run = RunHandle(self, state) if state is not None else None
        return Delivered(session_id=session_id, entry_id=delivery.entry.entry_id or "", run=run)

    # ---- what the process runs and stores (serve, chat, workers) -----------------------------------
    @property
    def store(self) -> SessionStore:
        """The open runtime's session store (:mod:`agent_core.store`): sessions, runs, nodes and events as
        stored, for readers that need more than replay (``soong-agent serve`` follows runs through it).
        Writes bypass the runtime's bookkeeping: use the runtime's methods to change state. Raises
        ``validation_error`` before the runtime is open."""
        return self._manager_or_raise().services.storage

    def live_runs(self) -> list[RunHandle[Any]]:
        """Handles of the runs this runtime is running now (queued, pending or running; roots and their
        child runs), oldest first. Empty before the runtime is open."""
        manager = self._manager
        return [RunHandle(self, state) for state in manager.runs.values()] if manager is not None else []

    def live_run(self, run_id: str) -> RunHandle[Any] | None:
        """The handle of a live run of this runtime (root or child), ``None`` when it is not live here."""
        manager = self._manager
        state = manager.runs.get(run_id) if manager is not None else None
        return RunHandle(self, state) if state is not None else None

    def pending_permission_requests(self) -> list[str]:
        """Ids of the permission requests a callback deferred (``agent_core.permissions.DEFER``) that still
        wait for :meth:`answer_permission` (a request is dropped when its run stops waiting)."""
        manager = self._manager
        return manager.services.gate.deferred.pending_ids() if manager is not None else []

    def watch_permission_request(self, request_id: str, callback: Callable[[bool], None]) -> bool:
        """Calls ``callback(answered)`` once a deferred request settles: ``True`` when answered, ``False``
        when abandoned (its run stopped waiting). Returns ``False`` (and never calls) when the request is
        not pending."""
        manager = self._manager
        return manager.services.gate.deferred.watch(request_id, callback) if manager is not None else False

    def pending_questions(self) -> list[str]:
        """Ids of the ``internal.ask_user`` questions a question callback deferred that still wait for
        :meth:`answer_question` (a question is dropped when its run stops waiting)."""
        manager = self._manager
        return manager.services.questions.deferred.pending_ids() if manager is not None else []

    def watch_question(self, request_id: str, callback: Callable[[bool], None]) -> bool:
        """Calls ``callback(answered)`` once a deferred question settles: ``True`` when answered, ``False``
        when abandoned (its run stopped waiting). Returns ``False`` (and never calls) when the question is
        not pending."""
        manager = self._manager
        return (
            manager.services.questions.deferred.watch(request_id, callback) if manager is not None else False
        )

    async def list_task_wals(self, session_id: str) -> list[TaskWalSummary]:
        """The Task WALs of a session, by name (a session without Tasks has none)."""
        from agent_core._api import task_wals  # imported on first use: not needed to run agents

        return await task_wals.list_wals(await self._open(), session_id)

    async def export_task_wal(self, session_id: str, name: str | None = None) -> tuple[TaskWalSummary, bytes]:
        """One Task WAL of a session in its JSONL file form: ``name`` (the file name, with or without
        ``.wal.jsonl``, or a Task id), or the session's only WAL. ``task_not_found`` when there is no such
        WAL (``details["wals"]`` lists the names), ``validation_error`` when ``name`` is omitted and the
        session has several."""
        from agent_core._api import task_wals  # imported on first use: not needed to run agents

        return await task_wals.export(await self._open(), session_id, name)

    def _manager_or_raise(self) -> RunManager:
        if self._manager is None:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is not open")
        return self._manager

    def _features(self) -> OpenRuntime:
        """The open runtime's typed features (internal; tests and surfaces of this package)."""
        if self._opened is None:
            raise InvalidArgumentError(ErrorCode.validation_error, "this AgentRuntime is not open")
        return self._opened


async def _prepared_attachments(manager: RunManager, message: UserMessage) -> UserMessage:
    """The message with its attachments checked and brought within the main model's limits (images
    downscaled, ``_media.py``); an unreadable or too large one is a ``validation_error`` naming the limit."""
    import asyncio

    from agent_core._media import MediaError, MediaLimits, prepare_media
    from agent_core.config._profiles import resolve_purpose_model
    from agent_core.types.runtime import Attachment

    limits = MediaLimits.of(resolve_purpose_model(manager.services.config, "main"))
    prepared: list[Attachment] = []
    for index, attachment in enumerate(message.attachments):
        name = attachment.filename or f"attachment {index + 1}"
        try:
            ready = await asyncio.to_thread(
                prepare_media, attachment.data, limits, mime_hint=attachment.mime_type, name=name
            )
        except MediaError as exc:
            raise InvalidArgumentError(
                ErrorCode.validation_error, str(exc), details={"attachment": name}
            ) from exc
        prepared.append(attachment.model_copy(update={"data": ready.data, "mime_type": ready.mime_type}))
    return message.model_copy(update={"attachments": prepared})
