"""Background offload of slow tool calls (docs/jobs-and-schedules.md#background-jobs,
``[tools] offload_after_ms``).

Contract:

- :meth:`JobManager.wrap` wraps the handler of a ``code.run_command`` or declarative-tool call. A call
  that finishes within ``offload_after_ms`` returns its own value (nothing changes). Otherwise a job row
  is written, ``job_started`` is emitted and the call returns the placeholder result
  ``[background job <job_id> started; its result will arrive as a message]`` — a normal tool result of
  that call, so the call is paired like any other. The handler keeps running as the job.
- On completion the job's result is stored as an artifact, the row becomes ``completed``/``failed`` and
  ``job_completed``/``job_failed`` is emitted; then the result is delivered to the inbox
  (``agent_core._inbox``) of the agent whose call it was (while that agent has a live run here, else the
  session's root agent) as a ``job_result`` entry, in the transaction that marks the job ``delivered``
  (exactly once): a run still in progress reads it before its next model step; an idle session is woken
  with a run for it when ``wake_on_completion`` is on, otherwise its next run reads it first.
- ``internal.job_cancel``, cancelling the job's run and closing the runtime cancel the handler (the
  command runner kills the process tree); such jobs end ``cancelled`` and nothing is delivered.
- Jobs a previous process left ``running`` (a crash) are marked ``failed`` at the first use of this
  manager and delivered (without a wake-up): the next run of their session reads them first. Jobs of
  another live process on the same home (its store owns their runs) are left to it. A result the inbox
  refused (full) stays undelivered and is delivered again before the session's next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent_core._concurrency import TaskOwner, cancel_and_wait
from agent_core._ids import new_id
from agent_core._storage.drafts import EventDraft
from agent_core.errors import AgentCoreError, ErrorCode, NotFoundError
from agent_core.jobs._store import JobRecord, JobStatus, JobStore
from agent_core.tools._normalize import exception_result, normalize_return
from agent_core.tools.context import ToolContext
from agent_core.types import events as ev
from agent_core.types.base import format_ts, utc_now
from agent_core.types.content import ArtifactRefBlock, JsonBlock, TextBlock
from agent_core.types.inbox import InboxEntry
from agent_core.types.model import ToolCall
from agent_core.types.tools import ToolDefinition, ToolResult

if TYPE_CHECKING:
    from agent_core._inbox.service import Inbox
    from agent_core._runtime.runs import RunManager
    from agent_core._runtime.state import RunState

log = logging.getLogger("agent_core.jobs")

OFFLOADABLE = frozenset({"code.run_command"})
NOTE_TEXT_LIMIT = 4000
CLOSE_WAIT_S = 5.0
PLACEHOLDER = "[background job {job_id} started; its result will arrive as a message]"


def placeholder_text(job_id: str) -> str:
    return PLACEHOLDER.format(job_id=job_id)


@dataclass(eq=False, kw_only=True, slots=True)
class LiveJob:
    record: JobRecord
    task: asyncio.Future[Any]
    stop_reason: str | None = None
    """Why the job was stopped by this process (``job_cancel``, ``run_cancelled``, ``runtime_closed``)."""
    finished: asyncio.Event
    run_cancel: asyncio.Event
    """The originating run's cancel event: a handler returning after it fired counts as cancelled."""


def _result_text(result: ToolResult) -> str:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, JsonBlock):
            parts.append(json.dumps(block.data, ensure_ascii=False, indent=1))
        elif isinstance(block, ArtifactRefBlock):
            parts.append(f"[artifact {block.artifact_id}]")
    return "\n".join(parts)


