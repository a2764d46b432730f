"""Permission policy (pure) and the per-runtime permission gate (docs/permissions.md)."""

from agent_core.permissions._deferred import DEFER, DeferredAnswers, PermissionDeferral
from agent_core.permissions._gate import (
    GateOutcome,
    PermissionCallback,
    PermissionGate,
    coerce_decision,
    summarize_arguments,
)
from agent_core.permissions._policy import CallFacts, PermissionPolicy, PolicyDecision

__all__ = [
    "DEFER",
    "CallFacts",
    "DeferredAnswers",
    "GateOutcome",
    "PermissionCallback",
    "PermissionDeferral",
    "PermissionGate",
    "PermissionPolicy",
    "PolicyDecision",
    "coerce_decision",
    "summarize_arguments",
]
