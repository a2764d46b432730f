"""Permission requests of the temporal engine: signals to the run's workflow (docs/scale-out.md).

On a worker, the gate's callback is :class:`WorkflowPermissions`: it signals the request to the workflow
of the run whose tool step is asking, tells the runtime following the run on the live channel (a
wake-up, best effort), then waits (the step keeps heartbeating) until the workflow holds an answer. The
runtime that started the run finds the request with a query (when told, else on a slow poll while the
run is in a tool turn), asks its own permission callback and signals the answer (:func:`answer_pending`). The request id is derived from the run and the
tool call, so a tool step retried on another worker finds the same request — and its answer, if the user
already gave it — instead of asking again.

The starting runtime's gate applies the callback timeout; when its callback fails (timeout, exception,
invalid decision) the answer carries the failure, and the worker's gate reports it as a failure of its own
callback (``permission_failed``, ``details.permission_failure``), as the local engine does. When that
runtime has no callback, the worker's gate denies the call as the local engine's gate does without one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, get_args

from agent_core._storage.live import LiveChannel
from agent_core.engine.temporal._payloads import (
    PENDING_PERMISSIONS,
    PERMISSION_ANSWER,
    PERMISSION_ANSWERED,
    PERMISSION_REQUESTED,
    WORKFLOW_ID_PREFIX,
    PermissionSignal,
)
from agent_core.permissions._gate import CallbackFailure, FailureKind, NoCallback
from agent_core.types.permissions import PermissionDecision, PermissionRequest

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowHandle

POLL_S = 0.1


def stable_request_id(request: PermissionRequest) -> str:
    """The same id for the same tool call of the same run (``metadata.tool_call_id``)."""
    call = request.metadata.get("tool_call_id")
    if not isinstance(call, str):
        return request.request_id
    return "perm_" + hashlib.sha256(f"{request.run_id}\0{call}".encode()).hexdigest()[:24]


class WorkflowPermissions:
    """A worker gate's permission callback (installed by ``run_worker``); ``live`` tells the runtime
    following the run that a request waits."""

    def __init__(self, client: Client, live: LiveChannel | None = None) -> None:
        self.client = client
        self.live = live

    async def __call__(self, request: PermissionRequest) -> PermissionDecision:
        from temporalio import activity

        workflow_id = activity.info().workflow_id
        if workflow_id is None:
            raise RuntimeError("a worker's permission request must come from a run's tool step")
        handle = self.client.get_workflow_handle(workflow_id)
        request_id = stable_request_id(request)
        request = request.model_copy(update={"request_id": request_id})
        await handle.signal(PERMISSION_REQUESTED, PermissionSignal(request_id, request.model_dump_json()))
        if self.live is not None and workflow_id.startswith(WORKFLOW_ID_PREFIX):
            await self.live.publish(workflow_id.removeprefix(WORKFLOW_ID_PREFIX), 0, [], permission=True)
        while True:
            answer = await handle.query(PERMISSION_ANSWER, request_id, result_type=str)
            if answer is not None:
                return read_answer(answer)
            await asyncio.sleep(POLL_S)


Answer = tuple[PermissionDecision | None, FailureKind | None, str]
"""The starting runtime's answer: the decision, else the callback's failure kind and its message."""
Ask = Callable[[PermissionRequest], Awaitable[Answer]]


def answer_json(answer: Answer) -> str:
    decision, failure, message = answer
    if decision is not None:
        return json.dumps({"decision": decision.model_dump(mode="json")})
    return json.dumps({"failure": failure, "message": message})


def read_answer(body: str) -> PermissionDecision:
    """The decision of an answer; :class:`CallbackFailure` when the starting runtime's callback failed,
    :class:`NoCallback` when it has none (the worker's gate then denies as the local engine does: the
    policy's or the rule's reason and code)."""
    data = json.loads(body)
    if data.get("decision") is not None:
        return PermissionDecision.model_validate(data["decision"])
    failure = data.get("failure")
    if failure in get_args(FailureKind):
        raise CallbackFailure(failure, str(data.get("message", "")))
    raise NoCallback(str(data.get("message") or "no permission callback"))


async def answer_pending(handle: WorkflowHandle[object, object], asked: set[str], ask: Ask) -> int:
    """Asks ``ask`` about each request of the workflow not asked yet and signals the answers; how many
    requests were new."""
    pending = await handle.query(PENDING_PERMISSIONS, result_type=list[PermissionSignal])
    new = 0
    for item in pending:
        if item.request_id in asked:
            continue
        asked.add(item.request_id)
        new += 1
        answer = await ask(PermissionRequest.model_validate_json(item.body_json))
        await handle.signal(PERMISSION_ANSWERED, PermissionSignal(item.request_id, answer_json(answer)))
    return new
