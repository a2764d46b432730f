"""What the loop does after a persisted model answer: a typed step chosen by the pure :func:`next_step`.

The driver (``loop/driver.py``) acts on the step: :class:`RunTools` runs the answer's tool calls,
:class:`Continue` asks the model again (an answer cut off by the output limit), :class:`EndTurn` runs the
Stop hooks (they complete the run or ask for another turn) and :class:`Finish` ends the run.

An answer cut off by ``max_output_tokens`` is continued at most :data:`MAX_CONTINUATIONS` times, and
never when the cut-off answer adds nothing (no text) or repeats what the chain already produced: when more
than :data:`REPEAT_SHARE` of its :data:`REPEAT_NGRAM`-word sequences occurred before (earlier in the chain
or earlier in itself), a weak model is looping and another maximum-length call would only repeat it. Each
of those stops ends the run ``failed`` with ``max_output_tokens_recovery`` and an error whose
``details.cause`` is ``repetition``, ``no_progress`` or ``continuation_limit``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from agent_core._loop.outcome import LoopOutcome
from agent_core.errors import ErrorCode
from agent_core.types.content import ErrorPayload, text_of
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.model import ModelCompleted, ToolCall

MAX_CONTINUATIONS = 3
"""How many answers in a row may stop at ``max_tokens`` before the run fails."""
REPEAT_NGRAM = 8
"""Length in words of the sequences compared by the repetition check."""
REPEAT_SHARE = 0.5
"""A cut-off answer whose sequences were already produced above this share is not continued."""
CONTINUATION_KEYS = ("model.max_output_tokens", "model.temperature", "model.name")


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


def next_step(
    completed: ModelCompleted,
    final_node_id: str,
    *,
    continuations: int,
    earlier_text: str = "",
    max_output_tokens: int | None = None,
) -> NextStep:
    """The step after the answer ``completed`` (stored as ``final_node_id``); ``continuations`` counts
    the answers before it that stopped at ``max_tokens`` and ``earlier_text`` is their text."""
    if completed.tool_calls:
        return RunTools(tuple(completed.tool_calls))
    if completed.stop_reason.reason == "max_tokens":
        text = text_of(completed.content)
        if not text.strip():
            return _stop("no_progress", continuations, max_output_tokens)
        share = repeated_share(earlier_text, text)
        if share > REPEAT_SHARE:
            return _stop("repetition", continuations, max_output_tokens, share)
        if continuations + 1 > MAX_CONTINUATIONS:
            return _stop("continuation_limit", continuations, max_output_tokens)
        return Continue()
    return EndTurn(final_node_id)


def repeated_share(earlier: str, new: str, n: int = REPEAT_NGRAM) -> float:
    """The share of ``new``'s ``n``-word sequences that already occurred, in ``earlier`` or earlier in
    ``new`` itself (0.0 for a text shorter than ``n`` words)."""
    words = new.split()
    if len(words) < n:
        return 0.0
    seen = _ngrams(earlier.split(), n)
    repeated = 0
    total = len(words) - n + 1
    for i in range(total):
        gram = tuple(words[i : i + n])
        if gram in seen:
            repeated += 1
        else:
            seen.add(gram)
    return repeated / total


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


Cause = Literal["repetition", "no_progress", "continuation_limit"]


def _stop(cause: Cause, continuations: int, limit: int | None, share: float = 0.0) -> Finish:
    cap = f"max_output_tokens ({limit} tokens)" if limit is not None else "max_output_tokens"
    answers = f"{continuations + 1} answer(s) in a row"
    if cause == "repetition":
        why = (
            f"the answer stopped at {cap} and repeats text it already produced "
            f"({share:.0%} of its {REPEAT_NGRAM}-word sequences): the model is looping"
        )
    elif cause == "no_progress":
        why = f"the answer stopped at {cap} without adding any text"
    else:
        why = f"{answers} stopped at {cap} ({MAX_CONTINUATIONS} continuations allowed)"
    message = (
        f"{why}; stopped instead of asking the model to continue. Raise model.max_output_tokens, lower "
        "model.temperature or use a stronger model (model.name)"
    )
    error = ErrorPayload(
        type="max_output_tokens",
        code=ErrorCode.validation_error,
        message=message,
        retryable=False,
        details={
            "cause": cause,
            "continuations": continuations,
            "max_output_tokens": limit,
            "repeated_share": round(share, 3),
            "config_keys": list(CONTINUATION_KEYS),
        },
        redacted=True,
    )
    return Finish(LoopOutcome(RunStatus.failed, EndReason.max_output_tokens_recovery, error=error))
