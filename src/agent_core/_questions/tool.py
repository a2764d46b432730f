"""``internal.ask_user(question, options?)``: asks the user through the runtime's question channel.

readonly, tags ``internal`` + ``readonly`` (never asks for permission), ``metadata.concurrency =
"parallel"``. Result ``{"answer": str}``. Without anyone to answer (no question callback: a
non-interactive run) the call fails at once with ``tool_not_available`` and a message telling the model
to decide itself; a run cancelled while waiting abandons the question.
"""

from __future__ import annotations

from typing import Any

from agent_core._ids import new_id
from agent_core._questions.definition import (
    ASK_USER_TOOL,
    MAX_OPTION_CHARS,
    MAX_OPTIONS,
    MAX_QUESTION_CHARS,
    ask_user_definition,
)
from agent_core._questions.service import QuestionService
from agent_core._redaction import Redactor
from agent_core.errors import ErrorCode, ToolError
from agent_core.tools._scheduler import Aborted, race_cancel
from agent_core.tools.context import ToolContext
from agent_core.types.model import ToolCall
from agent_core.types.permissions import UserQuestion
from agent_core.types.tools import ToolDefinition

NOBODY_TO_ASK = (
    "nobody can answer questions in this run (it is not interactive): decide yourself, say which "
    "assumption you made in your answer, or end your answer with the question"
)


def _invalid(message: str) -> ToolError:
    return ToolError(ErrorCode.validation_error, f"{ASK_USER_TOOL}: {message}")


def parse_question(arguments: dict[str, Any]) -> tuple[str, list[str]]:
    """``(question, options)`` from already schema-checked arguments, checked again defensively."""
    question = arguments.get("question")
    if not isinstance(question, str) or not question.strip() or len(question) > MAX_QUESTION_CHARS:
        raise _invalid(f"'question' must be a non-empty string of at most {MAX_QUESTION_CHARS} characters")
    raw = arguments.get("options")
    options: list[str] = []
    if raw is not None:
        if not isinstance(raw, list) or len(raw) > MAX_OPTIONS:
            raise _invalid(f"'options' must be a list of at most {MAX_OPTIONS} strings")
        for option in raw:
            if not isinstance(option, str) or not option.strip() or len(option) > MAX_OPTION_CHARS:
                raise _invalid(
                    f"each option must be a non-empty string of at most {MAX_OPTION_CHARS} characters"
                )
            options.append(option)
    return question, options


class AskUserTool:
    """The tool adapter serving ``internal.ask_user``."""

    def __init__(self, service: QuestionService, redactor: Redactor) -> None:
        self._service = service
        self._redactor = redactor

    def definitions(self) -> list[ToolDefinition]:
        return [ask_user_definition()]

    async def execute(self, call: ToolCall, ctx: ToolContext) -> dict[str, Any]:
        question, options = parse_question(call.arguments)
        if not self._service.available:
            raise ToolError(ErrorCode.tool_not_available, NOBODY_TO_ASK)
        r = self._redactor
        asked = UserQuestion(
            request_id=new_id("ask_"),
            session_id=ctx.session_id,
            agent_id=ctx.agent_id,
            run_id=ctx.run_id,
            agent_role=ctx.agent_role,
            tool_call_id=ctx.tool_call_id,
            question=r.text(question),
            options=[r.text(o) for o in options],
        )
        try:  # a cancelled run stops waiting at once (its question is abandoned, never answered later)
            answer = await race_cancel(self._service.ask(asked), ctx.cancel_event)
        except Aborted as exc:
            raise ToolError(
                ErrorCode.cancelled, "the run was cancelled while waiting for the answer"
            ) from exc
        return {"answer": answer}

    async def close(self) -> None:
        return None
