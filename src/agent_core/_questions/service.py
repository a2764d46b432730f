"""The runtime's question channel: the question callback and the deferred questions (issue 37 item 3).

Contract (``AgentRuntime(question_callback=...)``, ``AgentRuntime.answer_question``):

* the callback receives a :class:`~agent_core.types.permissions.UserQuestion` (a copy: it cannot change
  anything) and returns the answer text, or ``agent_core.permissions.DEFER``: the question then stays
  pending until ``answer_question(request_id, answer)`` resolves it from any task of the runtime's loop
  (no timeout; the first answer wins; answering a question that is not pending is a ``validation_error``);
* a question waits until it is answered or its run stops waiting (cancellation): an abandoned question is
  never answered later, and a runtime that closes (or a server that restarts) abandons every pending one;
* questions do not wait for each other (sub-agents may ask at the same time); a surface that shows one at
  a time (the terminal) serialises them itself;
* without a callback nobody can answer: :attr:`QuestionService.available` is false and the tool tells the
  model so (an error result it can act on) instead of waiting.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from agent_core.errors import ErrorCode, ToolError
from agent_core.permissions._deferred import DeferredAnswers, PermissionDeferral
from agent_core.types.permissions import UserQuestion

QuestionCallback = Callable[[UserQuestion], Awaitable[str | PermissionDeferral]]
MAX_ANSWER_CHARS = 20_000


def check_answer(value: object) -> str:
    """A callback's or caller's answer: non-empty text of at most :data:`MAX_ANSWER_CHARS` characters."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("the answer must be a non-empty string")
    if len(value) > MAX_ANSWER_CHARS:
        raise ValueError(f"the answer is longer than {MAX_ANSWER_CHARS} characters")
    return value


class QuestionService:
    """One per runtime: the question callback and the questions waiting for a deferred answer."""

    def __init__(self, callback: QuestionCallback | None) -> None:
        self._callback = callback
        self.deferred: DeferredAnswers[str] = DeferredAnswers("question")

    @property
    def available(self) -> bool:
        """Someone can answer (a callback is configured)."""
        return self._callback is not None

    def use_callback(self, callback: QuestionCallback | None) -> None:
        self._callback = callback

    async def ask(self, question: UserQuestion) -> str:
        """The user's answer to ``question`` (waits; cancellation abandons it). A callback that fails or
        returns no text raises ``ToolError`` (the model gets the message)."""
        if self._callback is None:
            raise ToolError(ErrorCode.tool_not_available, "no question callback is configured")
        pending = self.deferred.open(question.request_id)
        try:
            try:
                raw: object = self._callback(question.model_copy(deep=True))
                if inspect.isawaitable(raw):
                    raw = await raw
            except ToolError:
                raise
            except Exception as exc:
                raise ToolError(
                    ErrorCode.internal_error,
                    f"the question could not be shown to the user ({type(exc).__name__}: {exc})",
                    cause=exc,
                ) from exc
            if isinstance(raw, PermissionDeferral):
                raw = await pending
        finally:
            self.deferred.discard(question.request_id)
        try:
            return check_answer(raw)
        except ValueError as exc:
            raise ToolError(
                ErrorCode.cancelled, f"the user gave no answer ({exc}); decide yourself or ask again later"
            ) from exc

    def answer(self, request_id: str, answer: str) -> None:
        """Resolves a deferred question (``validation_error`` when it is not pending or the answer is
        not text)."""
        from agent_core.errors import AgentCoreError

        try:
            text = check_answer(answer)
        except ValueError as exc:
            raise AgentCoreError(
                ErrorCode.validation_error, str(exc), details={"request_id": request_id}
            ) from exc
        self.deferred.answer(request_id, text)
