"""The state of one ``soong-agent serve`` process: the open :class:`AgentRuntime`, the approval broker and
the run feeds. The caller owns the runtime: :func:`open_state` opens it, :func:`close_state` closes it."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from importlib import metadata

from agent_core import AgentRuntime, RunHandle
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.server._approvals import ApprovalBroker, QuestionBroker
from agent_core.server._errors import ApiError
from agent_core.server._sse import RunFeeds
from agent_core.store import ApprovalStore, QuestionStore, SessionStore
from agent_core.types.runtime import CancelResult

log = logging.getLogger("agent_core.server")


def _version() -> str:
    try:
        return metadata.version("soong-agent")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass(eq=False, slots=True)
class ServerState:
    """Everything a request handler needs."""

    runtime: AgentRuntime
    approvals: ApprovalBroker
    questions: QuestionBroker = field(default_factory=QuestionBroker)
    """The model's questions (``internal.ask_user``), durable like the approvals."""
    feeds: RunFeeds = field(default_factory=RunFeeds)
    version: str = field(default_factory=_version)

    @property
    def storage(self) -> SessionStore:
        return self.runtime.store

    def live_runs(self) -> list[RunHandle]:
        """The runtime's live runs (queued, pending, running), roots and children."""
        return self.runtime.live_runs()

    async def cancel(self, run_id: str) -> CancelResult:
        """Cancels a run of this process (root or child); a run not live here is reported as it stands."""
        handle = self.feeds.handles.get(run_id) or self.runtime.live_run(run_id)
        if handle is not None:
            return await handle.cancel()
        record = await self.storage.get_run(run_id)
        if record is None:
            raise ApiError(404, ErrorCode.validation_error, f"unknown run {run_id!r}")
        return CancelResult(run_id=run_id, status=record.status, already_terminal=record.status.terminal)


async def open_state(
    runtime: AgentRuntime, approvals: ApprovalBroker, questions: QuestionBroker | None = None
) -> ServerState:
    """Opens ``runtime`` and expires pending approvals and questions left by an earlier process (never
    allowed, never answered)."""
    await runtime.open()
    state = ServerState(runtime=runtime, approvals=approvals, questions=questions or QuestionBroker())
    approvals.attach(runtime, ApprovalStore(state.storage))
    state.questions.attach(runtime, QuestionStore(state.storage))
    expired = await approvals.expire_all()
    if expired:
        log.warning("%d pending permission request(s) of an earlier server process expired", expired)
    expired = await state.questions.expire_all()
    if expired:
        log.warning("%d pending question(s) of an earlier server process expired", expired)
    return state


async def close_state(state: ServerState) -> None:
    """Expires pending approvals (never allowed later), then closes the runtime (cancels its runs)."""
    try:
        await state.approvals.close()
        await state.questions.close()
        with contextlib.suppress(AgentCoreError):
            await state.approvals.expire_all()
            await state.questions.expire_all()
        await state.runtime.close()
    finally:
        await state.feeds.close()
