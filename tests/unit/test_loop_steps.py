"""The pure step choice after a model answer (issue 15 item 3)."""

from __future__ import annotations

from agent_core._loop.steps import MAX_CONTINUATIONS, Continue, EndTurn, Finish, RunTools, next_step
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
