"""soong-agent as an MCP server (``soong-agent mcp-server``): other agents run it as a tool.

Built on the official ``mcp`` SDK's low-level server. Contract:

- Tools (structured results, with JSON schemas for input and output):

  - ``run(message, session_id?)`` runs one user message on the project (a new session unless
    ``session_id`` names one of the project's sessions) and returns ``{answer, session_id, run_id,
    status, end_reason, error}``: ``answer`` is the run's final text. While it runs, a client that sent a
    ``progressToken`` gets ``notifications/progress`` with the answer's text as it streams (in pieces of
    up to :data:`PROGRESS_TEXT_CHARS` characters or at line ends) and a line per tool call. A run that
    does not complete is a tool error (``isError``) whose text names its status and error. Cancelling
    the request (``notifications/cancelled``) cancels the run.
  - ``list_sessions(limit?)`` → ``{sessions: [{session_id, title, mode, status, run_count, created_at,
    updated_at, uri}]}``, most recently updated first.
  - ``get_session(session_id)`` → ``{session: {...}, messages: [...]}``: the summary and the transcript of
    the active path (user and assistant text, tool calls with their outcome).

- Resources: every session's transcript as Markdown, ``soong-agent://sessions/<session_id>``
  (``resources/list`` lists the project's sessions; a resource template names the pattern).
- Permission requests of a run go to the client that started it: as an elicitation (form mode: one
  ``decision`` field, ``allow_once`` / ``allow_for_session`` / ``deny``, the request shown in the message)
  when the client declared the elicitation capability; declining or cancelling denies. A client without
  it cannot be asked: what the configuration leaves to a prompt is denied, with a reason naming the
  ``[[permissions.rules]]`` that would allow it. Requests are deferred (``agent_core.permissions.DEFER``):
  no timeout while the user decides.
- Questions the model asks (``internal.ask_user``) go to the same client as an elicitation: a free-text
  ``answer`` field, plus a ``choice`` among the suggested options when there are some (the typed answer
  wins over the choice). Declining or cancelling tells the model the user gave no answer; a client
  without elicitation cannot be asked, and the model is told so (it decides itself).
- :func:`serve_stdio` serves one client on stdin/stdout; :func:`http_app` is the streamable-HTTP ASGI app
  (endpoint ``/mcp``), which answers ``401`` to a request without ``Authorization: Bearer <token>``
  (compared in constant time) and checks ``Host``/``Origin`` against loopback names (DNS rebinding).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.session import ServerSession
from pydantic import AnyUrl

from agent_core import AgentCoreError, AgentRuntime, RunHandle
from agent_core._concurrency import TaskOwner
from agent_core.adapters._transcript import transcript_markdown, transcript_messages
from agent_core.errors import ErrorCode, OperationCancelledError, ToolNotAvailableError
from agent_core.permissions import DEFER, PermissionDeferral
from agent_core.types import events as ev
from agent_core.types.permissions import PermissionDecision, PermissionRequest, UserQuestion

if TYPE_CHECKING:
    from agent_core.types.runtime import RuntimeEvent, SessionSummary

log = logging.getLogger("agent_core.adapters.mcp_server")

SERVER_NAME = "soong-agent"
RESOURCE_PREFIX = "soong-agent://sessions/"
PROGRESS_TEXT_CHARS = 200
PREVIEW_LINES = 40
DECISIONS = ("allow_once", "allow_for_session", "deny")
Decision = Literal["allow_once", "allow_for_session", "deny"]

_SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "title": {"type": "string"},
        "mode": {"type": "string", "enum": ["normal", "orchestrator"]},
        "status": {"type": ["string", "null"]},
        "run_count": {"type": "integer"},
        "created_at": {"type": "string"},
        "updated_at": {"type": "string"},
        "uri": {"type": "string"},
    },
    "required": ["session_id", "title", "mode", "status", "run_count", "created_at", "updated_at", "uri"],
}
TOOLS = [
    types.Tool(
        name="run",
        title="Run soong-agent",
        description="Run the soong-agent coding agent on its project with one user message and return its "
        "answer. Pass session_id to continue a conversation (see list_sessions); without it a new session "
        "starts. Progress notifications carry the answer as it streams and the agent's tool calls.",
        inputSchema={
            "type": "object",
            "properties": {
                "message": {"type": "string", "minLength": 1, "description": "The user message."},
                "session_id": {"type": "string", "description": "Continue this session (sess_...)."},
            },
            "required": ["message"],
            "additionalProperties": False,
        },
        outputSchema={
            "type": "object",
            "properties": {
                "answer": {"type": "string"},
                "session_id": {"type": "string"},
                "run_id": {"type": "string"},
                "status": {"type": "string"},
                "end_reason": {"type": ["string", "null"]},
                "error": {"type": ["object", "null"]},
            },
            "required": ["answer", "session_id", "run_id", "status", "end_reason", "error"],
        },
    ),
    types.Tool(
        name="list_sessions",
        title="List soong-agent sessions",
        description="The project's soong-agent sessions, most recently updated first.",
        inputSchema={
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": 1, "description": "At most this many."}},
            "additionalProperties": False,
        },
        outputSchema={
            "type": "object",
            "properties": {"sessions": {"type": "array", "items": _SUMMARY_SCHEMA}},
            "required": ["sessions"],
        },
    ),
    types.Tool(
        name="get_session",
        title="Get a soong-agent session",
        description="One session's summary and its conversation (user and assistant messages, tool calls).",
        inputSchema={
            "type": "object",
            "properties": {"session_id": {"type": "string"}},
            "required": ["session_id"],
            "additionalProperties": False,
        },
        outputSchema={
            "type": "object",
            "properties": {
                "session": _SUMMARY_SCHEMA,
                "messages": {"type": "array", "items": {"type": "object"}},
            },
            "required": ["session", "messages"],
        },
    ),
]


class ToolFailure(Exception):
    """A tool call that cannot be done; the message is the tool error's text."""


