"""When Memory Extraction Jobs run (docs/context.md#extraction).

:class:`MemoryScheduler` is installed on the :class:`~agent_core._runtime.runs.RunManager`:

- after every root run reaches a terminal state it evaluates the session's unscanned root user messages:
  ``explicit`` (that run's persisted user message matches :data:`EXPLICIT_INTENT`) > ``message_backlog``
  (count >= ``memory.extract_every_messages``) > ``token_backlog`` (token estimate >=
  ``memory.extract_every_tokens``); otherwise, if unscanned messages remain, an ``idle`` timer of
  ``memory.idle_seconds`` is (re)armed for the session;
- a new root run of the session cancels its pending idle timer; a timer firing while the session has an
  active or queued run does nothing (that run's end re-evaluates);
- at most one job per session at a time: evaluations during a running job coalesce into one
  re-evaluation after it ends (explicit intents seen meanwhile are kept for it);
- :meth:`MemoryScheduler.close` (runtime close) cancels idle timers and running jobs; a cancelled job
  leaves the scan cursor unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Protocol

from agent_core._concurrency import TaskOwner
from agent_core._context.tokens import TokenCounter
from agent_core._memory.extraction import ExtractionOutcome, MemoryExtractor
from agent_core._memory.scan import ScanInput, load_scan
from agent_core._runtime.state import RunState, SessionState
from agent_core.config.schema import MemorySection
from agent_core.types.content import text_of
from agent_core.types.enums import AgentRole

log = logging.getLogger("agent_core._memory")

EXPLICIT_INTENT = re.compile(
    r"(?i)(记住|以后都|我的偏好|remember|i prefer|don['’]t forget|do not forget|\b(?:always|never)\b)"
)
"""Explicit long-term-memory intent in a root user message (docs/context.md#extraction)."""

CLOSE_WAIT_S = 5.0


class SessionSource(Protocol):
    """What the scheduler needs from the run manager."""

    sessions: dict[str, SessionState]
    closing: bool


def decide_reason(
    scan: ScanInput, explicit_runs: set[str], settings: MemorySection, counter: TokenCounter
) -> str | None:
    """The trigger that fires for ``scan`` (precedence explicit > message > token), or ``None``."""
    candidates = scan.candidates
    if not candidates:
        return None
    if any(n.run_id in explicit_runs and EXPLICIT_INTENT.search(text_of(n.content)) for n in candidates):
        return "explicit"
    if len(candidates) >= settings.extract_every_messages:
        return "message_backlog"
    tokens = sum(counter.text(text_of(n.content)) for n in candidates)
    if tokens >= settings.extract_every_tokens:
        return "token_backlog"
    return None


@dataclass(eq=False, slots=True)
class _SessionJobs:
    job: asyncio.Task[None] | None = None
    idle: asyncio.Task[None] | None = None
    rerun: bool = False
    explicit_runs: set[str] = field(default_factory=set)
    outcomes: list[ExtractionOutcome] = field(default_factory=list)


class MemoryScheduler:
    def __init__(
        self,
        manager: SessionSource,
        extractor: MemoryExtractor,
        *,
        settings: MemorySection,
        counter: TokenCounter,
    ) -> None:
        self._manager = manager
        self._extractor = extractor
        self._settings = settings
        self._counter = counter
        self._sessions: dict[str, _SessionJobs] = {}
        self._tasks = TaskOwner("memory jobs")
        """Extraction jobs, re-evaluations and idle timers; :meth:`close` cancels and awaits them."""
        self.closed = False

    # ---- observers installed on the run manager ---------------------------------------------------
    async def on_run_end(self, state: RunState) -> None:
        if self.closed or self._manager.closing or not _is_root(state):
            return
        await self.evaluate(state.session_id, {state.run_id})

    def on_run_start(self, state: RunState) -> None:
        if not _is_root(state):
            return
        jobs = self._sessions.get(state.session_id)
        if jobs is not None and jobs.idle is not None:
            jobs.idle.cancel()
            jobs.idle = None

    # ---- evaluation -------------------------------------------------------------------------------
    async def evaluate(self, session_id: str, explicit_runs: set[str] | None = None) -> str | None:
        """Starts a job or arms the idle timer; returns the reason of a started job (else ``None``)."""
        runs = set(explicit_runs or ())
        jobs = self._sessions.setdefault(session_id, _SessionJobs())
        if self._busy(jobs, runs):
            return None
        scan = await load_scan(self._extractor.storage, session_id)
        if self.closed or self._busy(jobs, runs) or scan is None:
            return None
        reason = decide_reason(scan, runs, self._settings, self._counter)
        if reason is not None:
            self._start(session_id, jobs, reason)
        elif scan.candidates:
            self._arm_idle(session_id, jobs)
        return reason

    def idle_pending(self, session_id: str) -> bool:
        """Whether an idle timer is armed for ``session_id``."""
        jobs = self._sessions.get(session_id)
        return jobs is not None and jobs.idle is not None and not jobs.idle.done()

    def outcomes(self, session_id: str) -> list[ExtractionOutcome]:
        """Outcomes of the finished jobs of ``session_id`` in this runtime (oldest first)."""
        jobs = self._sessions.get(session_id)
        return list(jobs.outcomes) if jobs is not None else []

    async def wait_quiet(self, timeout: float = 10.0, *, include_idle: bool = False) -> None:
        """Waits until no job or re-evaluation (and, with ``include_idle``, no idle timer) is pending."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            idle = {j.idle for j in self._sessions.values() if j.idle is not None}
            pending = [t for t in self._tasks.tasks if include_idle or t not in idle]
            if not pending:
                return
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError("memory jobs still running")
            await asyncio.wait(pending, timeout=remaining)

    def _busy(self, jobs: _SessionJobs, runs: set[str]) -> bool:
        if jobs.job is not None and not jobs.job.done():
            jobs.rerun = True
            jobs.explicit_runs |= runs
            return True
        return False

    def _spawn(self, coro: Awaitable[None], name: str) -> asyncio.Task[None]:
        return self._tasks.spawn(coro, name=name)

    def _start(self, session_id: str, jobs: _SessionJobs, reason: str) -> None:
        if jobs.idle is not None:
            jobs.idle.cancel()
            jobs.idle = None
        jobs.job = self._spawn(self._job(session_id, jobs, reason), f"memory extraction {session_id}")

    def _arm_idle(self, session_id: str, jobs: _SessionJobs) -> None:
        if jobs.idle is not None:
            jobs.idle.cancel()
        jobs.idle = self._spawn(self._idle(session_id, jobs), f"memory idle timer {session_id}")

    async def _idle(self, session_id: str, jobs: _SessionJobs) -> None:
        await asyncio.sleep(self._settings.idle_seconds)
        if jobs.idle is asyncio.current_task():
            jobs.idle = None
        if self.closed or self._manager.closing:
            return
        session = self._manager.sessions.get(session_id)
        if session is not None and session.busy:
            return
        if jobs.job is not None and not jobs.job.done():
            jobs.rerun = True
            return
        scan = await load_scan(self._extractor.storage, session_id)
        if scan is None or not scan.candidates or self.closed:
            return
        if jobs.job is not None and not jobs.job.done():
            jobs.rerun = True
            return
        self._start(session_id, jobs, "idle")

    async def _job(self, session_id: str, jobs: _SessionJobs, reason: str) -> None:
        try:
            outcome = await self._extractor.run(session_id, reason)
            jobs.outcomes.append(outcome)
        except Exception:
            log.exception("memory extraction job for %s crashed", session_id)
        finally:
            if jobs.job is asyncio.current_task():
                jobs.job = None
        if jobs.rerun and not self.closed:
            jobs.rerun = False
            runs, jobs.explicit_runs = jobs.explicit_runs, set()
            self._spawn(self._reevaluate(session_id, runs), f"memory re-evaluation {session_id}")

    async def _reevaluate(self, session_id: str, runs: set[str]) -> None:
        try:
            await self.evaluate(session_id, runs)
        except Exception:
            log.exception("memory trigger re-evaluation for %s failed", session_id)

    # ---- shutdown -----------------------------------------------------------------------------------
    async def close(self) -> None:
        """Cancels idle timers, re-evaluations and running jobs (their cursors do not move)."""
        self.closed = True
        await self._tasks.aclose(bound=CLOSE_WAIT_S)
        for jobs in self._sessions.values():
            jobs.idle = None
            jobs.job = None


def _is_root(state: RunState) -> bool:
    return state.parent is None and state.role in (AgentRole.main, AgentRole.orchestrator)
