"""The scheduler service (docs/jobs-and-schedules.md#schedules): runs the due schedules of one project.

Contract:

- :meth:`SchedulerService.start` fires every schedule already due (at most ONE catch-up run per schedule,
  however many occurrences were missed while nothing was running), then keeps a background task that
  sleeps until the next due time (re-reading the store at least every ``poll_interval_s``, so schedules
  added by another process are seen) and fires what is due. :meth:`stop` ends that task; runs it started
  belong to the runtime (closing the runtime cancels them).
- A firing only delivers the schedule's text as a ``schedule`` entry to the inbox of the schedule's
  session (or of a new session when the schedule has none), which wakes it (``agent_core._inbox``: a
  run in progress reads it before its next model step, an idle session gets a run for it); it never
  runs a command by itself. A firing that cannot be delivered (an unknown session, a full inbox) is
  recorded in ``last_error`` and the schedule stays active.
- Time comes from a :class:`Clock`, so tests drive it without real waits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from agent_core._concurrency import TaskOwner, cancel_and_wait
from agent_core.errors import AgentCoreError
from agent_core.schedules._store import Schedule, ScheduleStore

log = logging.getLogger("agent_core.schedules")

DEFAULT_POLL_INTERVAL_S = 30.0


class Clock(Protocol):
    """Wall-clock time and sleeping (a test substitutes a controllable one)."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock (aware UTC)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class StartedRun(Protocol):
    """What a firing started (an :class:`~agent_core._api.handles.RunHandle`)."""

    @property
    def session_id(self) -> str: ...

    @property
    def run_id(self) -> str: ...

    async def wait(self) -> Any: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Delivered:
    """Where a firing's message went: its session, the inbox entry and the run that reads it (the run it
    woke, or the session's run in progress here; ``None`` when that run is in another process)."""

    session_id: str
    entry_id: str
    run: StartedRun | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Firing:
    """One schedule firing: where its message was delivered, or the error that prevented it."""

    schedule_id: str
    fired_at: datetime
    delivered: Delivered | None = None
    error: str | None = None

    @property
    def run(self) -> StartedRun | None:
        return self.delivered.run if self.delivered is not None else None

    @property
    def session_id(self) -> str | None:
        return self.delivered.session_id if self.delivered is not None else None

    @property
    def run_id(self) -> str | None:
        return self.run.run_id if self.run is not None else None


StartScheduled = Callable[[Schedule], Awaitable[Delivered]]
"""Delivers the message of one firing to its session's inbox (which wakes it)."""


class SchedulerService:
    """Fires the due schedules of ``project``; ``start``/``stop`` for the CLI and the server."""

    def __init__(
        self,
        store: ScheduleStore,
        project: Path,
        start_run: StartScheduled,
        *,
        clock: Clock | None = None,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        on_fired: Callable[[Firing], None] | None = None,
    ) -> None:
        self._store = store
        self._project = project
        self._start_run = start_run
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._poll = poll_interval_s
        self._on_fired = on_fired
        self._tasks = TaskOwner("schedule loop")
        self._task: asyncio.Task[None] | None = None
        self._tick_lock = asyncio.Lock()
        self.firings: list[Firing] = []

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def start(self) -> list[Firing]:
        """Fires what is already due (the catch-up), then keeps firing in the background."""
        if self.running:
            return []
        fired = await self.tick()
        self._task = self._tasks.spawn(self._loop(), name="schedule loop")
        return fired

    async def stop(self) -> None:
        """Stops the background task (idempotent); a firing in progress finishes first."""
        task, self._task = self._task, None
        if task is None:
            return
        async with self._tick_lock:  # never in the middle of a firing
            await cancel_and_wait(task)

    async def tick(self) -> list[Firing]:
        """Fires every schedule of the project whose due time has come; returns the firings."""
        async with self._tick_lock:
            now = self.clock.now()
            fired: list[Firing] = []
            for schedule in await self._store.list(self._project):
                if schedule.next_due_at > now:
                    continue
                claimed = await self._store.claim_due(schedule, now)
                if claimed is None:
                    continue  # another scheduler fired it
                fired.append(await self._fire(claimed, now))
            return fired

    async def _fire(self, schedule: Schedule, now: datetime) -> Firing:
        try:
            delivered = await self._start_run(schedule)
        except AgentCoreError as exc:
            log.warning("schedule %s could not start a run: %s", schedule.schedule_id, exc.message)
            await self._store.record_outcome(schedule.schedule_id, error=f"{exc.code.value}: {exc.message}")
            firing = Firing(
                schedule_id=schedule.schedule_id, fired_at=now, error=f"{exc.code.value}: {exc.message}"
            )
        else:
            run = delivered.run
            await self._store.record_outcome(
                schedule.schedule_id,
                session_id=delivered.session_id,
                run_id=run.run_id if run is not None else None,
            )
            firing = Firing(schedule_id=schedule.schedule_id, fired_at=now, delivered=delivered)
        self.firings.append(firing)
        if self._on_fired is not None:
            self._on_fired(firing)
        return firing

    async def _wait_s(self) -> float:
        schedules = await self._store.list(self._project)
        if not schedules:
            return self._poll
        nearest = min(s.next_due_at for s in schedules)
        return max(0.0, min(self._poll, (nearest - self.clock.now()).total_seconds()))

    async def _loop(self) -> None:
        while True:
            try:
                await self.clock.sleep(await self._wait_s())
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:  # a storage hiccup (or a bug in one firing) must not end the scheduler
                log.exception("scheduler tick failed")
                await self.clock.sleep(self._poll)