class JobManager:
    """Background jobs of one runtime."""

    def __init__(
        self, manager: RunManager, inbox: Inbox, *, offload_after_ms: int, wake_on_completion: bool
    ) -> None:
        self.manager = manager
        self.inbox = inbox
        self.after_s = offload_after_ms / 1000
        self.wake = wake_on_completion
        self.store = JobStore(manager.services.storage)
        self.live: dict[str, LiveJob] = {}
        self._recovered = False
        self._recover_lock = asyncio.Lock()
        self._closing = False
        self._tasks = TaskOwner("background jobs")
        """The handlers (offloaded or not yet) and the watchers that record their ends."""

    # ---- offload ------------------------------------------------------------------------------
    def applies(self, definition: ToolDefinition) -> bool:
        return definition.name in OFFLOADABLE or definition.metadata.get("source") == "declarative"

    def wrap(self, handler: Awaitable[Any], call: ToolCall, ctx: ToolContext) -> Awaitable[Any]:
        """The handler, turned into a background job when it outlives ``offload_after_ms``."""
        return self._run(handler, call, ctx)

    async def _run(self, handler: Awaitable[Any], call: ToolCall, ctx: ToolContext) -> Any:
        await self.recover()
        task = self._tasks.spawn(handler)
        try:
            done, _ = await asyncio.wait({task}, timeout=self.after_s)
        except asyncio.CancelledError:  # the call was cancelled before it was offloaded
            await cancel_and_wait(task)
            raise
        if task in done or self._closing or ctx.cancel_event.is_set():
            return await task
        return await self._offload(task, call, ctx)

    async def _offload(self, task: asyncio.Future[Any], call: ToolCall, ctx: ToolContext) -> ToolResult:
        now = format_ts()
        record = JobRecord(
            job_id=new_id("job_"),
            session_id=ctx.session_id,
            agent_id=ctx.agent_id,
            run_id=ctx.run_id,
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            status="running",
            created_at=now,
            updated_at=now,
        )
        await self.store.insert(record)
        job = LiveJob(record=record, task=task, finished=asyncio.Event(), run_cancel=ctx.cancel_event)
        self.live[record.job_id] = job
        await ctx.sink.emit(
            ev.JobStarted(
                job_id=record.job_id, tool_name=call.name, offload_after_ms=int(self.after_s * 1000)
            ),
            tool_call_id=call.tool_call_id,
        )
        self._tasks.spawn(self._finish(job), name=f"job {record.job_id}")
        return ToolResult(
            tool_call_id=call.tool_call_id,
            tool_name=call.name,
            content=[TextBlock(text=placeholder_text(record.job_id))],
            metadata={"background_job_id": record.job_id},
        )

    # ---- completion ---------------------------------------------------------------------------
    async def _finish(self, job: LiveJob) -> None:
        record = job.record
        try:
            value: Any = None
            error: BaseException | None = None
            try:
                await asyncio.wait({job.task})  # never cancels the handler itself
            except asyncio.CancelledError:  # this watcher was cancelled (shutdown): stop the handler
                job.stop_reason = job.stop_reason or "runtime_closed"
                await cancel_and_wait(job.task)
            if not job.task.cancelled():
                error = job.task.exception()
                if error is None:
                    value = job.task.result()
            if job.run_cancel.is_set() and job.stop_reason is None:
                job.stop_reason = "run_cancelled"
            if job.stop_reason is not None or job.task.cancelled():
                await self._end(record, "cancelled", reason=job.stop_reason or "cancelled")
                return
            if error is not None:
                result = exception_result(error, record.tool_call_id, record.tool_name)
            else:
                result = normalize_return(value, record.tool_call_id, record.tool_name)
            await self._complete(record, result)
        except Exception as exc:
            log.exception("background job %s could not be finished", record.job_id)
            with contextlib.suppress(Exception):  # never leave a finished job 'running'
                await self.store.finish(
                    record.job_id,
                    "failed",
                    error={
                        "code": ErrorCode.internal_error.value,
                        "message": f"recording the result failed: {exc}",
                    },
                )
        finally:
            self.live.pop(record.job_id, None)
            job.finished.set()

    async def _complete(self, record: JobRecord, result: ToolResult) -> None:
        services = self.manager.services
        text = services.redactor.text(_result_text(result))
        ref = await services.artifacts.create(
            result.model_dump(mode="json"),
            filename=f"{record.job_id}.json",
            mime_type="application/json",
            summary=f"result of background job {record.job_id} ({record.tool_name})",
            kind="tool_output",
            metadata={"background_job_id": record.job_id},
            session_id=record.session_id,
            agent_id=record.agent_id,
            run_id=record.run_id,
            tool_call_id=record.tool_call_id,
        )
        status: JobStatus = "failed" if result.is_error else "completed"
        error = result.error.model_dump(mode="json") if result.error is not None else None
        summary = text[:NOTE_TEXT_LIMIT]
        if not await self.store.finish(
            record.job_id, status, artifact_id=ref.artifact_id, summary=summary, error=error
        ):
            return
        event: ev.JobCompleted | ev.JobFailed
        if error is not None:
            event = ev.JobFailed(
                job_id=record.job_id,
                tool_name=record.tool_name,
                status=status,
                artifact_id=ref.artifact_id,
                error=error,
            )
        else:
            event = ev.JobCompleted(
                job_id=record.job_id, tool_name=record.tool_name, status=status, artifact_id=ref.artifact_id
            )
        await self._emit(record, event)
        done = record.model_copy(
            update={"status": status, "artifact_id": ref.artifact_id, "summary": summary, "error": error}
        )
        await self._deliver(done, wake=self.wake and not self._closing)

    async def _end(self, record: JobRecord, status: JobStatus, *, reason: str) -> None:
        error = {"code": ErrorCode.cancelled.value, "message": f"background job cancelled: {reason}"}
        if await self.store.finish(record.job_id, status, error=error, delivered=True):
            await self._emit(
                record,
                ev.JobFailed(job_id=record.job_id, tool_name=record.tool_name, status=status, reason=reason),
            )

    async def _emit(self, record: JobRecord, event: ev.EventPayload) -> None:
        state = self.manager.runs.get(record.run_id)
        if state is not None and not state.terminal:
            await state.recorder.emit(event, tool_call_id=record.tool_call_id)
            return
        await self.manager.services.storage.append(
            record.session_id,
            events=[
                EventDraft.of(
                    event,
                    agent_id=record.agent_id,
                    run_id=record.run_id,
                    tool_call_id=record.tool_call_id,
                    created_at=utc_now(),
                )
            ],
        )

    # ---- telling the session ------------------------------------------------------------------
    def note(self, record: JobRecord) -> str:
        """What the model reads of a job's outcome (the ``job_result`` entry's text)."""
        lines = [
            f"Background job {record.job_id} ({record.tool_name}, tool_call_id {record.tool_call_id}) "
            f"ended: {record.status}."
        ]
        if record.error is not None and record.status != "completed":
            lines.append(f"Error: {record.error.get('code')}: {record.error.get('message')}")
        if record.summary:  # tool output: the inbox note escapes it, so it cannot close the note (issue 31)
            lines.append("Result:")
            lines.append(record.summary)
        if record.artifact_id:
            lines.append(f"Full result: artifact {record.artifact_id}.")
        return self.manager.services.redactor.text("\n".join(lines))

    def _recipient(self, record: JobRecord) -> str | None:
        """The agent whose call it was while it has a live run here (a sub agent still working), else
        ``None``: the session's root agent."""
        session = self.manager.sessions.get(record.session_id)
        if session is None or record.agent_id == session.root_agent_id:
            return None
        live = any(r.agent_id == record.agent_id and not r.terminal for r in session.live_runs.values())
        return record.agent_id if live else None

    async def _deliver(self, record: JobRecord, *, wake: bool) -> None:
        """Delivers the job's outcome to the inbox once (the delivery marks the row ``delivered``)."""
        from agent_core._inbox.service import delivered_guard

        entry = InboxEntry.model_validate(
            {
                "kind": "job_result",
                "from": f"job:{record.job_id}",
                "content": self.note(record),
                "metadata": {"job_id": record.job_id, "status": record.status},
            }
        )
        guard = delivered_guard(
            "UPDATE background_jobs SET delivered = 1 WHERE job_id = ? AND delivered = 0", (record.job_id,)
        )
        try:
            await self.inbox.deliver(
                record.session_id, self._recipient(record), entry, wake=wake, guard=guard
            )
        except AgentCoreError as exc:  # a full inbox, a deleted session: kept for the next run
            log.warning("could not deliver the result of job %s: %s", record.job_id, exc.message)

    async def before_root_run(self, state: RunState) -> None:
        """Delivers the outcomes the session was not told yet (a full inbox, a crash): the run reads them
        before its first model step."""
        await self.recover()
        for record in await self.store.undelivered(state.session_id):
            await self._deliver(record, wake=False)

    async def recover(self) -> None:
        """Once per process: jobs left ``running`` by a process that is gone are marked failed."""
        if self._recovered:
            return
        async with self._recover_lock:
            if self._recovered:
                return
            stale = await self.store.fail_running(
                "the runtime stopped while this background job was running (crash or kill); "
                "its result is lost"
            )
            self._recovered = True
            for record in stale:
                with contextlib.suppress(AgentCoreError):
                    await self._emit(
                        record,
                        ev.JobFailed(
                            job_id=record.job_id,
                            tool_name=record.tool_name,
                            status="failed",
                            reason="interrupted",
                        ),
                    )
                await self._deliver(record, wake=False)

    # ---- control ------------------------------------------------------------------------------
    async def status(self, job_id: str, session_id: str) -> dict[str, Any]:
        await self.recover()
        record = await self.store.get(job_id)
        if record is None or record.session_id != session_id:
            raise NotFoundError(
                ErrorCode.validation_error, f"unknown background job {job_id!r}", details={"job_id": job_id}
            )
        out: dict[str, Any] = {
            "job_id": record.job_id,
            "status": record.status,
            "tool_name": record.tool_name,
            "tool_call_id": record.tool_call_id,
            "created_at": record.created_at,
            "updated_at": record.updated_at,
        }
        if record.artifact_id:
            out["artifact_id"] = record.artifact_id
        if record.summary:
            out["result_preview"] = record.summary[:1000]
        if record.error:
            out["error"] = record.error
        return out

    async def cancel(self, job_id: str, session_id: str) -> dict[str, Any]:
        info = await self.status(job_id, session_id)
        job = self.live.get(job_id)
        if info["status"] != "running" or job is None:
            return {**info, "cancelled": False}
        await self._stop(job, "job_cancel")
        return {**(await self.status(job_id, session_id)), "cancelled": True}

    async def _stop(self, job: LiveJob, reason: str) -> None:
        job.stop_reason = job.stop_reason or reason
        job.task.cancel()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(job.finished.wait(), CLOSE_WAIT_S)

    async def on_run_cancel(self, state: RunState) -> None:
        """``RunFeatures.jobs``: cancelling a run cancels its jobs."""
        jobs = [j for j in self.live.values() if j.record.run_id == state.run_id]
        await asyncio.gather(*(self._stop(j, "run_cancelled") for j in jobs))

    async def close(self) -> None:
        """Runtime close: every live job is cancelled and recorded ``cancelled`` (bounded wait)."""
        self._closing = True
        await asyncio.gather(*(self._stop(j, "runtime_closed") for j in list(self.live.values())))
        await self._tasks.aclose(grace=CLOSE_WAIT_S, bound=CLOSE_WAIT_S)
