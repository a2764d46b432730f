"""The HTTP API of ``soong-agent serve`` (docs/serve.md#endpoints table; Decision).

JSON in and out; request bodies are validated by Pydantic models (``extra="forbid"``); every error is
``{"error": ErrorPayload}``: 400 invalid input, 401 token (auth middleware), 404 unknown run / session /
request, 409 conflicts (request already answered or expired, session busy), 413 body too large, 500
internal. Handlers get the :class:`ServerState` from ``request.app.state.server``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ValidationError
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.server._addressing import NOTE_TAG, addressed_message, addressed_workers
from agent_core.server._errors import ApiError
from agent_core.server._models import (
    AnswerRequest,
    AnswerResult,
    Body,
    ForkResult,
    NodeRequest,
    PoolsResult,
    QuestionAnswerRequest,
    QuestionAnswerResult,
    QueuedRun,
    RewindRequest,
    RunCreated,
    RunRequest,
    WorkerRef,
)
from agent_core.server._sse import Cursor, run_stream
from agent_core.store import ApprovalStatus, QuestionAnswer
from agent_core.types.enums import RunStatus
from agent_core.types.permissions import PermissionDecision
from agent_core.types.runtime import UserMessage
from agent_core.types.workers import WorkerView

if TYPE_CHECKING:
    from agent_core.server._state import ServerState

MAX_BODY_BYTES = 1_000_000
SSE_PING_S = 15


def _state(request: Request) -> ServerState:
    return request.app.state.server  # type: ignore[no-any-return]


async def _body(request: Request, model: type[Body]) -> Any:
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise ApiError(413, ErrorCode.validation_error, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        raise ApiError(
            400, ErrorCode.validation_error, f"invalid request body: {where}: {first['msg']}"
        ) from exc


def _json(model: BaseModel | dict[str, Any] | list[Any], status: int = 200) -> Response:
    if isinstance(model, BaseModel):
        return Response(model.model_dump_json(), status_code=status, media_type="application/json")
    return JSONResponse(model, status_code=status)


async def _known_session(state: ServerState, session_id: str) -> Any:
    """The session's record; 404 when there is none (a malformed id names none: the lookup is a query
    parameter)."""
    record = await state.storage.get_session(session_id)
    if record is None:
        raise ApiError(404, ErrorCode.validation_error, f"unknown session {session_id!r}")
    return record


async def _known_node(state: ServerState, session_id: str, node_id: str) -> None:
    if await state.storage.get_node(session_id, node_id) is None:
        raise ApiError(404, ErrorCode.validation_error, f"unknown node {node_id!r} in session {session_id!r}")


# ---- handlers ----------------------------------------------------------------------------------------


async def health(request: Request) -> Response:
    return _json({"status": "ok", "version": _state(request).version})


async def list_sessions(request: Request) -> Response:
    sessions = await _state(request).runtime.list_sessions()
    return _json({"sessions": [json.loads(s.model_dump_json()) for s in sessions]})


async def start_run(request: Request) -> Response:
    state = _state(request)
    body: RunRequest = await _body(request, RunRequest)
    mode: Literal["normal", "orchestrator"] = body.mode or "normal"
    if body.session_id is not None:
        record = await _known_session(state, body.session_id)
        try:
            stored = json.loads(record.metadata_json or "{}").get("mode", "normal")
        except (ValueError, AttributeError):
            stored = "normal"
        mode = "orchestrator" if stored == "orchestrator" else "normal"
        if body.mode is not None and body.mode != mode:  # omitted: the session's mode
            raise ApiError(
                409,
                ErrorCode.validation_error,
                f"session {body.session_id!r} runs in {mode!r} mode; cannot start a {body.mode!r} run",
                {"session_mode": mode},
            )
    message: str | UserMessage = body.message
    addressed: list[WorkerView] = []
    if mode == "orchestrator":
        workers = [w for pool in await state.runtime.list_worker_pools() for w in pool.workers]
        addressed = addressed_workers(body.message, workers)
        if addressed:
            message = addressed_message(body.message, addressed)
    if body.permission_mode == "bypass" and state.runtime.config.settings.tools.sandbox != "bwrap":
        raise ApiError(  # a valid request this server's configuration refuses
            409,
            ErrorCode.validation_error,
            'permission mode "bypass" needs the command sandbox ([tools] sandbox = "bwrap" in config.toml)',
            {"config_key": "tools.sandbox"},
        )
    handle = await state.runtime.start(
        message, session_id=body.session_id, mode=mode, permission_mode=body.permission_mode
    )
    state.feeds.start(handle)
    refs = [WorkerRef(worker_pool_id=w.worker_pool_id, worker_agent_id=w.worker_agent_id) for w in addressed]
    return _json(RunCreated(run_id=handle.run_id, session_id=handle.session_id, addressed_workers=refs), 201)


async def _run_record(state: ServerState, run_id: str) -> Any:
    record = await state.storage.get_run(run_id) if len(run_id) <= 200 else None
    if record is None:
        raise ApiError(404, ErrorCode.validation_error, f"unknown run {run_id!r}")
    return record


def _cursor(request: Request) -> Cursor:
    raw = request.headers.get("last-event-id")
    cursor = Cursor.parse(raw)
    if cursor is None:
        raise ApiError(
            400,
            ErrorCode.validation_error,
            f"Last-Event-ID must be <run_seq> or <run_seq>.<seq>, got {(raw or '')[:40]!r}",
        )
    return cursor


async def run_events(request: Request) -> Response:
    state = _state(request)
    run_id = request.path_params["run_id"]
    record = await _run_record(state, run_id)
    cursor = _cursor(request)
    flags = request.query_params.getlist("debug")
    if len(flags) > 1 or (flags and flags[0] not in ("0", "1")):
        raise ApiError(400, ErrorCode.validation_error, "debug must be 0 or 1")
    debug = flags == ["1"]

    async def messages() -> Any:
        try:
            async for item in run_stream(
                state.storage,
                state.feeds,
                run_id=run_id,
                session_id=record.session_id,
                cursor=cursor,
                debug=debug,
            ):
                yield ServerSentEvent(
                    data=item.event.model_dump_json(), event=item.event.event_type.value, id=item.event_id
                )
        except AgentCoreError as exc:  # e.g. the session was deleted while streaming
            yield ServerSentEvent(
                data=json.dumps({"error": exc.to_payload().model_dump(mode="json")}), event="stream_error"
            )

    return EventSourceResponse(messages(), ping=SSE_PING_S, headers={"Cache-Control": "no-store"})


async def cancel_run(request: Request) -> Response:
    state = _state(request)
    run_id = request.path_params["run_id"]
    await _run_record(state, run_id)
    return _json(await state.cancel(run_id))


_STATUS_CHOICES: dict[str, tuple[ApprovalStatus, ...]] = {
    "pending": ("pending",),
    "answered": ("answered",),
    "expired": ("expired",),
    "all": ("pending", "answered", "expired"),
}


def _statuses(request: Request) -> tuple[ApprovalStatus, ...]:
    wanted = request.query_params.get("status", "pending")
    if wanted not in _STATUS_CHOICES:
        raise ApiError(400, ErrorCode.validation_error, f"status must be one of {', '.join(_STATUS_CHOICES)}")
    return _STATUS_CHOICES[wanted]


async def list_approvals(request: Request) -> Response:
    broker = _state(request).approvals
    rows = await broker.list(_statuses(request))
    return _json({"approvals": [broker.store.view(r) for r in rows]})


async def list_questions(request: Request) -> Response:
    broker = _state(request).questions
    rows = await broker.list(_statuses(request))
    return _json({"questions": [broker.store.view(r) for r in rows]})


async def question_events(request: Request) -> Response:
    """Pushes the pending questions, then every change (``question_pending`` / ``_answered`` / ``_expired``)."""
    broker = _state(request).questions

    async def messages() -> Any:
        async for name, data in broker.subscribe():
            yield ServerSentEvent(data=json.dumps(data), event=name)

    return EventSourceResponse(messages(), ping=SSE_PING_S, headers={"Cache-Control": "no-store"})


async def answer_question(request: Request) -> Response:
    state = _state(request)
    request_id = request.path_params["request_id"]
    body: QuestionAnswerRequest = await _body(request, QuestionAnswerRequest)
    outcome = await state.questions.answer(request_id, QuestionAnswer(answer=body.answer))
    if outcome == "missing":
        raise ApiError(404, ErrorCode.validation_error, f"unknown question {request_id!r}")
    if outcome != "answered":
        status = "expired" if outcome == "conflict_expired" else "answered"
        raise ApiError(
            409,
            ErrorCode.validation_error,
            f"question {request_id!r} is already {status}",
            {"request_id": request_id, "status": status},
        )
    return _json(QuestionAnswerResult(request_id=request_id, status="answered", answer=body.answer))


async def approval_events(request: Request) -> Response:
    """Pushes the pending requests, then every change (``approval_pending`` / ``_answered`` / ``_expired``)."""
    broker = _state(request).approvals

    async def messages() -> Any:
        async for name, data in broker.subscribe():
            yield ServerSentEvent(data=json.dumps(data), event=name)

    return EventSourceResponse(messages(), ping=SSE_PING_S, headers={"Cache-Control": "no-store"})


async def answer_approval(request: Request) -> Response:
    state = _state(request)
    request_id = request.path_params["request_id"]
    body: AnswerRequest = await _body(request, AnswerRequest)
    metadata = {"content": body.content} if body.content is not None else {}
    outcome = await state.approvals.answer(
        request_id, PermissionDecision(decision=body.decision, metadata=metadata)
    )
    if outcome == "missing":
        raise ApiError(404, ErrorCode.validation_error, f"unknown permission request {request_id!r}")
    if outcome != "answered":
        status = "expired" if outcome == "conflict_expired" else "answered"
        raise ApiError(
            409,
            ErrorCode.validation_error,
            f"permission request {request_id!r} is already {status}",
            {"request_id": request_id, "status": status},
        )
    return _json(AnswerResult(request_id=request_id, status="answered", decision=body.decision))


MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"})
"""Artifacts the UI shows (images and PDFs of the conversation); never SVG or HTML."""


async def artifact_media(request: Request) -> Response:
    """An image or PDF artifact for the conversation view (404 for anything else)."""
    state = _state(request)
    artifact_id = str(request.path_params["artifact_id"])
    try:
        data, mime = await state.runtime.read_artifact(artifact_id)
    except AgentCoreError as exc:
        raise ApiError(404, ErrorCode.file_not_found, f"unknown artifact {artifact_id!r}") from exc
    if mime not in MEDIA_TYPES:
        raise ApiError(404, ErrorCode.file_not_found, f"artifact {artifact_id!r} is not an image or PDF")
    headers = {"Content-Disposition": "inline", "Cache-Control": "private, max-age=3600"}
    return Response(data, media_type=mime, headers=headers)


async def get_session(request: Request) -> Response:
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    replay = await state.runtime.replay_session(session_id)
    record = await state.storage.get_session(session_id)
    out: dict[str, Any] = json.loads(replay.model_dump_json())
    out["active_node_id"] = record.active_node_id if record is not None else None
    return _json(out)


async def set_active(request: Request) -> Response:
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    body: NodeRequest = await _body(request, NodeRequest)
    await _known_node(state, session_id, body.node_id)
    return _json(await state.runtime.switch_node(session_id, body.node_id))


async def rewind_session(request: Request) -> Response:
    """Files and conversation back to a node (``AgentRuntime.rewind``): 409 with ``details.conflicts``
    when a file changed since (nothing is changed), 409 while a run of the session is queued or running."""
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    body: RewindRequest = await _body(request, RewindRequest)
    await _known_node(state, session_id, body.node_id)
    result = await state.runtime.rewind(
        session_id, body.node_id, files=body.files, conversation=body.conversation
    )
    return _json(result)


async def fork_session(request: Request) -> Response:
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    body: NodeRequest = await _body(request, NodeRequest)
    await _known_node(state, session_id, body.node_id)
    new_id = await state.runtime.fork_session(session_id, body.node_id)
    return _json(ForkResult(session_id=new_id), 201)


async def delete_session(request: Request) -> Response:
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    result = await state.runtime.delete_session(session_id)
    if result.deleted:
        await state.approvals.store.delete_session(session_id)
        await state.questions.store.delete_session(session_id)
        return _json(result)
    status = 409 if result.error is not None and result.error.code == ErrorCode.session_active else 400
    return _json(result, status)


async def session_tasks(request: Request) -> Response:
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    replay = await state.runtime.replay_session(session_id)
    return _json({"session_id": session_id, "tasks": [json.loads(t.model_dump_json()) for t in replay.tasks]})


async def session_team(request: Request) -> Response:
    """The session's teammates (its own, or its lead's when it is a teammate's session)."""
    state = _state(request)
    session_id = request.path_params["session_id"]
    await _known_session(state, session_id)
    team = await state.runtime.team(session_id)
    return _json({"session_id": session_id, "teammates": [json.loads(m.model_dump_json()) for m in team]})


