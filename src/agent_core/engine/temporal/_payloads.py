"""What crosses Temporal: ids, counters and small results — never a history (Temporal's payload limit is
2 MB and its history limit 50 MB). Plain dataclasses, safe to import inside the workflow sandbox."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

WORKFLOW_NAME = "soong.run"
BEGIN = "soong.begin_run"
MODEL = "soong.model_step"
AFTER = "soong.after_model_step"
FINISH = "soong.finish_run"
PERMISSION_REQUESTED = "permission_requested"
PERMISSION_ANSWERED = "permission_answered"
PENDING_PERMISSIONS = "pending_permissions"
PERMISSION_ANSWER = "permission_answer"
MAX_MESSAGE_BYTES = 1_000_000
"""Upper bound of the user message carried by :class:`RunInput` (below Temporal's 2 MB payload limit)."""


@dataclass
class RunInput:
    """The workflow's input: the run (its row is already stored) and the user message that starts it."""

    run_id: str
    session_id: str
    message_json: str
    heartbeat_timeout_ms: int = 10_000


@dataclass
class Checkpoint:
    """The loop state between steps, enough to continue the run on another worker.

    ``tip_node_id`` is the agent's tip when the step was handed over: a model step finding a newer
    assistant node of this run at the tip knows its model call already completed (it is not repeated).
    """

    turns: int = 0
    continuations: int = 0
    stop_denials: int = 0
    usages: list[dict[str, Any]] = field(default_factory=list)
    final: dict[str, Any] | None = None
    final_node_id: str | None = None
    budget: dict[str, Any] = field(default_factory=dict)
    repeat: dict[str, Any] = field(default_factory=dict)
    tip_node_id: str | None = None


StepKind = Literal["model", "after", "end"]


@dataclass
class Step:
    """What the workflow does next: a model call, the step after a model answer, or the run's end."""

    kind: StepKind
    checkpoint: Checkpoint
    assistant_node_id: str | None = None
    outcome: dict[str, Any] | None = None
    """The run's end (``status``, ``end_reason``, ``error``, ``final_node_id``) when ``kind == "end"``."""


@dataclass
class StepInput:
    run_id: str
    session_id: str
    step: Step


@dataclass
class RunResult:
    """The workflow's result, read from the stored run after its terminal events were written."""

    run_id: str
    status: str
    end_reason: str | None


@dataclass
class PermissionSignal:
    """A permission request (``body_json``: the ``PermissionRequest``) or its answer (the
    ``PermissionDecision``), keyed by a request id that stays the same when the tool step is retried."""

    request_id: str
    body_json: str
