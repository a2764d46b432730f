"""In-process hooks and output guardrails for SDK users: ``AgentRuntime(hooks=[...])``.

Each entry of ``hooks`` is one of the registration classes below: it names the event by its class and
holds a Python callable (sync or ``async``) that receives the event's typed input and returns a
:class:`HookResult` (a :class:`GuardrailResult` for :class:`OutputGuardrail`) or ``None`` (allow,
nothing changed)::

    async def no_force_push(event: PreToolUseInput) -> HookResult | None:
        if "--force" in event.arguments.get("argv", []):
            return HookResult.deny("force pushes are not allowed here")
        return None

    def answer_in_english(event: GuardrailInput) -> GuardrailResult | None:
        return GuardrailResult.reject("answer in English") if looks_foreign(event.answer) else None

    AgentRuntime(hooks=[PreToolUseHook(no_force_push, tool_name="code.run_command"),
                        OutputGuardrail(answer_in_english)])

What each event may do:

* ``SessionStart``, ``PostToolUse``: observe only (a returned deny is recorded and ignored).
* ``UserPromptSubmit``: runs before the user message is stored; may block it (the run fails with
  ``permission_denied``, the message is not stored) or replace it (``HookResult(message=...)``: the
  replacement is stored and sent, the original is not kept).
* ``PreToolUse``: after the call's arguments were validated and before the permission decision; may deny
  the call (the model gets the reason) or replace its arguments (``HookResult(arguments=...)``): the new
  arguments are validated and pre-flighted again, and the hooks after it, the permission gate, the
  prompt and the tool all see the replacement.
* ``Stop``: when the agent would end its turn with a final answer; a deny makes it continue, with the
  reason as a note (as a ``hooks.json`` Stop hook).
* :class:`OutputGuardrail`: on the final answer of a root run, after the Stop hooks; a rejection shows the
  model the reason once, as a note, and the model answers again; a rejection after ``max_retries`` retries
  fails the run (``validation_error``, ``error.type = "guardrail_rejected"``).

Order and audit: for each event the in-process hooks run first, one at a time in the order of ``hooks``,
then the ``hooks.json`` ones; a deny stops the rest of a blocking event (PreToolUse, Stop,
UserPromptSubmit, guardrails). Every in-process hook run is recorded like a shell hook: ``hook_started``
(``command`` = ``python:<name>``, ``rule_index`` -1, ``hook_index`` = its position in ``hooks``),
``hook_completed`` or ``hook_failed``, and ``hook_denied`` for a deny; a call's ``permission_audit``
names the hooks that rewrote its arguments (``arguments_rewritten_by``). Hooks do not run for the
compaction fork or the runtime's internal jobs (memory extraction and recall).

Failures: a callback that raises, returns something else than the result type or ``None``, or (async)
takes longer than ``[hooks] default_timeout_ms`` is recorded as ``hook_failed``; it counts as a deny for
PreToolUse (the call is not run), UserPromptSubmit (the run fails) and guardrails (the run fails), and is
ignored for SessionStart, PostToolUse and Stop. A synchronous callback runs on the event loop: keep it
quick or make it ``async``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from agent_core.types.runtime import UserMessage
from agent_core.types.tools import ToolResult

HookEvent = Literal[
    "SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "OutputGuardrail"
]


@dataclass(frozen=True, kw_only=True, slots=True)
class HookContext:
    """The run an event belongs to."""

    event: HookEvent
    session_id: str
    run_id: str
    agent_id: str
    agent_role: str
    """``main``, ``orchestrator``, ``sub``, ``fork`` or ``worker``."""
    parent_agent_id: str | None
    parent_run_id: str | None
    mode: str
    """``normal`` or ``orchestrator``."""
    project_dir: Path
    home_dir: Path


@dataclass(frozen=True, kw_only=True, slots=True)
class SessionStartInput:
    context: HookContext
    source: Literal["new", "resume"]


@dataclass(frozen=True, kw_only=True, slots=True)
class UserPromptSubmitInput:
    context: HookContext
    prompt: str
    """The message's text."""
    message: UserMessage


@dataclass(frozen=True, kw_only=True, slots=True)
class PreToolUseInput:
    context: HookContext
    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any]
    """The validated arguments (a copy: changing it changes nothing; return ``HookResult(arguments=...)``)."""
    permission: Literal["readonly", "write"]
    tags: tuple[str, ...]
    target_paths: tuple[Path, ...]
    """The resolved paths the call touches (its pre-flight)."""
    target_scope: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class PostToolUseInput:
    context: HookContext
    tool_name: str
    tool_call_id: str
    arguments: dict[str, Any]
    permission: Literal["readonly", "write"]
    tags: tuple[str, ...]
    target_paths: tuple[Path, ...]
    result: ToolResult
    """The result as committed (redacted, large parts stored as artifacts)."""
    duration_ms: int


