"""``GET /openapi.json``: the OpenAPI 3.1 document of every API route (schemas from the Pydantic models)."""

from __future__ import annotations

import copy
import functools
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from agent_core.server._models import (
    AnswerRequest,
    AnswerResult,
    ForkResult,
    NodeRequest,
    PoolsResult,
    QuestionAnswerRequest,
    QuestionAnswerResult,
    RewindRequest,
    RunCreated,
    RunRequest,
)
from agent_core.server._trace import SessionTrace
from agent_core.types._results import CancelResult, DeleteSessionResult, RewindResult, SessionSummary
from agent_core.types.content import ErrorPayload
from agent_core.types.permissions import PermissionRequest, UserQuestion
from agent_core.types.runtime import NestedRuntimeEvent, Node, ReplayResult
from agent_core.types.team import TeammateView

_REF = "#/components/schemas/{model}"
_INPUTS: tuple[type[BaseModel], ...] = (
    RunRequest,
    AnswerRequest,
    QuestionAnswerRequest,
    NodeRequest,
    RewindRequest,
)
_OUTPUTS: tuple[type[BaseModel], ...] = (
    RunCreated,
    PoolsResult,
    AnswerResult,
    QuestionAnswerResult,
    UserQuestion,
    RewindResult,
    ForkResult,
    CancelResult,
    ReplayResult,
    Node,
    DeleteSessionResult,
    SessionSummary,
    NestedRuntimeEvent,
    PermissionRequest,
    ErrorPayload,
    TeammateView,
    SessionTrace,
)


_SSE_EVENT: dict[str, Any] = {
    "type": "object",
    "required": ["data", "event"],
    "properties": {
        "event": {"type": "string", "description": "the event_type"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {
                "anyOf": [
                    {"$ref": "#/components/schemas/RuntimeEvent"},
                    {"$ref": "#/components/schemas/NestedRuntimeEvent"},
                ]
            },
        },
        "id": {
            "type": "string",
            "pattern": "^[0-9]+(\\.[0-9]+)?$",
            "description": "a persisted event: <run_seq> of the run's own event, <run_seq>.<seq> of a "
            "descendant run's event (run_seq of the run's last own event before it, the session seq)",
        },
        "retry": {"type": "integer"},
    },
}


def _pending_event(kind: str, schema: str) -> dict[str, Any]:
    """The SSE schema of ``/api/<kind>s/events`` (a snapshot, then each change of one request)."""
    ref = {"$ref": f"#/components/schemas/{schema}"}
    return {
        "type": "object",
        "required": ["data", "event"],
        "properties": {
            "event": {"enum": [f"{kind}s", f"{kind}_pending", f"{kind}_answered", f"{kind}_expired"]},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": {
                    "anyOf": [
                        {
                            "type": "object",
                            "required": [f"{kind}s"],
                            "properties": {f"{kind}s": {"type": "array", "items": ref}},
                        },
                        ref,
                    ]
                },
            },
        },
    }


