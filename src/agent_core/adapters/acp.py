"""soong-agent as an Agent Client Protocol agent (``soong-agent acp``), for editors such as Zed.

Built on the official SDK (``agent-client-protocol``, the ``acp`` extra; imported only here). Contract:

- ``initialize``: protocol version 1; capabilities ``loadSession``, ``session/list``, prompts with embedded
  context (no images or audio); no authentication (the model key comes from the user's configuration).
  The client's ``fs.readTextFile`` / ``fs.writeTextFile`` capabilities are remembered.
- Sessions are soong-agent sessions: ``session/new`` creates one (``AgentRuntime.create_session``; its id is
  the ACP session id), ``session/load`` reopens one and replays its active path as ``session/update``
  notifications (user and agent messages, tool calls with their final status, the Task board's plan)
  before it answers; ``session/list`` lists the project's sessions. A session's project is ``--path``
  when given, else the ``cwd`` of ``session/new`` / ``session/load`` (one runtime per project).
  MCP servers the client passes are not used (the runtime's come from ``mcp.json``): a warning on stderr.
- ``session/prompt`` starts a run with the prompt's text (a ``resource_link`` becomes a mention of its
  URI, an embedded text resource a ``<context>`` block) and streams it (:mod:`._acp_updates`): text,
  reasoning, tool calls with diffs for edits, the Task board as a plan, context usage. It answers with
  the stop reason: ``end_turn`` (completed), ``max_turn_requests`` (``max_turns`` / ``limit_reached``),
  ``max_tokens``, ``cancelled``; a failed run is a JSON-RPC error carrying the run's error line. The
  answer's ``usage`` is the run's (sub-agents included).
- ``session/cancel`` cancels the session's running run (its prompt answers ``cancelled``).
- Session modes are the permission modes (:mod:`._acp_modes`): ``session/new`` and ``session/load`` offer
  ``default``, ``accept_edits``, ``plan``, ``dont_ask`` (and ``bypass`` when the command sandbox is on),
  the current one being ``[permissions] mode``; ``session/set_mode`` sets the mode of the session's next
  prompts (an unknown or refused mode is an invalid-params error).
- A permission request of a run of an ACP session becomes ``session/request_permission`` with the options
  ``allow_once`` / ``allow_always`` (= allow for the session; offered when the runtime allows it) /
  ``reject_once``, the tool call's title, kind, locations and change preview as a diff. The request is
  deferred (``agent_core.permissions.DEFER``), so it has no timeout; a cancelled answer denies.
- File reads and writes of the built-in tools go through the client's ``fs/read_text_file`` and
  ``fs/write_text_file`` when it offers them (unsaved buffers are seen, edits land in the editor), through
  the runtime's :class:`~agent_core.tools.files.FileAccess` hook; otherwise the disk is used. Every write
  is shown as a ``diff`` on its tool call either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Literal, cast

import acp
from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    AudioContentBlock,
    ClientCapabilities,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ResourceContentBlock,
    SessionCapabilities,
    SessionInfo,
    SessionListCapabilities,
    SetSessionModeResponse,
    TextContentBlock,
    TextResourceContents,
    ToolCallLocation,
    ToolCallUpdate,
    Usage,
)

from agent_core import AgentCoreError, AgentRuntime, RunHandle, TextBlock, UserMessage
from agent_core._concurrency import TaskOwner
from agent_core.adapters._acp_modes import configured_modes, mode_state, parse_mode
from agent_core.adapters._acp_updates import TurnUpdates, Update, history_updates, permission_content
from agent_core.adapters._task_plan import PlanBoard
from agent_core.permissions import DEFER, PermissionDeferral
from agent_core.tools.files import FileRead, FileWrite
from agent_core.types.permissions import PermissionDecision, PermissionMode, PermissionRequest

log = logging.getLogger("agent_core.adapters.acp")

PromptBlock = (
    TextContentBlock
    | ImageContentBlock
    | AudioContentBlock
    | ResourceContentBlock
    | EmbeddedResourceContentBlock
)
PermissionCallback = Callable[[PermissionRequest], Awaitable[PermissionDecision | PermissionDeferral]]
RuntimeFactory = Callable[[Path | None, PermissionCallback, "EditorFiles"], AgentRuntime]
"""Builds the runtime of a project (``None``: the current directory) with the adapter's permission
callback and file access hook (default: ``AgentRuntime(project_dir, permission_callback=..., file_access=...)``)."""

OPTION_ALLOW_ONCE, OPTION_ALLOW_ALWAYS, OPTION_REJECT_ONCE = "allow_once", "allow_always", "reject_once"
_DECISIONS: dict[str, Literal["allow_once", "allow_for_session", "deny"]] = {
    OPTION_ALLOW_ONCE: "allow_once",
    OPTION_ALLOW_ALWAYS: "allow_for_session",
    OPTION_REJECT_ONCE: "deny",
}
_STOP_REASONS: dict[str, Literal["end_turn", "max_tokens", "max_turn_requests"]] = {
    "max_turns": "max_turn_requests",
    "limit_reached": "max_turn_requests",
    "max_output_tokens_recovery": "max_tokens",
}


def _version() -> str:
    try:
        return metadata.version("soong-agent")
    except metadata.PackageNotFoundError:
        return "0"


def _request_error(exc: AgentCoreError) -> RequestError:
    code = -32602 if exc.code.value in ("validation_error", "config_error") else -32603
    return RequestError(code, f"{exc.code.value}: {exc.message}")


@dataclass(eq=False, slots=True)
class _Session:
    """One ACP session: a soong-agent session of ``runtime`` and its live turn."""

    session_id: str
    runtime: AgentRuntime
    mode: Literal["normal", "orchestrator"]
    permission_mode: PermissionMode = "default"
    sandboxed: bool = False
    """Whether ``bypass`` may be chosen (the command sandbox is on)."""
    board: PlanBoard = field(default_factory=PlanBoard)
    run: RunHandle | None = None
    turn: TurnUpdates | None = None
    asking: TaskOwner = field(default_factory=lambda: TaskOwner("acp permission questions"))


def prompt_message(blocks: Sequence[PromptBlock]) -> UserMessage:
    """The user message of an ACP prompt (see the module docstring); images and audio are refused."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"@{block.uri}")
        elif isinstance(block, EmbeddedResourceContentBlock):
            resource = block.resource
            if not isinstance(resource, TextResourceContents):
                raise RequestError(-32602, f"binary resources are not supported ({resource.uri})")
            body = resource.text if resource.text.endswith("\n") else resource.text + "\n"
            parts.append(f'<context uri="{resource.uri}">\n{body}</context>')
        else:
            raise RequestError(-32602, f"{block.type} prompts are not supported (text and resources are)")
    text = "\n".join(p for p in parts if p)
    if not text.strip():
        raise RequestError(-32602, "the prompt has no text")
    return UserMessage(content=[TextBlock(text=text)])


