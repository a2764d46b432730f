"""Background jobs of offloaded tool calls (docs/jobs-and-schedules.md#background-jobs): installed only when
``[tools] offload_after_ms > 0``; otherwise nothing here is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_core.jobs._manager import PLACEHOLDER, JobManager, placeholder_text
from agent_core.jobs._store import JobRecord, JobStore
from agent_core.jobs._tools import JobToolsAdapter

if TYPE_CHECKING:
    from agent_core._inbox.service import Inbox
    from agent_core._runtime.runs import RunManager

__all__ = [
    "PLACEHOLDER",
    "JobManager",
    "JobRecord",
    "JobStore",
    "JobToolsAdapter",
    "install",
    "placeholder_text",
]


def install(manager: RunManager, inbox: Inbox) -> JobManager:
    """Builds the job manager (``RunFeatures.jobs``): the executor's offload hook and the job tools; job
    results reach the sessions through ``inbox``."""
    tools = manager.services.settings.tools
    jobs = JobManager(
        manager, inbox, offload_after_ms=tools.offload_after_ms, wake_on_completion=tools.wake_on_completion
    )
    manager.services.executor.offload = jobs
    manager.services.tools.register_adapter(JobToolsAdapter(jobs), internal=True)
    return jobs