_APPROVAL_EVENT = _pending_event("approval", "Approval")
_QUESTION_EVENT = _pending_event("question", "Question")
_STATUS_PARAM: dict[str, Any] = {
    "name": "status",
    "in": "query",
    "schema": {"enum": ["pending", "answered", "expired", "all"]},
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    texts = {
        400: "invalid input",
        401: "missing or wrong token",
        403: "cross-origin request",
        404: "unknown run, session or request",
        409: "conflict (already answered or expired; session busy)",
        413: "body too large",
    }
    return {str(s): _json(_ref("ErrorResponse"), texts[s]) for s in (401, *statuses)}


def _body(name: str) -> dict[str, Any]:
    return {"required": True, "content": {"application/json": {"schema": _ref(name)}}}


def _path(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


@functools.cache
def _components() -> dict[str, Any]:
    pairs: list[tuple[type[BaseModel], Literal["validation", "serialization"]]] = [
        (m, "validation") for m in _INPUTS
    ]
    pairs += [(m, "serialization") for m in _OUTPUTS]
    _, defs = models_json_schema(pairs, ref_template=_REF)
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    schemas["ErrorResponse"] = {
        "type": "object",
        "required": ["error"],
        "properties": {"error": _ref("ErrorPayload")},
    }
    replay = copy.deepcopy(schemas["ReplayResult"])
    replay["properties"]["active_node_id"] = {"type": ["string", "null"]}
    replay["title"] = "SessionReplay"
    schemas["SessionReplay"] = replay
    approval = copy.deepcopy(schemas["PermissionRequest"])
    approval["title"] = "Approval"
    approval["properties"].update(
        status={"enum": ["pending", "answered", "expired"]},
        created_at={"type": "string"},
        answered_at={"type": ["string", "null"]},
        answer={"enum": ["allow_once", "allow_for_session", "deny", None]},
    )
    approval["required"] = [*approval.get("required", []), "status", "created_at", "answered_at", "answer"]
    schemas["Approval"] = approval
    question = copy.deepcopy(schemas["UserQuestion"])
    question["title"] = "Question"
    question["properties"].update(
        status={"enum": ["pending", "answered", "expired"]},
        created_at={"type": "string"},
        answered_at={"type": ["string", "null"]},
        answer={"type": ["string", "null"]},
    )
    question["required"] = [*question.get("required", []), "status", "created_at", "answered_at", "answer"]
    schemas["Question"] = question
    return schemas


def _obj(key: str, items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "required": [key], "properties": {key: {"type": "array", "items": items}}}


def openapi_document(version: str) -> dict[str, Any]:
    run_id, session_id = _path("run_id"), _path("session_id")
    events_params = [
        run_id,
        {
            "name": "debug",
            "in": "query",
            "schema": {"enum": ["0", "1"]},
            "description": "1 adds debug events",
        },
        {
            "name": "Last-Event-ID",
            "in": "header",
            "schema": {"type": "string", "pattern": "^[0-9]{1,12}(\\.[0-9]{1,12})?$"},
            "description": "resume after this SSE id (<run_seq> or <run_seq>.<seq>)",
        },
    ]
    paths: dict[str, Any] = {
        "/api/health": {
            "get": {
                "summary": "Liveness and version",
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["status", "version"],
                            "properties": {"status": {"const": "ok"}, "version": {"type": "string"}},
                        }
                    ),
                    **_errors(),
                },
            }
        },
        "/api/sessions": {
            "get": {
                "summary": "Root sessions of the project, newest first",
                "responses": {"200": _json(_obj("sessions", _ref("SessionSummary"))), **_errors()},
            }
        },
        "/api/runs": {
            "post": {
                "summary": "Start (or queue, FIFO per session) a run",
                "requestBody": _body("RunRequest"),
                "responses": {"201": _json(_ref("RunCreated"), "started"), **_errors(400, 404, 409, 413)},
            }
        },
        "/api/runs/{run_id}/events": {
            "get": {
                "summary": "Server-sent events of the run: persisted ones replayed first, then live",
                "parameters": events_params,
                "responses": {
                    "200": {
                        "description": "event: <event_type>, data: <RuntimeEvent JSON> (a descendant run's "
                        "event: NestedRuntimeEvent with parent_run_id / parent_tool_call_id), id: <run_seq> "
                        "(descendants: <run_seq>.<seq>) for persisted events; ends after the run's terminal "
                        "event",
                        "content": {"text/event-stream": {"schema": _SSE_EVENT}},
                    },
                    **_errors(400, 404),
                },
            }
        },
        "/api/runs/{run_id}/cancel": {
            "post": {
                "summary": "Cancel a run",
                "parameters": [run_id],
                "responses": {"200": _json(_ref("CancelResult")), **_errors(404)},
            }
        },
        "/api/approvals": {
            "get": {
                "summary": "Permission requests (pending by default), all sessions",
                "parameters": [_STATUS_PARAM],
                "responses": {"200": _json(_obj("approvals", _ref("Approval"))), **_errors(400)},
            }
        },
        "/api/approvals/events": {
            "get": {
                "summary": "Server-sent events of permission requests, pushed as they change",
                "description": 'First `event: approvals` with `{"approvals": [pending Approval...]}`, then '
                "`approval_pending`, `approval_answered` and `approval_expired`, each with the Approval as it "
                "committed. The stream stays open; a client that reconnects gets a fresh snapshot.",
                "responses": {
                    "200": {
                        "description": "event: approvals | approval_pending | approval_answered | "
                        "approval_expired",
                        "content": {"text/event-stream": {"schema": _APPROVAL_EVENT}},
                    },
                    **_errors(),
                },
            }
        },
        "/api/approvals/{request_id}": {
            "post": {
                "summary": "Answer a pending request (the first answer wins)",
                "parameters": [_path("request_id")],
                "requestBody": _body("AnswerRequest"),
                "responses": {"200": _json(_ref("AnswerResult")), **_errors(400, 404, 409, 413)},
            }
        },
        "/api/questions": {
            "get": {
                "summary": "Questions the agents asked with internal.ask_user (pending by default), all sessions",
                "parameters": [_STATUS_PARAM],
                "responses": {"200": _json(_obj("questions", _ref("Question"))), **_errors(400)},
            }
        },
        "/api/questions/events": {
            "get": {
                "summary": "Server-sent events of questions, pushed as they change",
                "description": 'First `event: questions` with `{"questions": [pending Question...]}`, then '
                "`question_pending`, `question_answered` and `question_expired`, each with the Question as "
                "it committed. A question left pending when the server stopped is expired, never answered.",
                "responses": {
                    "200": {
                        "description": "event: questions | question_pending | question_answered | "
                        "question_expired",
                        "content": {"text/event-stream": {"schema": _QUESTION_EVENT}},
                    },
                    **_errors(),
                },
            }
        },
        "/api/questions/{request_id}": {
            "post": {
                "summary": "Answer a pending question (an option or free text; the first answer wins)",
                "parameters": [_path("request_id")],
                "requestBody": _body("QuestionAnswerRequest"),
                "responses": {"200": _json(_ref("QuestionAnswerResult")), **_errors(400, 404, 409, 413)},
            }
        },
        "/api/pools": {
            "get": {
                "summary": "Worker pools with each worker's state (idle / busy / unavailable) and queued runs",
                "description": "With session_id: the workers' state in that session and its queued runs; "
                "without: busy in any session, and every queued run.",
                "parameters": [
                    {"name": "session_id", "in": "query", "required": False, "schema": {"type": "string"}}
                ],
                "responses": {"200": _json(_ref("PoolsResult")), **_errors(404)},
            }
        },
        "/api/sessions/{session_id}": {
            "get": {
                "summary": "Replay of the session (nodes, events, runs) plus its active_node_id",
                "parameters": [session_id],
                "responses": {"200": _json(_ref("SessionReplay")), **_errors(404)},
            },
            "delete": {
                "summary": "Delete the session",
                "parameters": [session_id],
                "responses": {
                    "200": _json(_ref("DeleteSessionResult")),
                    "400": _json(_ref("DeleteSessionResult"), "not deleted"),
                    "409": _json(_ref("DeleteSessionResult"), "session busy"),
                    "401": _json(_ref("ErrorResponse"), "missing or wrong token"),
                    "404": _json(_ref("ErrorResponse"), "unknown session"),
                },
            },
        },
        "/api/sessions/{session_id}/active": {
            "post": {
                "summary": "Switch the active path (branch) to a node",
                "parameters": [session_id],
                "requestBody": _body("NodeRequest"),
                "responses": {"200": _json(_ref("Node")), **_errors(400, 404, 409, 413)},
            }
        },
        "/api/sessions/{session_id}/fork": {
            "post": {
                "summary": "Fork a new session from a node of this one",
                "parameters": [session_id],
                "requestBody": _body("NodeRequest"),
                "responses": {"201": _json(_ref("ForkResult"), "forked"), **_errors(400, 404, 409, 413)},
            }
        },
        "/api/sessions/{session_id}/rewind": {
            "post": {
                "summary": "Rewind files and conversation to a node (the files changed after it come back)",
                "description": "409 `path_conflict` with `error.details.conflicts` ([{path, reason}]) when a "
                "file changed since by someone else: nothing is changed. Paths left alone (protected, below "
                "a symlinked directory, not captured, another session's change) are listed in `skipped`.",
                "parameters": [session_id],
                "requestBody": _body("RewindRequest"),
                "responses": {"200": _json(_ref("RewindResult")), **_errors(400, 404, 409, 413)},
            }
        },
        "/api/sessions/{session_id}/tasks": {
            "get": {
                "summary": "Tasks of the session with steps, states and dependencies",
                "parameters": [session_id],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["session_id", "tasks"],
                            "properties": {
                                "session_id": {"type": "string"},
                                "tasks": {"type": "array", "items": _ref("TaskInspectView")},
                            },
                        }
                    ),
                    **_errors(404),
                },
            }
        },
        "/api/artifacts/{artifact_id}": {
            "get": {
                "summary": "An image or PDF of the conversation (a message's attachment, a tool's image)",
                "parameters": [
                    {"name": "artifact_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {
                    "200": {
                        "description": "the bytes",
                        "content": {
                            media: {"schema": {"type": "string", "format": "binary"}}
                            for media in (
                                "image/png",
                                "image/jpeg",
                                "image/gif",
                                "image/webp",
                                "application/pdf",
                            )
                        },
                    },
                    **_errors(404),
                },
            }
        },
        "/api/sessions/{session_id}/team": {
            "get": {
                "summary": "The teammates of the session's team with their state and unread inbox entries",
                "parameters": [session_id],
                "responses": {
                    "200": _json(
                        {
                            "type": "object",
                            "required": ["session_id", "teammates"],
                            "properties": {
                                "session_id": {"type": "string"},
                                "teammates": {"type": "array", "items": _ref("TeammateView")},
                            },
                        }
                    ),
                    **_errors(404),
                },
            }
        },
    }
    paths.update(_view_paths(session_id))
    return {
        "openapi": "3.1.0",
        "info": {"title": "soong-agent serve", "version": version},
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": _components(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "the token printed at start"}
            },
        },
    }


