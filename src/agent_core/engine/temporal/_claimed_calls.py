"""A worker's tool calls under their claims in the store (:mod:`agent_core._storage.tool_claims`).

A call executes only under its claim, taken by the worker's process before the call's gates: a replan
makes the lost plan's calls claim nothing more, waits while a live process (a worker frozen or starved
past its heartbeat timeout) still executes one of them, and then continues from the store. A call whose
claimant died without a result is executed again (the in-doubt case, as after a crash; logged, and
counted in the claim's ``attempts``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from agent_core._concurrency import wait_uninterrupted
from agent_core._storage.protocol import SessionStore
from agent_core._storage.tool_claims import CallKey, ToolCallClaims
from agent_core.engine.temporal._contexts import RunContexts
from agent_core.engine.temporal._step_attempts import StepAttempts

T = TypeVar("T")
log = logging.getLogger(__name__)

_EXECUTING: set[str] = set()
"""The claim keys of the tool calls executing in this process: a claim of this process's owner id that
is not here was left by an ended task (it may be taken over)."""


class ClaimedCalls:
    """The tool calls this worker process claims and executes, and a replan's wait for the calls of the
    lost plan; ``attempts`` heartbeats the step attempt that waits."""

    def __init__(
        self, contexts: RunContexts, claims: ToolCallClaims, attempts: StepAttempts, heartbeat_s: float
    ) -> None:
        self.contexts = contexts
        self.claims = claims
        self.attempts = attempts
        self.heartbeat_s = heartbeat_s

    @property
    def _storage(self) -> SessionStore:
        return self.contexts.manager.services.storage

    async def claim(self, key: CallKey, plan_id: str) -> bool:
        """Claims the call for this process; ``False`` when it is not this attempt's to execute (its
        plan was replaced, its result is stored, or a live process executes it)."""
        storage = self._storage
        me = storage.claim_owner
        claim = await self.claims.claim(key, plan_id, me)
        while claim.state == "held" and claim.owner is not None:
            holder = claim.owner
            if holder == me and key.claim_key in _EXECUTING:
                return False
            if holder != me and await storage.live_owners([holder]):
                return False
            claim = await self.claims.claim(key, plan_id, me, dead=holder)
            if claim.taken_over:
                log.warning(
                    "run %s: tool call %s was started by %s, which ended without its result; executing it"
                    " again (execution %d)",
                    key.run_id,
                    key.tool_call_id,
                    holder,
                    claim.attempts,
                )
        return claim.state == "won"

    async def execute(self, key: CallKey, call: Callable[[], Awaitable[T]], done: Callable[[], bool]) -> T:
        """Executes the claimed call ``call()``, then settles its claim (``done()``: its result is stored)."""
        _EXECUTING.add(key.claim_key)
        try:
            return await call()
        finally:
            _EXECUTING.discard(key.claim_key)
            finished = done()
            me = self._storage.claim_owner
            await wait_uninterrupted(self.claims.settle(key, me, done=finished))

    async def settle_lost(self, run_id: str) -> None:
        """Waits (heartbeating) until the calls of a lost tool turn that still run on this worker have
        ended: their activities were lost (e.g. a heartbeat timed out on a loaded machine), not their
        work, so their results are stored before the turn is staged again and no call runs twice."""
        ctx = self.contexts.cached(run_id)
        running = [t for t in ctx.tools.running.values() if not t.done()] if ctx and ctx.tools else []
        while running:
            _, pending = await asyncio.wait(running, timeout=self.heartbeat_s)
            running = list(pending)
            self.attempts.beat()

    async def settle_claimed(self, run_id: str, assistant_node_id: str) -> None:
        """Waits (heartbeating) while a live process executes one of the answer's calls under its claim
        (a worker frozen or starved past its heartbeat timeout resumes and stores the call's result);
        a dead claimant's call is taken over when it is claimed again."""
        storage = self._storage
        me = storage.claim_owner
        waited = False
        while True:
            running = await self.claims.running(run_id, assistant_node_id)
            others = sorted({c.owner for c in running if c.owner != me})
            live = await storage.live_owners(others) if others else set()
            mine = [c for c in running if c.owner == me and c.claim_key in _EXECUTING]
            if not live and not mine:
                return
            if not waited:
                log.warning(
                    "run %s: waiting for tool calls still executed by %s before staging them again",
                    run_id,
                    ", ".join(sorted(live)) or "this process",
                )
                waited = True
            self.attempts.beat()
            await asyncio.sleep(self.heartbeat_s)
