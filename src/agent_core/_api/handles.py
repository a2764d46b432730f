"""``RunHandle``: the caller's view of one run (docs/runs.md#runhandle)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Generic, Protocol

from agent_core._runtime.state import RunState
from agent_core.errors import AgentCoreError, ErrorCode, InvalidArgumentError, NotFoundError, error_for
from agent_core.types.content import ErrorPayload
from agent_core.types.enums import EndReason, RunMode, RunStatus
from agent_core.types.permissions import PermissionMode
from agent_core.types.runtime import InspectResult, RuntimeEvent, UserMessage

if TYPE_CHECKING:
    from typing_extensions import TypeVar

    from agent_core.types._results import CancelResult

    OutputT = TypeVar("OutputT", default=Any)
else:
    from typing import TypeVar

    OutputT = TypeVar("OutputT")
    """The run's structured output type (``Any`` unless ``start(output_schema=SomeModel)``)."""


class RunOwner(Protocol):
    """What a handle asks of the runtime that started its run (``AgentRuntime``)."""

    async def _cancel_run(self, state: RunState) -> CancelResult: ...

    async def _inspect_child(
        self, parent: RunState, child_run_id: str, include_sensitive: bool
    ) -> InspectResult: ...


class RunHandle(Generic[OutputT]):
    """A started (or queued) run. ``events()`` is a single-consumer live stream; history comes from replay.

    ``RunHandle[M]`` (what ``start(..., output_schema=M)`` returns for a Pydantic class ``M``) types
    ``await run.output()`` as ``M``; other runs are ``RunHandle[Any]``.
    """

    __slots__ = ("_runtime", "_state")

    def __init__(self, runtime: RunOwner, state: RunState) -> None:
        self._runtime = runtime
        self._state = state

    @property
    def run_id(self) -> str:
        return self._state.run_id

    @property
    def session_id(self) -> str:
        return self._state.session_id

    @property
    def agent_id(self) -> str:
        return self._state.agent_id

    @property
    def status(self) -> RunStatus:
        return self._state.status

    @property
    def mode(self) -> RunMode:
        return self._state.mode

    @property
    def permission_mode(self) -> PermissionMode:
        """The run's permission mode (``AgentRuntime.start(permission_mode=...)`` or the configured one)."""
        return self._state.permission_mode

    @property
    def end_reason(self) -> EndReason | None:
        return self._state.end_reason

    @property
    def error(self) -> ErrorPayload | None:
        return self._state.error

    @property
    def parent_run_id(self) -> str | None:
        """The run that started this one (a child agent's, worker's or compaction run), else ``None``."""
        parent = self._state.parent
        return parent.run_id if parent is not None else None

    @property
    def message(self) -> UserMessage | None:
        """The user message the run was started with (``None`` for runs started without one)."""
        return self._state.message

    def events(self, debug: bool = False, include_children: bool = False) -> AsyncIterator[RuntimeEvent]:
        """The run's live events (user-visible only unless ``debug``); ends after the terminal event.

        With ``include_children`` the stream also carries the live events of every descendant run (sub,
        fork, worker, compaction), as :class:`~agent_core.types.runtime.NestedRuntimeEvent` tagged with
        ``run_id``, ``agent_id``, ``parent_run_id`` and ``parent_tool_call_id`` (the agent-tool call that
        started the emitting run), in the order they happen; ``child_events()`` is unchanged."""
        return self._state.channel.subscribe(debug=debug, include_children=include_children)

    async def cancel(self) -> CancelResult:
        """Cancels the whole run; waits at most ``runtime.cancel_timeout_ms`` for it to stop."""
        return await self._runtime._cancel_run(self._state)

    async def wait(self) -> RunStatus:
        """Waits until the run is terminal (does not consume the event stream)."""
        await self._state.done.wait()
        return self._state.status

    async def output(self) -> OutputT:
        """Waits for the run and returns its validated structured output.

        The value is a model instance when ``output_schema`` was a Pydantic class, else the JSON value.
        Raises ``validation_error`` when the run was started without ``output_schema``; a run that did not
        complete raises its own error (``AgentCoreError`` with the run error's code and details, e.g.
        ``validation_error`` with ``details.last_output`` after the retries were spent).
        """
        await self._state.done.wait()
        state = self._state
        if state.output_schema is None:
            raise InvalidArgumentError(
                ErrorCode.validation_error, "this run was started without output_schema"
            )
        if state.status == RunStatus.completed and state.output_accepted:
            value: OutputT = state.output_value
            return value
        if state.error is not None:
            raise AgentCoreError.from_payload(state.error)
        code = ErrorCode.cancelled if state.status == RunStatus.cancelled else ErrorCode.internal_error
        reason = state.end_reason.value if state.end_reason else "unknown"
        raise error_for(code, f"the run ended {state.status.value} ({reason}) without an output")

    async def inspect_child(self, child_run_id: str, include_sensitive: bool = False) -> InspectResult:
        """Full detail of a child run created directly by this run."""
        return await self._runtime._inspect_child(self._state, child_run_id, include_sensitive)

    def child_events(self, child_run_id: str, debug: bool = False) -> AsyncIterator[RuntimeEvent]:
        """Live events of a direct child run (only events emitted after subscription)."""
        child = self._state.children.get(child_run_id)
        if child is None:
            raise NotFoundError(
                ErrorCode.validation_error, f"run {child_run_id!r} is not a child run of {self.run_id!r}"
            )
        return child.channel.subscribe(debug=debug)

    def __repr__(self) -> str:
        return f"RunHandle(run_id={self.run_id!r}, status={self.status.value!r})"