def session_uri(session_id: str) -> str:
    return f"{RESOURCE_PREFIX}{session_id}"


def _summary(summary: SessionSummary) -> dict[str, Any]:
    return {
        "session_id": summary.session_id,
        "title": summary.title,
        "mode": summary.mode,
        "status": summary.status,
        "run_count": summary.run_count,
        "created_at": summary.created_at.isoformat(),
        "updated_at": summary.updated_at.isoformat(),
        "uri": session_uri(summary.session_id),
    }


def permission_message(request: PermissionRequest) -> str:
    """What the user is asked: the tool, its arguments, the reasons and the change preview (cut)."""
    lines = [f"soong-agent asks to run {request.tool_name} {request.args_summary}".rstrip()]
    if request.target_scope:
        lines.append(f"target: {request.target_scope}")
    reasons = request.metadata.get("reasons")
    if isinstance(reasons, list) and reasons:
        lines.append("why it asks: " + "; ".join(str(r) for r in reasons))
    diff = request.metadata.get("diff")
    if isinstance(diff, str) and diff:
        shown = diff.splitlines()
        lines += shown[:PREVIEW_LINES]
        if len(shown) > PREVIEW_LINES:
            lines.append(f"... ({len(shown) - PREVIEW_LINES} more diff lines)")
    lines.append("Answer allow_once, allow_for_session or deny.")
    return "\n".join(lines)


@dataclass(eq=False, slots=True)
class _Caller:
    """The ``run`` request a session's run belongs to: where its permission requests are asked."""

    session: ServerSession
    request_id: types.RequestId
    asking: TaskOwner = field(default_factory=lambda: TaskOwner("mcp permission questions"))


