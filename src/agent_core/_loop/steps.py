"""What the loop does after a persisted model answer: a typed step chosen by the pure :func:`next_step`.

The driver (``loop/driver.py``) acts on the step: :class:`RunTools` runs the answer's tool calls,
:class:`Continue` asks the model again (an answer cut off by the output limit), :class:`EndTurn` runs the
Stop hooks (they complete the run or ask for another turn) and :class:`Finish` ends the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_core._loop.outcome import LoopOutcome
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.model import ModelCompleted, ToolCall

MAX_CONTINUATIONS = 3
"""How many answers in a row may stop at ``max_tokens`` before the run fails."""


@dataclass(frozen=True, slots=True)
class RunTools:
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True, slots=True)
class Continue:
    """The answer stopped at the output limit: ask the model to go on."""


@dataclass(frozen=True, slots=True)
class EndTurn:
    """A complete answer without tool calls: the Stop hooks decide whether the run completes."""

    final_node_id: str


@dataclass(frozen=True, slots=True)
class Finish:
    outcome: LoopOutcome


NextStep = RunTools | Continue | EndTurn | Finish


def next_step(completed: ModelCompleted, final_node_id: str, *, continuations: int) -> NextStep:
    """The step after the answer ``completed`` (stored as ``final_node_id``); ``continuations`` counts
    the answers before it that stopped at ``max_tokens``."""
    if completed.tool_calls:
        return RunTools(tuple(completed.tool_calls))
    if completed.stop_reason.reason == "max_tokens":
        if continuations + 1 > MAX_CONTINUATIONS:
            return Finish(LoopOutcome(RunStatus.failed, EndReason.max_output_tokens_recovery))
        return Continue()
    return EndTurn(final_node_id)