_CONFIG_VIEW: dict[str, Any] = {
    "type": "object",
    "required": ["home", "project", "config_path", "session_db_path", "model", "settings", "environment"],
    "properties": {
        "home": {"type": "string"},
        "project": {"type": "string"},
        "config_path": {"type": "string"},
        "session_db_path": {"type": "string"},
        "model": {
            "type": "object",
            "description": "the main [model]: provider, name, context_window, base_url (password masked)",
        },
        "settings": {
            "type": "object",
            "description": "every config.toml section resolved (defaults filled, paths expanded); secrets "
            "masked as [REDACTED]; *_env keys name variables and stay",
        },
        "environment": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "name", "set"],
                "properties": {
                    "key": {"type": "string"},
                    "name": {"type": "string"},
                    "set": {"type": "boolean"},
                },
            },
        },
        "redacted": {"const": True},
    },
}


def _view_paths(session_id: dict[str, Any]) -> dict[str, Any]:
    return {
        "/api/config": {
            "get": {
                "summary": "The resolved configuration with every secret masked, and where the server runs",
                "responses": {"200": _json(_CONFIG_VIEW), **_errors()},
            }
        },
        "/api/sessions/{session_id}/trace": {
            "get": {
                "summary": "The session's runs as a tree of timed spans (model and tool calls, child runs, "
                "marks), built from its stored events",
                "parameters": [session_id],
                "responses": {"200": _json(_ref("SessionTrace")), **_errors(404)},
            }
        },
    }
