"""Questions from ``internal.ask_user`` on the terminal (issue 37 item 3): the text and the answer.

The question and its numbered options are shown (every model-derived string escaped for the terminal);
the answer line is an option number (``2``), or any other text, taken as the user's own words. An empty
line asks again; end of input, Ctrl-C or no answer within :data:`QUESTION_TIMEOUT_S` leaves the question
unanswered (the model is told and decides itself).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from agent_core.cli._terminal import escape_terminal

if TYPE_CHECKING:
    from agent_core.types.permissions import UserQuestion
    from agent_core.types.runtime import RuntimeEvent

QUESTION_TIMEOUT_S = 600.0
ANSWER_PROMPT = "Your answer: "


CALL_LINE_WAIT_S = 2.0
"""How long a question waits for its call's tool line to be printed (the event is delivered by another task)."""


class ShownCalls:
    """The tool calls whose ``tool_started`` line has been printed: a question is shown after its call's
    line, never in the middle of output still on its way (the question is asked from the tool handler,
    which may start before the event reaches the printer)."""

    def __init__(self) -> None:
        self._seen: dict[str, asyncio.Event] = {}

    def _event(self, call_id: str) -> asyncio.Event:
        return self._seen.setdefault(call_id, asyncio.Event())

    def saw(self, event: RuntimeEvent) -> None:
        if event.event_type.value == "tool_started" and event.tool_call_id:
            self._event(event.tool_call_id).set()

    async def wait(self, call_id: str) -> None:
        """Returns once ``call_id``'s line was printed, or after :data:`CALL_LINE_WAIT_S`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event(call_id).wait(), CALL_LINE_WAIT_S)
        self._seen.pop(call_id, None)


def describe_question(question: UserQuestion) -> str:
    """The lines shown before the answer prompt (no trailing newline)."""
    e = escape_terminal
    who = "" if question.agent_role in ("main", "orchestrator") else f" ({e(question.agent_role)} agent)"
    lines = [f"Question from the agent{who}:", *(f"  {e(line)}" for line in question.question.splitlines())]
    for number, option in enumerate(question.options, start=1):
        lines.append(f"  [{number}] {e(option)}")
    if question.options:
        lines.append("  (a number picks an option; any other text is your own answer)")
    return "\n".join(lines)


def parse_answer(line: str, options: list[str]) -> str | None:
    """The answer a line gives: the option its number names, else the text; ``None`` for an empty line."""
    text = line.strip()
    if not text:
        return None
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1]
    return text
