"""The pure step choice after a model answer (issue 15 item 3)."""

from __future__ import annotations

from agent_core._loop.steps import (
    MAX_CONTINUATIONS,
    REPEAT_SHARE,
    Continue,
    EndTurn,
    Finish,
    RunTools,
    next_step,
    repeated_share,
)
from agent_core.types.content import TextBlock, ToolCallBlock
from agent_core.types.enums import EndReason, RunStatus
from agent_core.types.model import ModelCompleted, StopReason, ToolCall, Usage


def answer(reason: str = "end_turn", *, calls: int = 0) -> ModelCompleted:
    tool_calls = [ToolCall(tool_call_id=f"c{i}", name="code.read_file", arguments={}) for i in range(calls)]
    content = [TextBlock(text="hi")] + [
        ToolCallBlock(tool_call_id=c.tool_call_id, name=c.name, arguments=c.arguments) for c in tool_calls
    ]
    return ModelCompleted(
        content=content,
        tool_calls=tool_calls,
        usage=Usage(),
        stop_reason=StopReason(reason="tool_use" if calls else reason),  # type: ignore[arg-type]
    )


def test_tool_calls_run() -> None:
    step = next_step(answer(calls=2), "node_1", continuations=MAX_CONTINUATIONS)
    assert isinstance(step, RunTools) and [c.tool_call_id for c in step.calls] == ["c0", "c1"]


def test_an_answer_cut_at_max_tokens_continues_until_the_cap() -> None:
    assert next_step(answer("max_tokens"), "node_1", continuations=0) == Continue()
    assert next_step(answer("max_tokens"), "node_1", continuations=MAX_CONTINUATIONS - 1) == Continue()
    step = next_step(answer("max_tokens"), "node_1", continuations=MAX_CONTINUATIONS)
    assert isinstance(step, Finish)
    assert (step.outcome.status, step.outcome.end_reason) == (
        RunStatus.failed,
        EndReason.max_output_tokens_recovery,
    )


def test_a_complete_answer_ends_the_turn() -> None:
    assert next_step(answer(), "node_7", continuations=2) == EndTurn("node_7")


def cut_off(text: str) -> ModelCompleted:
    return ModelCompleted(
        content=[TextBlock(text=text)] if text else [],
        tool_calls=[],
        usage=Usage(),
        stop_reason=StopReason(reason="max_tokens"),
    )


LOOP = "I am a helpful assistant and I can help you with that. " * 12
FRESH = " ".join(f"word{i}" for i in range(120))


def test_a_cut_off_answer_that_loops_on_itself_is_not_continued() -> None:  # issue 32 item 4
    step = next_step(cut_off(LOOP), "node_1", continuations=0, max_output_tokens=512)
    assert isinstance(step, Finish)
    outcome = step.outcome
    assert (outcome.status, outcome.end_reason) == (RunStatus.failed, EndReason.max_output_tokens_recovery)
    assert outcome.error is not None and outcome.error.details["cause"] == "repetition"
    assert outcome.error.details["repeated_share"] > REPEAT_SHARE
    assert "max_output_tokens (512 tokens)" in outcome.error.message and "looping" in outcome.error.message


def test_a_continuation_repeating_the_earlier_text_stops() -> None:
    assert next_step(cut_off(FRESH), "node_1", continuations=0) == Continue()
    step = next_step(cut_off(FRESH), "node_2", continuations=1, earlier_text=FRESH)
    assert isinstance(step, Finish) and step.outcome.error is not None
    assert step.outcome.error.details["cause"] == "repetition"


def test_a_continuation_adding_nothing_stops() -> None:
    step = next_step(cut_off("  \n"), "node_2", continuations=1, earlier_text=FRESH)
    assert isinstance(step, Finish) and step.outcome.error is not None
    assert step.outcome.error.details["cause"] == "no_progress"


def test_a_continuation_with_new_text_goes_on() -> None:
    more = " ".join(f"other{i}" for i in range(120))
    assert next_step(cut_off(more), "node_2", continuations=1, earlier_text=FRESH) == Continue()
    assert repeated_share(FRESH, more) == 0.0
    assert repeated_share("", "too short to judge") == 0.0
