"""``dataclass`` with its generated methods compiled on first use (issue 16, cold start).

``dataclasses.dataclass`` compiles ``__init__``, ``__repr__``, ``__eq__`` and (frozen) ``__hash__`` with
``exec`` when the class is created: ~2-3 M instructions per class, for ~80 classes the runtime imports
before its first model request, most of which a run never compares or prints. :func:`dataclass` here takes
the same arguments for the forms this package uses (``frozen``, ``eq``, ``repr``, ``kw_only``, ``slots``)
and gives the same class: ``dataclasses.dataclass`` processes it (fields, ``__match_args__``, the
frozen/non-frozen inheritance checks) with those four methods left out (and, for a frozen class without
dataclass bases, ``__setattr__``/``__delattr__``: closures doing the generated methods' checks); each is a stub that, on its first call, installs the method ``dataclasses.dataclass`` generates for
the same fields and parameters (taken from a twin class) and calls it. ``__hash__``
is ``None`` where ``dataclasses`` sets it to ``None`` (``eq`` without ``frozen``). Differences: a class
without a docstring gets its name as ``__doc__`` (``dataclasses`` would compute its signature), and
``inspect.signature`` shows ``(*args, **kwargs)`` until the class is first instantiated. ``slots=True`` and
``InitVar`` fields are processed by ``dataclasses.dataclass`` directly.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast, dataclass_transform, overload

T = TypeVar("T", bound=type)


@overload
def dataclass(cls: T, /) -> T: ...
@overload
def dataclass(
    *, frozen: bool = False, eq: bool = True, repr: bool = True, kw_only: bool = False, slots: bool = False
) -> Callable[[T], T]: ...
@dataclass_transform(field_specifiers=(dataclasses.field,))
def dataclass(
    cls: T | None = None,
    /,
    *,
    frozen: bool = False,
    eq: bool = True,
    repr: bool = True,
    kw_only: bool = False,
    slots: bool = False,
) -> T | Callable[[T], T]:
    """``dataclasses.dataclass(cls, frozen=..., eq=..., repr=..., kw_only=..., slots=...)``, with
    ``__init__``/``__repr__``/``__eq__``/``__hash__`` compiled on first use."""

    def wrap(cls: T) -> T:
        if slots or any("InitVar" in str(t) for t in inspect.get_annotations(cls).values()):
            eager: Any = dataclasses.dataclass(
                cls, frozen=frozen, eq=eq, repr=repr, kw_only=kw_only, slots=slots
            )
            return cast(T, eager)
        own = cls.__dict__
        class_hash = own.get("__hash__", dataclasses.MISSING)
        explicit_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own))
        if not own.get("__doc__"):
            type.__setattr__(cls, "__doc__", cls.__name__)
        # A frozen class with no dataclass base gets ``__setattr__``/``__delattr__`` from closures (the same
        # checks as the generated ones) instead of two more compiled functions; other frozen classes are
        # processed as frozen, so ``dataclasses``' inheritance and overwrite checks apply unchanged.
        closures = frozen and getattr(cls, "__dataclass_fields__", None) is None
        closures = closures and "__setattr__" not in own and "__delattr__" not in own
        dataclasses.dataclass(
            cls, init=False, repr=False, eq=False, frozen=frozen and not closures, kw_only=kw_only
        )
        if closures:
            _freeze(cls)
        lazy = ["__init__"] if "__init__" not in own else []
        if repr and "__repr__" not in own:
            lazy.append("__repr__")
        if eq and "__eq__" not in own:
            lazy.append("__eq__")
        if eq and not explicit_hash:
            if frozen:
                lazy.append("__hash__")
            else:
                type.__setattr__(cls, "__hash__", None)
        for name in lazy:
            type.__setattr__(cls, name, _stub(cls, name, frozen))
        return cls

    return wrap if cls is None else wrap(cls)


def _freeze(cls: type) -> None:
    names = tuple(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    for method in (__setattr__, __delattr__):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
        type.__setattr__(cls, method.__name__, method)
    cls.__dataclass_params__.frozen = True  # type: ignore[attr-defined]  # what dataclass(frozen=True) records


def _stub(cls: type, name: str, frozen: bool) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        if cls.__dict__.get(name) is method:  # first call: install the generated method
            type.__setattr__(cls, name, _generated(cls, name, frozen))
        return getattr(cls, name)(self, *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"{cls.__qualname__}.{name}"
    return method


_TWIN_FLAGS = {
    "__init__": {"init": True},
    "__repr__": {"repr": True},
    "__eq__": {"eq": True},
    "__hash__": {"eq": True, "unsafe_hash": True},  # the hash ``eq=True, frozen=True`` generates
}


def _generated(cls: type, name: str, frozen: bool) -> Any:
    """The method ``name`` as ``dataclasses.dataclass`` generates it for ``cls``'s fields: taken from a
    twin class of the same fields processed with only that method turned on (and ``frozen`` for
    ``__init__``, whose frozen form sets the fields with ``object.__setattr__``)."""
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__annotations__": annotations,
    }
    if hasattr(cls, "__post_init__"):
        namespace["__post_init__"] = cls.__post_init__
    for f in dataclasses.fields(cls):
        annotations[f.name] = f.type
        namespace[f.name] = dataclasses.field(
            default=f.default,
            default_factory=f.default_factory,
            init=f.init,
            repr=f.repr,
            hash=f.hash,
            compare=f.compare,
            kw_only=f.kw_only,
        )
    twin: type = type(cls.__name__, (), namespace)
    flags = {"init": False, "repr": False, "eq": False, "match_args": False, **_TWIN_FLAGS[name]}
    dataclasses.dataclass(twin, frozen=frozen and name == "__init__", **flags)
    return twin.__dict__[name]
