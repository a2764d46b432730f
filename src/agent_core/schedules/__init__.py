"""Cron schedules that produce user messages (surfaces.md §6): store, cron parsing, scheduler service."""

from agent_core.schedules._service import Clock, Firing, SchedulerService, SystemClock
from agent_core.schedules._store import Schedule, ScheduleStore

__all__ = ["Clock", "Firing", "Schedule", "ScheduleStore", "SchedulerService", "SystemClock"]
