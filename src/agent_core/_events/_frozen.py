"""Frozen dataclasses whose ``__init__`` is compiled on first instantiation (issue 16, cold start).

``dataclass(frozen=True)`` compiles three functions per class (``__init__``, ``__setattr__``,
``__delattr__``) with ``exec``: for the ~80 event payload classes that was ~1/6 of the runtime's own import
cost, though a run reaches its first model request having built a handful of them. A class declared with
:func:`frozen_dataclass` is processed by ``dataclass`` with ``init=False`` (nothing compiled); its
``__init__`` is the one ``dataclass(frozen=True)`` generates for the same fields, compiled when the class is
first instantiated (the same signature, defaults, keyword-only fields and errors). Assigning or deleting an
attribute raises ``dataclasses.FrozenInstanceError`` (:class:`Frozen`, the base of such classes), as a frozen
dataclass does. ``dataclasses.fields``, ``replace``, ``asdict``, ``match`` work as on any dataclass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, dataclass_transform, overload

T = TypeVar("T", bound=type)


class Frozen:
    """Base of :func:`frozen_dataclass` classes: instances are immutable once initialised."""

    __slots__ = ()

    if not TYPE_CHECKING:  # type checkers see frozen dataclasses (``dataclass_transform``), not these

        def __setattr__(self, name: str, value: Any) -> None:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")

        def __delattr__(self, name: str) -> None:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


@overload
def frozen_dataclass(cls: T, /) -> T: ...
@overload
def frozen_dataclass(*, kw_only: bool = False) -> Callable[[T], T]: ...
@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field,))
def frozen_dataclass(cls: T | None = None, /, *, kw_only: bool = False) -> T | Callable[[T], T]:
    """``dataclass(frozen=True, eq=False, repr=False, kw_only=kw_only)`` for a subclass of :class:`Frozen`,
    with its ``__init__`` compiled on first instantiation."""

    def wrap(cls: T) -> T:
        if not issubclass(cls, Frozen):
            raise TypeError(f"{cls.__qualname__} must derive from Frozen")
        dataclasses.dataclass(init=False, eq=False, repr=False, kw_only=kw_only)(
            cls
        )  # processes cls in place
        type.__setattr__(cls, "__init__", _deferred_init(cls))
        return cls

    return wrap if cls is None else wrap(cls)


def _deferred_init(cls: type) -> Callable[..., None]:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = compiled_init(cls)
        type.__setattr__(cls, "__init__", init)
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def compiled_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` ``dataclass(frozen=True)`` generates for ``cls``'s fields (in order, with their
    defaults, factories and keyword-only flags): taken from a frozen twin of the class built from them."""
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__annotations__": annotations,
    }
    for f in dataclasses.fields(cls):
        annotations[f.name] = f.type
        namespace[f.name] = dataclasses.field(
            default=f.default, default_factory=f.default_factory, init=f.init, kw_only=f.kw_only
        )
    twin: type = type(cls.__name__, (), namespace)
    dataclasses.dataclass(frozen=True, eq=False, repr=False, match_args=False)(twin)
    init: Callable[..., None] = twin.__dict__["__init__"]
    return init
