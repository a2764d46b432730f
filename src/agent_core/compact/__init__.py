"""Context compaction (compact.md): cut-point policy, the internal compact fork, payload validation and the
loop hooks for background and recovery compaction. :func:`install` wires it into a ``RunManager``."""

from agent_core.compact.hooks import AgentCompaction, CompactionService, install
from agent_core.compact.payload import CompactionPayload
from agent_core.compact.policy import CutPlan, compaction_threshold, effective_keep_recent, plan_cut

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
