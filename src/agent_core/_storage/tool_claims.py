"""Claims of tool calls by the process executing them (docs/scale-out.md#3-what-a-workflow-does crash
semantics; migration 5).

The temporal engine executes each tool call as an activity on the worker that staged the call's turn. An
activity whose worker froze past its heartbeat timeout is retried elsewhere while the call may still run
on the frozen worker, so "a completed tool call is never executed twice" needs the store:

* ``tool_turns`` holds each run's current tool plan. Staging a turn again (``stage``) makes the calls of
  every older plan claim nothing more: a worker that resumes after its plan was replaced executes none
  of the calls it had not started.
* ``tool_call_claims`` has one row per call (``claim_key``: the answer's node id and the call id), taken
  atomically before the call executes (``claim``): the first claimant of the current plan wins; a
  second one gets the row as it is — ``done`` (a result is stored), ``running`` (its owner executes it:
  the caller waits while that owner is alive) or a call it may take over: ``released`` (its owner ended
  without a result) or ``running`` with a dead owner — the in-doubt case: the call started and may have
  had effects, and it is executed again (``attempts`` counts the executions; the engine logs each
  takeover), as an interrupted call is after a crash.
* ``stopped_attempts`` records a step attempt that stopped after it was superseded (``stopped``): its
  successor on another worker waits for that row (or the owner's death) before it reads the store.

Writes go through the store's single write queue, reads through its read connection; the SQL is portable
(both backends).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from agent_core._storage.writer import Txn
from agent_core.types.base import format_ts

if TYPE_CHECKING:
    from agent_core._storage.protocol import SessionStore

ClaimState = Literal["won", "done", "held", "superseded"]


@dataclass(frozen=True, slots=True)
class CallKey:
    """One tool call of one answer of one run."""

    run_id: str
    session_id: str
    assistant_node_id: str
    tool_call_id: str

    @property
    def claim_key(self) -> str:
        return f"{self.assistant_node_id}:{self.tool_call_id}"


@dataclass(frozen=True, slots=True)
class Claim:
    """The outcome of :meth:`ToolCallClaims.claim`: ``won`` (execute the call), ``done`` (its result is
    stored), ``held`` (``owner`` executes it), ``superseded`` (the caller's plan is not the run's
    current one: it executes nothing more). ``attempts``: how many claimants executed the call."""

    state: ClaimState
    owner: str | None = None
    attempts: int = 0

    @property
    def taken_over(self) -> bool:
        """Won by taking over from a claimant that ended without a result (the in-doubt case)."""
        return self.state == "won" and self.attempts > 1


@dataclass(frozen=True, slots=True)
class RunningClaim:
    claim_key: str
    owner: str


_COLUMNS = "claim_key, run_id, session_id, tool_call_id, owner, status, attempts, claimed_at, updated_at"


class ToolCallClaims:
    """The claim tables of one open :class:`SessionStore`."""

    def __init__(self, storage: SessionStore) -> None:
        self._storage = storage

    async def stage(self, run_id: str, session_id: str, plan_id: str) -> None:
        """Makes ``plan_id`` the run's current tool plan (older plans claim nothing from now on)."""
        now = format_ts()

        def op(txn: Txn) -> None:
            txn.execute(
                "INSERT INTO tool_turns (run_id, session_id, plan_id, updated_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET plan_id = excluded.plan_id, updated_at = excluded.updated_at",
                (run_id, session_id, plan_id, now),
            )

        await self._storage.write(op)

    async def claim(self, key: CallKey, plan_id: str, owner: str, *, dead: str | None = None) -> Claim:
        """Claims ``key`` for ``owner`` atomically, if ``plan_id`` is the run's current plan. ``dead``: an
        owner the caller found dead; a ``running`` claim of that owner is taken over."""
        now = format_ts()

        def op(txn: Txn) -> Claim:
            # the plan check locks the run's plan row (PostgreSQL: a concurrent ``stage`` waits for this
            # transaction or makes it see the new plan), so no claim of an older plan commits after it
            current = txn.execute(
                "UPDATE tool_turns SET updated_at = ? WHERE run_id = ? AND plan_id = ?",
                (now, key.run_id, plan_id),
            )
            if current != 1:
                return Claim("superseded")
            inserted = txn.execute(
                f"INSERT INTO tool_call_claims ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, 'running', 1, ?, ?) "
                "ON CONFLICT (claim_key) DO NOTHING",
                (key.claim_key, key.run_id, key.session_id, key.tool_call_id, owner, now, now),
            )
            if inserted == 1:
                return Claim("won", owner, 1)
            rows = txn.fetchall(
                "SELECT owner, status, attempts FROM tool_call_claims WHERE claim_key = ?", (key.claim_key,)
            )
            holder, status, attempts = str(rows[0][0]), str(rows[0][1]), int(rows[0][2])
            if status == "done":
                return Claim("done", holder, attempts)
            if status == "released" or (status == "running" and holder == dead):
                txn.execute(
                    "UPDATE tool_call_claims SET owner = ?, status = 'running', attempts = attempts + 1, "
                    "updated_at = ? WHERE claim_key = ?",
                    (owner, now, key.claim_key),
                )
                return Claim("won", owner, attempts + 1)
            return Claim("held", holder, attempts)

        return await self._storage.write(op)

    async def settle(self, key: CallKey, owner: str, *, done: bool) -> None:
        """Ends ``owner``'s claim: ``done`` (the call's result is stored) or released (it is not: another
        claimant may execute the call)."""
        now = format_ts()
        status = "done" if done else "released"

        def op(txn: Txn) -> None:
            txn.execute(
                "UPDATE tool_call_claims SET status = ?, updated_at = ? "
                "WHERE claim_key = ? AND owner = ? AND status = 'running'",
                (status, now, key.claim_key, owner),
            )

        await self._storage.write(op)

    async def running(self, run_id: str, assistant_node_id: str) -> list[RunningClaim]:
        """The claims of the answer's calls that their owners still hold."""
        rows = await self._storage.query(
            "SELECT claim_key, owner FROM tool_call_claims WHERE run_id = ? AND status = 'running'", (run_id,)
        )
        prefix = f"{assistant_node_id}:"
        return [RunningClaim(str(r[0]), str(r[1])) for r in rows if str(r[0]).startswith(prefix)]

    async def stopped(self, attempt_key: str, run_id: str, session_id: str) -> None:
        """Records that the step attempt ``attempt_key`` stopped (it writes nothing more)."""
        now = format_ts()

        def op(txn: Txn) -> None:
            txn.execute(
                "INSERT INTO stopped_attempts (attempt_key, run_id, session_id, stopped_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (attempt_key) DO NOTHING",
                (attempt_key, run_id, session_id, now),
            )

        await self._storage.write(op)

    async def has_stopped(self, attempt_key: str) -> bool:
        rows = await self._storage.query(
            "SELECT 1 FROM stopped_attempts WHERE attempt_key = ?", (attempt_key,)
        )
        return bool(rows)