class _Progress:
    """The ``notifications/progress`` of one ``run`` call (nothing without a progress token)."""

    def __init__(self, session: ServerSession, token: str | int | None, request_id: types.RequestId) -> None:
        self._session, self._token, self._request_id = session, token, request_id
        self._count = 0
        self._text = ""

    async def note(self, message: str) -> None:
        if self._token is None or not message:
            return
        self._count += 1
        await self._session.send_progress_notification(
            self._token, float(self._count), None, message, related_request_id=str(self._request_id)
        )

    async def text(self, piece: str) -> None:
        self._text += piece
        if len(self._text) >= PROGRESS_TEXT_CHARS or "\n" in piece:
            await self.flush()

    async def flush(self) -> None:
        text, self._text = self._text, ""
        await self.note(text)


class SoongMcpServer:
    """The MCP server of one project's runtime (see the module docstring).

    ``runtime_factory`` builds the runtime from this server's permission callback (default:
    ``AgentRuntime(project_dir, permission_callback=..., question_callback=server.question)``; a factory
    of its own passes ``question_callback=server.question`` too for questions to reach the client);
    :meth:`open` opens it, :meth:`close` closes it."""

    def __init__(
        self,
        project_dir: str | None = None,
        runtime_factory: Callable[[Callable[[PermissionRequest], Awaitable[Any]]], AgentRuntime]
        | None = None,
    ) -> None:
        factory = runtime_factory or (
            lambda permission: AgentRuntime(
                project_dir=project_dir, permission_callback=permission, question_callback=self.question
            )
        )
        self.runtime = factory(self.permission)
        self._callers: dict[str, _Caller] = {}
        self.server: Server[Any, Any] = Server(SERVER_NAME, instructions=TOOLS[0].description)
        self.server.list_tools()(self._list_tools)  # type: ignore[no-untyped-call]
        self.server.call_tool()(self._call_tool)
        self.server.list_resources()(self._list_resources)  # type: ignore[no-untyped-call]
        self.server.list_resource_templates()(self._list_templates)  # type: ignore[no-untyped-call]
        self.server.read_resource()(self._read_resource)  # type: ignore[no-untyped-call]

    async def open(self) -> None:
        await self.runtime.__aenter__()

    async def close(self) -> None:
        for caller in self._callers.values():
            await caller.asking.aclose()
        await self.runtime.close()

    # ---- tools ----------------------------------------------------------------------------------------
    async def _list_tools(self) -> list[types.Tool]:
        return list(TOOLS)

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        try:
            if name == "run":
                return await self._run(str(arguments["message"]), arguments.get("session_id"))
            if name == "list_sessions":
                limit = arguments.get("limit")
                summaries = await self.runtime.list_sessions(limit if isinstance(limit, int) else None)
                return {"sessions": [_summary(s) for s in summaries]}
            if name == "get_session":
                return await self._get_session(str(arguments["session_id"]))
        except AgentCoreError as exc:
            return _tool_error(f"{exc.code.value}: {exc.message}")
        except ToolFailure as exc:
            return _tool_error(str(exc))
        return _tool_error(f"unknown tool {name!r}")

    async def _find(self, session_id: str) -> SessionSummary:
        found = next((s for s in await self.runtime.list_sessions() if s.session_id == session_id), None)
        if found is None:
            raise ToolFailure(f"unknown session {session_id!r} in project {self.runtime.project_dir}")
        return found

    async def _get_session(self, session_id: str) -> dict[str, Any]:
        summary = await self._find(session_id)
        path = await self.runtime.get_node_path(summary.active_node_id) if summary.active_node_id else []
        return {"session": _summary(summary), "messages": transcript_messages(path)}

    async def _run(self, message: str, session_id: object) -> Any:
        context = self.server.request_context
        if session_id is not None and not isinstance(session_id, str):
            raise ToolFailure("session_id must be a string")
        mode: Any = "normal"
        if session_id is not None:
            mode = (await self._find(session_id)).mode
        run = await self.runtime.start(message, session_id=session_id, mode=mode)
        token = context.meta.progressToken if context.meta is not None else None
        progress = _Progress(context.session, token, context.request_id)
        caller = _Caller(context.session, context.request_id)
        self._callers[run.session_id] = caller
        answer = ""
        try:
            async for event in run.events():
                answer = await self._on_event(event, progress, answer)
            await progress.flush()
            await run.wait()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):  # the client cancelled the request: cancel the run
                await run.cancel()
            raise
        finally:
            if self._callers.get(run.session_id) is caller:
                del self._callers[run.session_id]
            for task in caller.asking.tasks:  # questions nobody can answer any more
                task.cancel()  # awaited by the owner when the server closes
        return self._result(run, answer)

    async def _on_event(self, event: RuntimeEvent, progress: _Progress, answer: str) -> str:
        match event.payload:
            case ev.MessageDelta(text=text):
                await progress.text(text or "")
            case ev.MessageCompleted(role="assistant", text=text):
                answer = text or ""  # the last completed assistant message is the answer
                await progress.flush()
            case ev.ToolStarted(tool_name=name, args_summary=args):
                await progress.flush()
                await progress.note(f"[tool] {name} {args or ''}".rstrip())
            case ev.ToolFailed(tool_name=name, error=error, reason=reason):
                why = (
                    (reason if isinstance(reason, str) else "")
                    or (error or {}).get("message")
                    or "tool_failed"
                )
                await progress.note(f"[tool] {name} failed: {why}")
            case ev.ToolDenied(tool_name=name, reason=reason):
                await progress.note(f"[tool] {name} denied: {reason or 'tool_denied'}")
        return answer

    def _result(self, run: RunHandle, answer: str) -> Any:
        error = run.error.model_dump(mode="json") if run.error is not None else None
        data = {
            "answer": answer,
            "session_id": run.session_id,
            "run_id": run.run_id,
            "status": run.status.value,
            "end_reason": run.end_reason.value if run.end_reason else None,
            "error": error,
        }
        if run.status.value == "completed":
            return ([types.TextContent(type="text", text=answer)], data)
        detail = f": {error['code']}: {error['message']}" if error else ""
        text = f"the run {run.status.value}{detail} (session_id {run.session_id})"
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structuredContent=data, isError=True
        )

    # ---- resources ------------------------------------------------------------------------------------
    async def _list_resources(self) -> list[types.Resource]:
        return [
            types.Resource(
                uri=AnyUrl(session_uri(s.session_id)),
                name=s.session_id,
                title=s.title or s.session_id,
                description=f"Transcript of the {s.mode} session {s.session_id}",
                mimeType="text/markdown",
            )
            for s in await self.runtime.list_sessions()
        ]

    async def _list_templates(self) -> list[types.ResourceTemplate]:
        return [
            types.ResourceTemplate(
                uriTemplate=f"{RESOURCE_PREFIX}{{session_id}}",
                name="session transcript",
                description="The transcript of a soong-agent session (Markdown)",
                mimeType="text/markdown",
            )
        ]

    async def _read_resource(self, uri: AnyUrl) -> Iterable[ReadResourceContents]:
        text = str(uri)
        if not text.startswith(RESOURCE_PREFIX):
            raise ValueError(f"unknown resource {text}")
        session_id = text[len(RESOURCE_PREFIX) :]
        try:
            data = await self._get_session(session_id)
        except (ToolFailure, AgentCoreError) as exc:
            raise ValueError(str(exc)) from exc
        body = transcript_markdown(data["session"]["title"], session_id, data["messages"])
        return [ReadResourceContents(content=body, mime_type="text/markdown")]

    # ---- permissions ----------------------------------------------------------------------------------
    async def permission(self, request: PermissionRequest) -> PermissionDecision | PermissionDeferral:
        """The runtime's permission callback (see the module docstring)."""
        caller = self._callers.get(request.session_id)
        if caller is None:
            return PermissionDecision(decision="deny", reason="no MCP client is waiting on this run")
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if not caller.session.check_client_capability(wanted):
            return PermissionDecision(
                decision="deny",
                reason=f"the MCP client cannot answer permission requests (it does not support elicitation); "
                f"allow {request.tool_name} with a [[permissions.rules]] entry in config.toml",
            )
        caller.asking.spawn(self._ask(caller, request))
        return DEFER

    async def _ask(self, caller: _Caller, request: PermissionRequest) -> None:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "enum": list(
                        DECISIONS
                        if request.metadata.get("allow_for_session_available", True)
                        else ("allow_once", "deny")
                    ),
                    "description": "allow_once, allow_for_session (the same call again without asking) or deny",
                }
            },
            "required": ["decision"],
        }
        decision: Decision = "deny"
        reason = None
        try:
            result = await caller.session.elicit_form(
                permission_message(request), schema, related_request_id=caller.request_id
            )
            answer = (result.content or {}).get("decision") if result.action == "accept" else None
            if answer == "allow_once":
                decision = "allow_once"
            elif answer == "allow_for_session":
                decision = "allow_for_session"
            else:
                reason = f"the MCP client answered {result.action}"
        except Exception as exc:  # the client went away or refused the request
            reason = f"the MCP client did not answer the permission request: {exc}"
        with contextlib.suppress(AgentCoreError):  # its run stopped waiting meanwhile
            await self.runtime.answer_permission(
                request.request_id,
                PermissionDecision(decision=decision, reason=reason),
            )

    # ---- questions ------------------------------------------------------------------------------------
    async def question(self, question: UserQuestion) -> str:
        """The runtime's question callback (see the module docstring): waits for the client's answer (the
        run's cancellation cancels the elicitation)."""
        caller = self._callers.get(question.session_id)
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        if caller is None or not caller.session.check_client_capability(wanted):
            raise ToolNotAvailableError(
                ErrorCode.tool_not_available,
                "nobody can answer: the MCP client that runs you does not support elicitation; decide yourself",
            )
        properties: dict[str, Any] = {}
        if question.options:
            properties["choice"] = {"type": "string", "title": "Choice", "enum": list(question.options)}
        properties["answer"] = {
            "type": "string",
            "title": "Answer",
            "description": "your own words" + (" (instead of a choice)" if question.options else ""),
        }
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        if not question.options:
            schema["required"] = ["answer"]
        result = await caller.session.elicit_form(
            f"soong-agent asks: {question.question}", schema, related_request_id=caller.request_id
        )
        content = result.content or {} if result.action == "accept" else {}
        typed, choice = str(content.get("answer") or "").strip(), str(content.get("choice") or "").strip()
        if typed or choice:
            return typed or choice
        raise OperationCancelledError(
            ErrorCode.cancelled,
            f"the user gave no answer (the MCP client answered {result.action}); decide yourself or ask again later",
        )

    # ---- transports -----------------------------------------------------------------------------------
    async def serve_stdio(self) -> None:
        """Serves one client on stdin/stdout until it disconnects."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await self.server.run(read, write, self.server.create_initialization_options())


def _tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


ASGIApp = Callable[
    [dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
    Awaitable[None],
]


def http_app(server: SoongMcpServer, token: str, port: int) -> tuple[ASGIApp, Any]:
    """``(ASGI app, session manager)`` of streamable HTTP at ``/mcp``; run the app inside
    ``async with manager.run():``. Every request needs ``Authorization: Bearer <token>``."""
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp.server.transport_security import TransportSecuritySettings

    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"],
        allowed_origins=[f"http://127.0.0.1:{port}", f"http://localhost:{port}", f"http://[::1]:{port}"],
    )
    manager = StreamableHTTPSessionManager(app=server.server, security_settings=security)
    expected = f"Bearer {token}".encode()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope.get("path") not in ("/mcp", "/mcp/"):
            await _plain(send, 404, b"not found: the MCP endpoint is /mcp\n")
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if not hmac.compare_digest(given, expected):
            await _plain(send, 401, b"missing or wrong Authorization: Bearer <token>\n", bearer=True)
            return
        await manager.handle_request(scope, receive, send)

    return app, manager


async def _plain(send: Any, status: int, body: bytes, *, bearer: bool = False) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="soong-agent"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["SoongMcpServer", "http_app", "permission_message", "session_uri"]