class EditorFiles:
    """The runtime's :class:`~agent_core.tools.files.FileAccess` hook for ACP sessions: the client's
    ``fs/*`` methods when it offers them; every write is shown as a diff on its tool call."""

    def __init__(self, agent: SoongAcpAgent) -> None:
        self._agent = agent

    async def read_text(self, read: FileRead) -> str | None:
        agent = self._agent
        if read.session_id not in agent.sessions or not agent.client_reads:
            return None
        response = await agent.client.read_text_file(session_id=read.session_id, path=str(read.path))
        return response.content

    async def write_text(self, write: FileWrite) -> bool:
        agent = self._agent
        session = agent.sessions.get(write.session_id)
        if session is None:
            return False
        if session.turn is not None:
            await agent.send(session.session_id, session.turn.file_written(write))
        if not agent.client_writes:
            return False
        await agent.client.write_text_file(
            session_id=write.session_id, path=str(write.path), content=write.text
        )
        return True


class SoongAcpAgent:
    """The ACP agent (the SDK's ``acp.Agent`` protocol); see the module docstring.

    ``project_dir`` pins every session to one project (``--path``); ``runtime_factory`` builds a project's
    runtime (tests and embedding applications); ``mode`` is the mode of new sessions (``--orchestrator``:
    the Task board and workers; a loaded session keeps its own). Call :meth:`close` when the connection ends."""

    def __init__(
        self,
        project_dir: str | Path | None = None,
        runtime_factory: RuntimeFactory | None = None,
        *,
        mode: Literal["normal", "orchestrator"] = "normal",
    ) -> None:
        self.mode: Literal["normal", "orchestrator"] = mode
        self._pinned = Path(project_dir) if project_dir is not None else None
        self._factory = runtime_factory or _default_runtime
        self._runtimes: dict[Path, AgentRuntime] = {}
        self._open_lock = asyncio.Lock()
        self._client: acp.Client | None = None
        self.files = EditorFiles(self)
        self.sessions: dict[str, _Session] = {}
        self.client_reads = False
        self.client_writes = False

    # ---- connection ----------------------------------------------------------------------------------
    def on_connect(self, conn: acp.Client) -> None:
        self._client = conn

    @property
    def client(self) -> acp.Client:
        if self._client is None:
            raise RuntimeError("the ACP agent is not connected")
        return self._client

    async def send(self, session_id: str, updates: Sequence[Update]) -> None:
        for update in updates:
            await self.client.session_update(session_id=session_id, update=update)

    async def _open(self, project: Path | None) -> AgentRuntime:
        resolved = (project or Path.cwd()).resolve()
        async with self._open_lock:
            runtime = self._runtimes.get(resolved)
            if runtime is None:
                runtime = self._factory(project, self.permission, self.files)
                try:
                    await runtime.__aenter__()
                except BaseException:
                    with contextlib.suppress(Exception):
                        await runtime.close()
                    raise
                self._runtimes[resolved] = runtime
            return runtime

    async def open_pinned(self) -> AgentRuntime:
        """Opens the runtime of ``project_dir`` (or the current directory) now; a configuration or storage
        error raises ``AgentCoreError``."""
        return await self._open(self._pinned)

    async def runtime_for(self, cwd: str | None) -> AgentRuntime:
        """The open runtime of a session's project (``project_dir``, else ``cwd``)."""
        try:
            return await self._open(self._pinned or (Path(cwd) if cwd else None))
        except AgentCoreError as exc:
            raise _request_error(exc) from exc

    async def close(self) -> None:
        """Cancels what runs and closes every runtime."""
        for session in self.sessions.values():
            await session.asking.aclose()
        runtimes, self._runtimes = list(self._runtimes.values()), {}
        for runtime in runtimes:
            with contextlib.suppress(Exception):
                await runtime.close()

    # ---- setup ----------------------------------------------------------------------------------------
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: ClientCapabilities | None = None,
        client_info: Implementation | None = None,
        **kwargs: Any,
    ) -> InitializeResponse:
        fs = client_capabilities.fs if client_capabilities is not None else None
        self.client_reads = bool(fs and fs.read_text_file)
        self.client_writes = bool(fs and fs.write_text_file)
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(embedded_context=True),
                session_capabilities=SessionCapabilities(list=SessionListCapabilities()),
            ),
            agent_info=Implementation(name="soong-agent", title="soong-agent", version=_version()),
            auth_methods=[],
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    def _warn_mcp(self, servers: Sequence[Any] | None) -> None:
        if servers:
            names = ", ".join(str(getattr(s, "name", "?")) for s in servers)
            log.warning(
                "MCP servers passed by the client are not used (configure them in mcp.json): %s", names
            )

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        self._warn_mcp(mcp_servers)
        runtime = await self.runtime_for(cwd)
        try:
            session_id = await runtime.create_session(self.mode)
        except AgentCoreError as exc:
            raise _request_error(exc) from exc
        session = self._with_modes(_Session(session_id, runtime, self.mode))
        self.sessions[session_id] = session
        return NewSessionResponse(
            session_id=session_id, modes=mode_state(session.permission_mode, sandboxed=session.sandboxed)
        )

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: Sequence[Any] | None = None, **kwargs: Any
    ) -> LoadSessionResponse:
        self._warn_mcp(mcp_servers)
        runtime = await self.runtime_for(cwd)
        try:
            summary = next((s for s in await runtime.list_sessions() if s.session_id == session_id), None)
            if summary is None:
                raise RequestError(-32602, f"unknown session {session_id!r} in project {runtime.project_dir}")
            session = self._with_modes(_Session(session_id, runtime, summary.mode))
            path = await runtime.get_node_path(summary.active_node_id) if summary.active_node_id else []
            replay = await runtime.replay_session(session_id)
        except AgentCoreError as exc:
            raise _request_error(exc) from exc
        for view in replay.tasks:
            if view.task is not None:
                session.board.seed(view.task)
        self.sessions[session_id] = session
        await self.send(session_id, history_updates(path, runtime.project_dir))
        if session.board:
            entries = [acp.plan_entry(text, status=status) for text, status in session.board.entries()]
            await self.send(session_id, [acp.update_plan(entries)])
        return LoadSessionResponse(modes=mode_state(session.permission_mode, sandboxed=session.sandboxed))

    def _with_modes(self, session: _Session) -> _Session:
        """``session`` with the configured permission mode (a configuration error was raised at open)."""
        runtime = session.runtime
        session.permission_mode, session.sandboxed = configured_modes(
            str(runtime.project_dir), str(runtime.home_dir)
        )
        return session

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> SetSessionModeResponse:
        """The permission mode of the session's next prompts (a running prompt keeps its own)."""
        session = self._session(session_id)
        mode = parse_mode(mode_id, sandboxed=session.sandboxed)
        if mode is None:
            offered = ", ".join(
                m.id for m in mode_state("default", sandboxed=session.sandboxed).available_modes
            )
            hint = ' (bypass needs [tools] sandbox = "bwrap")' if mode_id == "bypass" else ""
            raise RequestError(-32602, f"unknown mode {mode_id!r}{hint}; offered: {offered}")
        session.permission_mode = mode
        return SetSessionModeResponse()

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        runtime = await self.runtime_for(cwd)
        try:
            summaries = await runtime.list_sessions()
        except AgentCoreError as exc:
            raise _request_error(exc) from exc
        project = str(runtime.project_dir)
        return ListSessionsResponse(
            sessions=[
                SessionInfo(
                    session_id=s.session_id,
                    cwd=project,
                    title=s.title or None,
                    updated_at=s.updated_at.isoformat(),
                )
                for s in summaries
            ]
        )

    # ---- prompts --------------------------------------------------------------------------------------
    def _session(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError(-32602, f"unknown session {session_id!r}: create or load it first")
        return session

    async def prompt(self, prompt: list[PromptBlock], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        message = prompt_message(prompt)
        runtime = session.runtime
        try:
            run = await runtime.start(
                message, session_id=session_id, mode=session.mode, permission_mode=session.permission_mode
            )
        except AgentCoreError as exc:
            raise _request_error(exc) from exc
        turn = TurnUpdates(run.run_id, runtime.project_dir, session.board)
        session.run, session.turn = run, turn
        try:
            async for event in run.events(debug=True, include_children=True):
                await self.send(session_id, turn.updates(event))
            await run.wait()
        finally:
            session.run = session.turn = None
            for task in session.asking.tasks:  # questions of this run nobody can answer any more
                task.cancel()  # awaited by the owner when the session closes
        return await self._answer(runtime, run, turn)

    async def _answer(self, runtime: AgentRuntime, run: RunHandle, turn: TurnUpdates) -> PromptResponse:
        usage: Usage | None = None
        with contextlib.suppress(AgentCoreError):  # the run's usage, its sub-agents' included
            totals = (await runtime.replay_run(run.run_id)).usage
            if totals is not None:
                usage = Usage(
                    total_tokens=totals.total_tokens,
                    input_tokens=totals.input_tokens,
                    output_tokens=totals.output_tokens,
                    thought_tokens=totals.reasoning_tokens,
                    cached_read_tokens=totals.cache_read_tokens,
                    cached_write_tokens=totals.cache_write_tokens,
                )
        status = run.status.value
        if status == "cancelled":
            return PromptResponse(stop_reason="cancelled", usage=usage)
        if status != "completed":
            error = run.error
            detail = f"{error.code.value}: {error.message}" if error is not None else turn.error
            end = run.end_reason.value if run.end_reason else "unknown error"
            raise RequestError(-32603, f"the run {status}: {detail or end}")
        reason = _STOP_REASONS.get(run.end_reason.value if run.end_reason else "", "end_turn")
        return PromptResponse(stop_reason=reason, usage=usage)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is not None and session.run is not None:
            await session.run.cancel()

    # ---- permissions ----------------------------------------------------------------------------------
    async def permission(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        """The runtimes' permission callback: asks the client of the request's session (deferred)."""
        session = self.sessions.get(request.session_id)
        if session is None or self._client is None:
            return PermissionDecision(decision="deny", reason="no editor session is attached to this run")
        session.asking.spawn(self._ask(session, request))
        return DEFER

    async def _ask(self, session: _Session, request: PermissionRequest) -> None:
        meta = request.metadata
        call_id = str(meta.get("tool_call_id") or request.request_id)
        if session.turn is not None:
            display = session.turn.call_display(call_id, request.tool_name, request.args_summary)
        else:
            from agent_core.adapters._tool_display import describe_call

            display = describe_call(
                request.tool_name, None, session.runtime.project_dir, request.args_summary
            )
        path = display.locations[0].path if display.locations else request.target_scope
        options = [PermissionOption(option_id=OPTION_ALLOW_ONCE, name="Allow once", kind="allow_once")]
        if meta.get("allow_for_session_available", True):
            options.append(
                PermissionOption(
                    option_id=OPTION_ALLOW_ALWAYS, name="Allow for this session", kind="allow_always"
                )
            )
        options.append(PermissionOption(option_id=OPTION_REJECT_ONCE, name="Reject", kind="reject_once"))
        tool_call = ToolCallUpdate(
            tool_call_id=call_id,
            title=display.title,
            kind=display.kind,
            status="pending",
            locations=[ToolCallLocation(path=loc.path, line=loc.line) for loc in display.locations] or None,
            content=permission_content(meta, path) or None,
            raw_input={"tool": request.tool_name, "arguments": request.args_summary},
        )
        reason = None
        try:
            response = await self.client.request_permission(
                session_id=session.session_id, tool_call=tool_call, options=options
            )
            outcome = response.outcome
            choice = _DECISIONS.get(outcome.option_id, "deny") if outcome.outcome == "selected" else "deny"
            if outcome.outcome != "selected":
                reason = "the permission request was cancelled by the editor"
        except (RequestError, ConnectionError) as exc:
            choice, reason = "deny", f"the editor did not answer the permission request: {exc}"
        with contextlib.suppress(AgentCoreError):  # its run stopped waiting meanwhile
            await session.runtime.answer_permission(
                request.request_id, PermissionDecision(decision=choice, reason=reason)
            )


def _default_runtime(
    project_dir: Path | None, permission: PermissionCallback, files: EditorFiles
) -> AgentRuntime:
    return AgentRuntime(project_dir=project_dir, permission_callback=permission, file_access=files)


async def serve_acp(agent: SoongAcpAgent, input_stream: Any = None, output_stream: Any = None) -> None:
    """Serves ``agent`` over stdio (or the given asyncio streams) until the client disconnects, then closes
    its runtimes."""
    try:
        # the SDK routes the methods an agent defines (duck typing); the others answer "method not found"
        await acp.run_agent(cast("acp.Agent", agent), input_stream, output_stream)
    finally:
        await agent.close()


__all__ = ["EditorFiles", "SoongAcpAgent", "prompt_message", "serve_acp"]
