"""Context compaction (docs/compaction.md): cut-point policy, the internal compact fork, payload validation
and the compaction service (background and recovery compaction in the loop). :func:`install` builds the
service (``RunFeatures.compaction``). Names load with their module on first use (cold start)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_core._compact.payload import CompactionPayload
    from agent_core._compact.policy import CutPlan, compaction_threshold, effective_keep_recent, plan_cut
    from agent_core._compact.service import AgentCompaction, CompactionService, install

__all__ = [
    "AgentCompaction",
    "CompactionPayload",
    "CompactionService",
    "CutPlan",
    "compaction_threshold",
    "effective_keep_recent",
    "install",
    "plan_cut",
]

_HOMES = {
    "AgentCompaction": "agent_core._compact.service",
    "CompactionPayload": "agent_core._compact.payload",
    "CompactionService": "agent_core._compact.service",
    "CutPlan": "agent_core._compact.policy",
    "compaction_threshold": "agent_core._compact.policy",
    "effective_keep_recent": "agent_core._compact.policy",
    "install": "agent_core._compact.service",
    "plan_cut": "agent_core._compact.policy",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
