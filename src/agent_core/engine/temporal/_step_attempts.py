"""Supersession of a retried step attempt (the ``model`` and ``after`` activities).

A step attempt that was lost (its heartbeat timed out) or whose worker shuts down is cancelled and records
that it stopped (:meth:`ToolCallClaims.stopped`); its successor waits for that record (or for the old
process's death) before it reads the store, so a superseded attempt never writes after its successor
started. The heartbeat details (the process's claim owner id and the attempt) tell the successor which
attempt it supersedes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import activity

from agent_core._concurrency import wait_uninterrupted
from agent_core._storage.protocol import SessionStore
from agent_core._storage.tool_claims import ToolCallClaims
from agent_core.engine.temporal._contexts import RunContexts
from agent_core.engine.temporal._payloads import Step, StepInput

log = logging.getLogger(__name__)

SUPERSEDED_WAIT_HEARTBEATS = 10
"""How many heartbeat timeouts (at least 60 s) a retried step waits for the live process of the attempt
it supersedes to stop that attempt."""


class StepAttempts:
    """The step attempts of one worker process: the loop step each one runs (by attempt key) and the
    wait of a retried attempt for the attempt it supersedes; ``heartbeat_s`` is the interval between
    heartbeats while it waits."""

    def __init__(self, contexts: RunContexts, claims: ToolCallClaims, heartbeat_s: float) -> None:
        self.contexts = contexts
        self.claims = claims
        self.heartbeat_s = heartbeat_s
        self._steps: dict[str, asyncio.Future[Any]] = {}
        """The loop step running under each step attempt of this worker (by attempt key)."""

    @property
    def _storage(self) -> SessionStore:
        return self.contexts.manager.services.storage

    def beat(self) -> None:
        """Heartbeats with the details a retried attempt reads (``_after_superseded``): this process's
        claim owner id and this attempt."""
        activity.heartbeat(self._storage.claim_owner, attempt_key())

    def track(self, task: asyncio.Future[Any]) -> str:
        """Registers ``task`` as the loop step of this attempt (until it is done); returns the attempt."""
        attempt = attempt_key()
        self._steps[attempt] = task
        task.add_done_callback(lambda _: self._steps.pop(attempt, None))
        return attempt

    async def run(self, inp: StepInput, body: Callable[[StepInput], Awaitable[Step]]) -> Step:
        """One attempt of a retried step: after the attempt it supersedes stopped; when it fails, it
        records that it stopped (a lost attempt records it once its step ended: :meth:`stop`)."""
        await self._after_superseded(inp.run_id)
        try:
            return await body(inp)
        except BaseException:
            attempt = attempt_key()
            if attempt not in self._steps:  # no step of this attempt runs on
                with contextlib.suppress(Exception):  # recorded whole, even when cancelled again
                    await wait_uninterrupted(self.claims.stopped(attempt, inp.run_id, inp.session_id))
            raise

    async def stop(self, task: asyncio.Future[Any], attempt: str, run_id: str, session_id: str) -> None:
        """Waits until the superseded attempt's step ended, then records that it stopped."""
        await asyncio.wait({task})
        await self.claims.stopped(attempt, run_id, session_id)

    async def _after_superseded(self, run_id: str) -> None:
        """A retried step attempt: waits (heartbeating) until the attempt before it stopped — on this
        worker its step is cancelled; on another one, until it recorded that it stopped or its process
        died (a frozen worker stops once it resumes and learns its attempt was lost) — and forgets the
        run's context (the store holds what that attempt wrote). Then heartbeats this attempt's details."""
        info = activity.info()
        previous = list(info.heartbeat_details)
        if info.attempt > 1 and len(previous) >= 2:
            owner, attempt = str(previous[0]), str(previous[1])
            if owner == self._storage.claim_owner:
                task = self._steps.get(attempt)
                if task is not None:
                    task.cancel()
                    while not task.done():
                        await asyncio.wait({task}, timeout=self.heartbeat_s)
                        self.beat()
            else:
                await self._wait_stopped(run_id, owner, attempt)
            self.contexts.drop(run_id)
        self.beat()

    async def _wait_stopped(self, run_id: str, owner: str, attempt: str) -> None:
        """Waits (heartbeating) until the attempt ``attempt`` of the live process ``owner`` recorded that
        it stopped — at most ``SUPERSEDED_WAIT_HEARTBEATS`` heartbeat timeouts (a process frozen longer
        is logged and its attempt may still write when it resumes)."""
        storage = self._storage
        timeout = activity.info().heartbeat_timeout
        bound = max(SUPERSEDED_WAIT_HEARTBEATS * (timeout.total_seconds() if timeout else 10.0), 60.0)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + bound
        waited = False
        while await storage.live_owners([owner]) and not await self.claims.has_stopped(attempt):
            if loop.time() > deadline:
                log.warning(
                    "run %s: the superseded step attempt %s of %s did not stop within %.0f s; continuing",
                    run_id,
                    attempt,
                    owner,
                    bound,
                )
                return
            if not waited:
                log.warning("run %s: waiting for the superseded step attempt %s to stop", run_id, attempt)
                waited = True
            self.beat()
            await asyncio.sleep(self.heartbeat_s)


def attempt_key() -> str:
    """This activity attempt, as its successor reads it from the heartbeat details."""
    info = activity.info()
    return f"{info.workflow_id}:{info.workflow_run_id}:{info.activity_id}:{info.attempt}"