def _queued_runs(state: ServerState, session_id: str | None) -> list[QueuedRun]:
    out: list[QueuedRun] = []
    for run in state.live_runs():
        if run.parent_run_id is not None or run.status != RunStatus.queued:
            continue
        if session_id is not None and run.session_id != session_id:
            continue
        meta = run.message.metadata.get(NOTE_TAG) if run.message is not None else None
        refs = [WorkerRef.model_validate(r) for r in meta] if isinstance(meta, list) else []
        out.append(QueuedRun(run_id=run.run_id, session_id=run.session_id, addressed_workers=refs))
    return out


async def list_pools(request: Request) -> Response:
    state = _state(request)
    session_id = request.query_params.get("session_id") or None
    if session_id is not None:
        await _known_session(state, session_id)
    pools = await state.runtime.list_worker_pools(session_id)
    return _json(PoolsResult(session_id=session_id, pools=pools, queued_runs=_queued_runs(state, session_id)))


API_ROUTES = [
    Route("/api/health", health, methods=["GET"]),
    Route("/api/sessions", list_sessions, methods=["GET"]),
    Route("/api/runs", start_run, methods=["POST"]),
    Route("/api/runs/{run_id}/events", run_events, methods=["GET"]),
    Route("/api/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
    Route("/api/approvals", list_approvals, methods=["GET"]),
    Route("/api/approvals/events", approval_events, methods=["GET"]),
    Route("/api/approvals/{request_id}", answer_approval, methods=["POST"]),
    Route("/api/questions", list_questions, methods=["GET"]),
    Route("/api/questions/events", question_events, methods=["GET"]),
    Route("/api/questions/{request_id}", answer_question, methods=["POST"]),
    Route("/api/pools", list_pools, methods=["GET"]),
    Route("/api/sessions/{session_id}", get_session, methods=["GET"]),
    Route("/api/sessions/{session_id}", delete_session, methods=["DELETE"]),
    Route("/api/sessions/{session_id}/active", set_active, methods=["POST"]),
    Route("/api/sessions/{session_id}/fork", fork_session, methods=["POST"]),
    Route("/api/sessions/{session_id}/rewind", rewind_session, methods=["POST"]),
    Route("/api/sessions/{session_id}/tasks", session_tasks, methods=["GET"]),
    Route("/api/artifacts/{artifact_id}", artifact_media, methods=["GET"]),
    Route("/api/sessions/{session_id}/team", session_team, methods=["GET"]),
]
