"""Type checks of the public methods' arguments: a caller's wrong type is an
:class:`~agent_core.errors.InvalidArgumentTypeError` (a ``TypeError`` with code ``validation_error``) naming
the argument, instead of an ``AttributeError`` or a comparison failure deep inside."""

from __future__ import annotations

from typing import Any

from agent_core.errors import ErrorCode, InvalidArgumentTypeError


def check_type(name: str, value: Any, expected: type | tuple[type, ...], *, optional: bool = False) -> None:
    """Raises unless ``value`` is an ``expected`` instance (or ``None`` when ``optional``); ``bool`` is
    not accepted where an ``int`` is expected."""
    if value is None and optional:
        return
    wanted = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, wanted) and not (isinstance(value, bool) and bool not in wanted and int in wanted):
        return
    names = " or ".join(t.__name__ for t in wanted) + (" or None" if optional else "")
    raise InvalidArgumentTypeError(
        ErrorCode.validation_error,
        f"{name} must be {names}, not {type(value).__name__}",
        details={"argument": name},
    )
