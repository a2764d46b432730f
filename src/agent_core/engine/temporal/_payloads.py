"""What crosses Temporal: ids, counters and small results — never a history (Temporal's payload limit is
2 MB and its history limit 50 MB). Plain dataclasses, safe to import inside the workflow sandbox."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

WORKFLOW_NAME = "soong.run"
WORKFLOW_ID_PREFIX = "soong-run-"
"""A root run's workflow id is this prefix and the run id."""
BEGIN = "soong.begin_run"
MODEL = "soong.model_step"
AFTER = "soong.after_model_step"
FINISH = "soong.finish_run"
TOOL_CALL = "soong.tool_call"
TOOLS_END = "soong.tools_end"
PERMISSION_REQUESTED = "permission_requested"
PERMISSION_ANSWERED = "permission_answered"
PENDING_PERMISSIONS = "pending_permissions"
PERMISSION_ANSWER = "permission_answer"
MAX_MESSAGE_BYTES = 1_000_000
"""Upper bound of the user message carried by :class:`RunInput` (below Temporal's 2 MB payload limit)."""


def own_queue_timeout(heartbeat_timeout_ms: int) -> timedelta:
    """How long a step sent to one worker's own queue may wait to start (a dead worker's steps fail
    after this and the workflow continues elsewhere); a healthy worker polls its queue continuously."""
    return timedelta(milliseconds=max(3 * heartbeat_timeout_ms, 10_000))


@dataclass(slots=True)
class RunInput:
    """The workflow's input: the run (its row is already stored) and the user message that starts it."""

    run_id: str
    session_id: str
    message_json: str
    heartbeat_timeout_ms: int = 10_000
    session_start: bool = False
    """The run's first nodes start with the SessionStart hooks: it is the first run of the session in
    the runtime that started it (``"resume"`` when the session has nodes already, else ``"new"``)."""


@dataclass(slots=True)
class Checkpoint:
    """The loop state between steps, enough to continue the run on another worker.

    ``tip_node_id`` is the agent's tip when the step was handed over: a model step finding a newer
    assistant node of this run at the tip knows its model call already completed (it is not repeated).
    """

    turns: int = 0
    continuations: int = 0
    continued_text: str = ""
    stop_denials: int = 0
    usages: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] | None = None
    final_node_id: str | None = None
    budget: dict[str, Any] = field(default_factory=dict)
    repeat: dict[str, Any] = field(default_factory=dict)
    tip_node_id: str | None = None
    usage_models: list[str] = field(default_factory=list)
    """``provider/model`` of each entry of ``usages`` (a fallback moves a run to another model)."""


StepKind = Literal["model", "after", "tools", "end"]


@dataclass(slots=True)
class PlannedCall:
    """One tool call of a :class:`ToolPlan`: its position in the answer and whether its result is stored."""

    index: int
    tool_call_id: str
    done: bool = False
    is_error: bool = False


@dataclass(slots=True)
class ToolGroup:
    """Calls that run together (``parallel`` / ``agent``: concurrently; ``serial``: one call alone)."""

    kind: str
    calls: list[PlannedCall]


@dataclass(slots=True)
class ToolPlan:
    """The tool calls of one answer, staged on the worker whose own task queue is ``task_queue``: each
    call is an activity there (the worker keeps the turn: gate order, node order, context nodes), the
    groups run one after another."""

    plan_id: str
    task_queue: str
    groups: list[ToolGroup]


@dataclass(slots=True)
class Step:
    """What the workflow does next: a model call, the step after a model answer, the answer's tool calls,
    or the run's end."""

    kind: StepKind
    checkpoint: Checkpoint
    assistant_node_id: str | None = None
    outcome: dict[str, Any] | None = None
    """The run's end (``status``, ``end_reason``, ``error``, ``final_node_id``) when ``kind == "end"``."""
    tools: ToolPlan | None = None
    """The staged tool calls when ``kind == "tools"``."""
    replan: bool = False
    """An ``after`` step run again because the worker holding the staged calls is gone: the run's context
    is rebuilt from the store (stored results are not executed again)."""
    finished: RunResult | None = None
    """The run's terminal events and row, when the step that ended the run also wrote them (``end``)."""


@dataclass(slots=True)
class StepInput:
    run_id: str
    session_id: str
    step: Step
    begin: RunInput | None = None
    """The run's first model step: its ``loop_started`` and first nodes are written first (unless a
    previous attempt stored them)."""


@dataclass(slots=True)
class CallInput:
    """One staged tool call (``index`` in the answer) of ``plan_id``."""

    run_id: str
    plan_id: str
    index: int


@dataclass(slots=True)
class CallResult:
    is_error: bool
    stopped: bool
    """Cancellation or a failed commit ended the turn: no further group runs."""


@dataclass(slots=True)
class ToolsEndInput:
    """The end of a tool turn: ``step`` is the ``tools`` step; calls from ``skip_from`` on are skipped
    (a serial call failed); ``cancelled``: the workflow was cancelled during the turn."""

    run_id: str
    session_id: str
    step: Step
    skip_from: int | None = None
    cancelled: bool = False


@dataclass(slots=True)
class RunResult:
    """The workflow's result, read from the stored run after its terminal events were written."""

    run_id: str
    status: str
    end_reason: str | None


@dataclass(slots=True)
class PermissionSignal:
    """A permission request (``body_json``: the ``PermissionRequest``) or its answer (the
    ``PermissionDecision``), keyed by a request id that stays the same when the tool step is retried."""

    request_id: str
    body_json: str
