"""Request and response bodies of the ``soong-agent serve`` API (Pydantic, ``extra="forbid"``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Body(BaseModel):
    """A request or response body: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid")


class RunRequest(Body):
    message: str = Field(min_length=1, max_length=200_000)
    session_id: str | None = None
    mode: Literal["normal", "orchestrator"] = "normal"


class RunCreated(Body):
    run_id: str
    session_id: str


class AnswerRequest(Body):
    decision: Literal["allow_once", "allow_for_session", "deny"]


class AnswerResult(Body):
    request_id: str
    status: Literal["answered"]
    decision: str


class NodeRequest(Body):
    node_id: str = Field(min_length=1, max_length=200)


class ForkResult(Body):
    session_id: str
