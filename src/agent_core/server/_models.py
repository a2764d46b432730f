"""Request and response bodies of the ``soong-agent serve`` API (Pydantic, ``extra="forbid"``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_core.types.workers import WorkerPoolView


class Body(BaseModel):
    """A request or response body: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class RunRequest(Body):
    message: str = Field(min_length=1, max_length=200_000)
    session_id: str | None = None
    mode: Literal["normal", "orchestrator"] | None = None
    """Omitted: the session's mode (a new session: ``normal``); a different mode than the session's → 409."""
    permission_mode: Literal["default", "accept_edits", "plan", "dont_ask", "bypass"] | None = None
    """The run's permission mode (omitted: ``[permissions] mode``); ``bypass`` without the sandbox → 409."""


class WorkerRef(Body):
    worker_pool_id: str
    worker_agent_id: str


class RunCreated(Body):
    run_id: str
    session_id: str
    addressed_workers: list[WorkerRef] = Field(default_factory=list)
    """Orchestrator mode: the workers the message addressed with ``@<worker>``."""


class AnswerRequest(Body):
    decision: Literal["allow_once", "allow_for_session", "deny"]
    content: dict[str, Any] | None = None
    """An MCP elicitation's answer (the fields of its ``requested_schema``), sent with an allow."""


class AnswerResult(Body):
    request_id: str
    status: Literal["answered"]
    decision: str


class QuestionAnswerRequest(Body):
    answer: str = Field(min_length=1, max_length=20_000)
    """The user's answer: one of the question's options or their own words."""


class QuestionAnswerResult(Body):
    request_id: str
    status: Literal["answered"]
    answer: str


class NodeRequest(Body):
    node_id: str = Field(min_length=1, max_length=200)


class RewindRequest(Body):
    node_id: str = Field(min_length=1, max_length=200)
    files: bool = Field(default=True, strict=True)
    """Put back the files changed after the node."""
    conversation: bool = Field(default=True, strict=True)
    """Make the node the active leaf."""


class ForkResult(Body):
    session_id: str


class QueuedRun(Body):
    """A root run waiting in its session's FIFO queue (the Orchestrator is busy with an earlier one)."""

    run_id: str
    session_id: str
    addressed_workers: list[WorkerRef] = Field(default_factory=list)


class PoolsResult(Body):
    """``GET /api/pools``: the worker pools with each worker's state, and the queued root runs."""

    session_id: str | None
    pools: list[WorkerPoolView]
    queued_runs: list[QueuedRun]
