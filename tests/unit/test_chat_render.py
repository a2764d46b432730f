"""``cli._chat_render``: Markdown block splitting while streaming, plain-text rendering (no escape codes)."""

from __future__ import annotations

import io

from agent_core.cli._chat_render import ChatPrinter, _split_point
from agent_core.cli._terminal import Output
from agent_core.types.enums import EventType
from agent_core.types.runtime import RuntimeEvent


def test_blocks_split_at_blank_lines_outside_code_fences() -> None:
    assert _split_point("para\n\nnext") == len("para\n\n")
    assert _split_point("```\ncode\n\nmore\n") == 0  # inside an open fence
    assert _split_point("```\ncode\n\n```\n\nafter") == len("```\ncode\n\n```\n\n")
    assert _split_point("one line") == 0


def event(kind: EventType, **payload: object) -> RuntimeEvent:
    return RuntimeEvent(event_id="evt_1", session_id="sess_1", event_type=kind, payload=dict(payload))


def test_plain_printer_escapes_and_indents_children() -> None:
    stream = io.StringIO()
    printer = ChatPrinter(Output(stream), rich=False)
    printer.handle(event(EventType.message_delta, text="Hi \x1b[2J there\n\tok"))
    printer.handle(event(EventType.message_completed, role="assistant", text="Hi \x1b[2J there\n\tok!"))
    printer.handle(
        event(EventType.tool_started, tool_name="agent.create_sub_agent", args_summary='{"task":"a\rb"}')
    )
    printer.handle(event(EventType.tool_started, tool_name="code.list_dir", args_summary="{}"), depth=2)
    printer.handle(event(EventType.tool_completed, tool_name="code.list_dir", duration_ms=3), depth=2)
    printer.handle(event(EventType.tool_completed, tool_name="agent.create_sub_agent", duration_ms=9))
    printer.finish()
    assert stream.getvalue() == (
        "Hi \\x1b[2J there\n    ok!\n"
        '• agent.create_sub_agent {"task":"a b"}\n'  # a CR is folded like any whitespace
        "    • code.list_dir {}\n"
        "      └ code.list_dir ok (3 ms)\n"
        "  └ agent.create_sub_agent ok (9 ms)\n"
    )


def test_reasoning_is_shown_folded_and_unfolded_on_request() -> None:
    """Issue 34: the reasoning streams silently and is shown as one folded line when the answer starts;
    ``/reasoning`` prints it in full; escape codes in it are neutralised."""
    stream = io.StringIO()
    printer = ChatPrinter(Output(stream), rich=False)
    printer.handle(event(EventType.reasoning_delta, text="first \x1b[31mthought\nsecond"))
    printer.handle(event(EventType.reasoning_delta, text=" line\nthird"))
    assert stream.getvalue() == ""  # nothing until the reasoning ends
    printer.handle(event(EventType.message_delta, text="Answer."))
    printer.handle(event(EventType.message_completed, role="assistant", text="Answer.", reasoning="..."))
    printer.finish()
    assert stream.getvalue() == "▸ reasoning (3 lines): first \\x1b[31mthought\nAnswer.\n"
    printer.show_reasoning()
    assert stream.getvalue().endswith("first \\x1b[31mthought\nsecond line\nthird\n")
