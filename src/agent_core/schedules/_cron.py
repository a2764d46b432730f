"""Cron expressions (docs/jobs-and-schedules.md#schedules), parsed by the maintained ``croniter`` library.

Times are timezone-aware UTC; ``croniter`` is imported on first use so ``import agent_core`` stays cheap.
"""

from __future__ import annotations

from datetime import UTC, datetime

from agent_core.errors import ErrorCode, InvalidArgumentError


def validate_cron(expr: str) -> str:
    """The stripped expression, or ``validation_error`` naming the problem."""
    from croniter import croniter

    text = " ".join(expr.split())
    if not text or not croniter.is_valid(text):
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"invalid cron expression {expr!r} (five fields: minute hour day-of-month month day-of-week)",
            details={"cron": expr},
        )
    return text


def next_after(expr: str, moment: datetime) -> datetime:
    """The first occurrence of ``expr`` strictly after ``moment`` (UTC)."""
    from croniter import croniter

    start = moment.astimezone(UTC)
    value = croniter(expr, start).get_next(datetime)
    assert isinstance(value, datetime)
    return value.astimezone(UTC)