@dataclass(frozen=True, kw_only=True, slots=True)
class StopInput:
    context: HookContext
    final_text: str
    turn_count: int
    stop_hook_active: bool
    """A Stop hook already made this run continue at least once."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardrailInput:
    context: HookContext
    answer: str
    """The final answer's text."""
    attempt: int
    """1 for the first answer, 2 after one rejection, ..."""


@dataclass(frozen=True, kw_only=True, slots=True)
class HookResult:
    """What a hook decided. ``None`` (or a default ``HookResult()``) allows and changes nothing."""

    decision: Literal["allow", "deny"] = "allow"
    reason: str | None = None
    """Why (shown to the model for a denied tool call or a Stop deny; in the events)."""
    message: str | UserMessage | None = None
    """UserPromptSubmit only: the message to use instead (a ``str`` keeps the original metadata)."""
    arguments: Mapping[str, Any] | None = None
    """PreToolUse only: the arguments to use instead (validated against the tool's schema again)."""

    @classmethod
    def deny(cls, reason: str) -> HookResult:
        return cls(decision="deny", reason=reason)

    @classmethod
    def replace_message(cls, message: str | UserMessage, reason: str | None = None) -> HookResult:
        return cls(message=message, reason=reason)

    @classmethod
    def replace_arguments(cls, arguments: Mapping[str, Any], reason: str | None = None) -> HookResult:
        return cls(arguments=arguments, reason=reason)


@dataclass(frozen=True, kw_only=True, slots=True)
class GuardrailResult:
    """What a guardrail decided about a final answer. ``None`` accepts it."""

    rejected: bool = False
    reason: str | None = None
    """Shown to the model once, with the request to answer again."""

    @classmethod
    def reject(cls, reason: str) -> GuardrailResult:
        return cls(rejected=True, reason=reason)

    @classmethod
    def accept(cls) -> GuardrailResult:
        return cls()


InputT = TypeVar("InputT")
ResultT = TypeVar("ResultT")
Callback = Callable[[InputT], ResultT | Awaitable[ResultT | None] | None]
"""A hook callable: sync or async, given the event's input, returning the result type or ``None``."""


@dataclass(frozen=True, slots=True)
class _Registration(Generic[InputT, ResultT]):
    callback: Callback[InputT, ResultT]
    name: str | None = field(default=None, kw_only=True)
    """Shown in the events (``python:<name>``); default: the callable's qualified name."""

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return str(getattr(self.callback, "__qualname__", None) or type(self.callback).__name__)


@dataclass(frozen=True, slots=True)
class SessionStartHook(_Registration[SessionStartInput, HookResult]):
    """Runs when a session's first run of this runtime starts (``source``: a new or a resumed session)."""


@dataclass(frozen=True, slots=True)
class UserPromptSubmitHook(_Registration[UserPromptSubmitInput, HookResult]):
    """Runs before a root run's user message is stored; may block or replace it."""


@dataclass(frozen=True, slots=True)
class _ToolRegistration(_Registration[InputT, ResultT]):
    tool_name: str | None = field(default=None, kw_only=True)
    """Only calls of this tool (exact canonical name)."""
    tag: str | None = field(default=None, kw_only=True)
    """Only calls of tools with this tag."""

    def matches(self, tool_name: str, tags: tuple[str, ...]) -> bool:
        return (self.tool_name is None or tool_name == self.tool_name) and (
            self.tag is None or self.tag in tags
        )


@dataclass(frozen=True, slots=True)
class PreToolUseHook(_ToolRegistration[PreToolUseInput, HookResult]):
    """Runs before the permission decision of each matching tool call; may deny it or replace its arguments."""


@dataclass(frozen=True, slots=True)
class PostToolUseHook(_ToolRegistration[PostToolUseInput, HookResult]):
    """Runs after each matching tool call's result was stored (observe only)."""


@dataclass(frozen=True, slots=True)
class StopHook(_Registration[StopInput, HookResult]):
    """Runs when an agent would end its turn; a deny makes it continue with the reason."""


@dataclass(frozen=True, slots=True)
class OutputGuardrail(_Registration[GuardrailInput, GuardrailResult]):
    """Judges the final answer of each root run; a rejection makes the model answer again."""

    max_retries: int = field(default=1, kw_only=True)
    """Rejections the model may answer again after; one more fails the run."""


Hook = SessionStartHook | UserPromptSubmitHook | PreToolUseHook | PostToolUseHook | StopHook | OutputGuardrail
"""Anything ``AgentRuntime(hooks=[...])`` accepts."""
