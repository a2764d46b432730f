"""Cron schedules whose firings deliver a message to a session's inbox (docs/jobs-and-schedules.md):
store, cron parsing, scheduler service."""

from agent_core.schedules._service import Clock, Delivered, Firing, SchedulerService, SystemClock
from agent_core.schedules._store import Schedule, ScheduleStore

__all__ = ["Clock", "Delivered", "Firing", "Schedule", "ScheduleStore", "SchedulerService", "SystemClock"]
