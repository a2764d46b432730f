"""What the two sides of a dispatched worker run tell each other through the run's row (docs/scale-out.md).

Under the temporal engine the Orchestrator's dispatch step (the *dispatching side*) and the worker run's
steps (the *executing side*) run in different processes, so what the local engine shares in memory
travels in ``runs.metadata_json``:

* ``dispatch_cancel`` — why the dispatching side cancels the child workflow (``reason``, and
  ``timed_out`` when the dispatch's ``timeout_ms`` passed). It is written before the cancellation is
  requested, so the executing side reads it when the cancellation reaches it and ends the run as the local
  engine does: ``aborted`` with error code ``timeout`` (reason ``timeout``) after a timeout, else
  ``cancelled`` with the dispatching side's reason.
* ``budget_base`` — the Orchestrator tree's ``[limits]`` consumption when the worker was dispatched
  (tokens, tool calls, cost, elapsed wall time and the wall clock of that moment). The worker run's budget
  starts from it, as a local worker run charges the Orchestrator's :class:`Budget` object.
* ``budget_end`` — the worker run's budget when it ended (its sub-agents included), written before the
  run's terminal row update; the dispatching side charges the difference to the Orchestrator's budget.

Both sides merge their key into the row's metadata atomically (``SessionStore.merge_run_metadata``), so
a ``dispatch_cancel`` written while the worker run writes ``budget_end`` loses neither.

Parallel worker runs each start from the consumption at their own dispatch and see each other's only
once they ended (locally they share one object live); their sum is charged all the same.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agent_core._loop._limits import Budget
from agent_core._runtime.state import RunState
from agent_core._storage.protocol import SessionStore as Storage
from agent_core.types.enums import AgentRole
from agent_core.types.storage import RunRecord

CANCEL_KEY = "dispatch_cancel"
BASE_KEY = "budget_base"
END_KEY = "budget_end"


async def _update_meta(storage: Storage, run_id: str, **values: Any) -> None:
    """Each key merged into the run's metadata on its own (the other side may merge another one at the
    same moment: a read-modify-write here would lose its write)."""
    for key, value in values.items():
        await storage.merge_run_metadata(run_id, key, value)


def _figures(budget: Budget) -> dict[str, Any]:
    return {"tokens": budget.tokens, "tool_calls": budget.tool_calls, "cost_usd": budget.cost_usd}


# ---- the dispatching side ---------------------------------------------------------------------------


async def note_dispatch(storage: Storage, state: RunState, parent: RunState, **values: Any) -> None:
    """Before the child workflow starts: the Orchestrator tree's consumption now, plus ``values``."""
    budget = parent.budget
    if budget is not None:
        values[BASE_KEY] = {**_figures(budget), "elapsed_ms": budget.elapsed_ms(), "at": time.time()}
    if values:
        await _update_meta(storage, state.run_id, **values)


async def note_cancel(storage: Storage, state: RunState) -> None:
    """Before the child workflow's cancellation is requested: why (the dispatch timed out, or not)."""
    cancel = {"reason": state.cancel_reason or "cancel_requested", "timed_out": state.timed_out}
    await _update_meta(storage, state.run_id, **{CANCEL_KEY: cancel})


def charge_back(row: RunRecord, parent: RunState) -> None:
    """Adds what the ended worker run consumed (from ``budget_base`` to ``budget_end``) to the
    Orchestrator tree's budget; without ``budget_end`` (the run failed outside its loop) its stored usage."""
    budget = parent.budget
    if budget is None:
        return
    meta = json.loads(row.metadata_json or "{}")
    base, end = meta.get(BASE_KEY), meta.get(END_KEY)
    if isinstance(base, dict) and isinstance(end, dict):
        budget.tokens += max(0, int(end["tokens"]) - int(base["tokens"]))
        budget.tool_calls += max(0, int(end["tool_calls"]) - int(base["tool_calls"]))
        budget.cost_usd += max(0.0, float(end["cost_usd"]) - float(base["cost_usd"]))
        return
    usage = json.loads(row.usage_json) if row.usage_json else {}
    budget.tokens += int(usage.get("total_tokens") or 0) or (
        int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)
    )
    budget.cost_usd += float(usage.get("cost_usd") or 0.0)


# ---- the executing side -----------------------------------------------------------------------------


def start_budget(budget: Budget, meta: dict[str, Any]) -> None:
    """The worker run's budget starts from the Orchestrator tree's consumption at dispatch; its wall time
    from the Orchestrator run's start."""
    base = meta.get(BASE_KEY)
    if not isinstance(base, dict):
        return
    budget.tokens = int(base["tokens"])
    budget.tool_calls = int(base["tool_calls"])
    budget.cost_usd = float(base["cost_usd"])
    since = max(0.0, time.time() - float(base["at"]))
    budget.started = time.monotonic() - int(base["elapsed_ms"]) / 1000 - since


async def read_cancel(storage: Storage, state: RunState) -> None:
    """A dispatched worker run whose cancellation arrived: the dispatching side's reason and whether its
    dispatch timed out (``RunState.timed_out``), before its interruption is decided."""
    if state.role != AgentRole.worker or state.cancel_event.is_set():
        return
    row = await storage.get_run(state.run_id)
    cancel = json.loads(row.metadata_json or "{}").get(CANCEL_KEY) if row is not None else None
    if isinstance(cancel, dict):
        state.timed_out = bool(cancel.get("timed_out"))
        state.cancel_reason = state.cancel_reason or str(cancel.get("reason") or "cancel_requested")


async def note_end(storage: Storage, state: RunState) -> None:
    """Before a dispatched worker run's terminal row update: its budget now (``budget_end``)."""
    if state.role != AgentRole.worker or state.budget is None:
        return
    row = await storage.get_run(state.run_id)
    meta = json.loads(row.metadata_json or "{}") if row is not None else {}
    if BASE_KEY in meta:  # written before the child workflow started
        await storage.merge_run_metadata(state.run_id, END_KEY, _figures(state.budget))
