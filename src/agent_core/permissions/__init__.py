"""Permission policy (pure) and the per-runtime permission gate (tools.md §15)."""

from agent_core.permissions.deferred import DEFER, DeferredAnswers, PermissionDeferral
from agent_core.permissions.gate import (
    GateOutcome,
    PermissionCallback,
    PermissionGate,
    coerce_decision,
    summarize_arguments,
)
from agent_core.permissions.policy import CallFacts, PermissionPolicy, PolicyDecision

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
