"""``agent_core._dataclass.dataclass``: the class ``dataclasses.dataclass`` makes, with ``__init__``,
``__repr__``, ``__eq__`` and ``__hash__`` compiled on first use (issue 16, cold start)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from agent_core import _dataclass

PARAMS = [
    {},
    {"frozen": True},
    {"frozen": True, "kw_only": True},
    {"kw_only": True},
    {"eq": False},
    {"kw_only": True, "eq": False},
    {"frozen": True, "eq": False, "kw_only": True},
    {"repr": False},
]


@_dataclass.dataclass(frozen=True, kw_only=False)
class Pickled:
    a: int
    b: int = 0


def _body() -> dict[str, Any]:
    def __post_init__(self: Any) -> None:
        object.__setattr__(self, "seen", self.a * 2)

    return {
        "__annotations__": {"a": "int", "b": "str", "c": "dict[str, int]", "d": "int"},
        "b": "x",
        "c": dataclasses.field(default_factory=dict),
        "d": dataclasses.field(default=7, init=False, compare=False),
        "__post_init__": __post_init__,
        "__module__": __name__,
    }


def _pair(params: dict[str, bool]) -> tuple[type[Any], type[Any]]:
    ours = _dataclass.dataclass(**params)(type("Thing", (), _body()))
    ref: type[Any] = dataclasses.dataclass(**params)(type("Thing", (), _body()))
    return ours, ref


def _outcome(call: Any) -> Any:
    try:
        return ("ok", call())
    except Exception as exc:  # the comparison is the test
        return (type(exc).__name__, str(exc))


@pytest.mark.parametrize("params", PARAMS, ids=str)
def test_same_behaviour_as_dataclasses(params: dict[str, bool]) -> None:
    ours, ref = _pair(params)
    assert ours.__init__.__code__.co_varnames[:3] == ("self", "args", "kwargs")  # nothing compiled yet
    assert (ours.__hash__ is None) == (ref.__hash__ is None)
    assert [(f.name, f.kw_only, f.init) for f in dataclasses.fields(ours)] == [
        (f.name, f.kw_only, f.init) for f in dataclasses.fields(ref)
    ]
    assert ours.__match_args__ == ref.__match_args__
    assert ours.__dataclass_params__.frozen == ref.__dataclass_params__.frozen
    one, other = ours(a=1), ref(a=1)
    assert inspect.signature(ours.__init__) == inspect.signature(ref.__init__)
    assert one.__dict__ == other.__dict__ and one.seen == 2
    assert repr(one) == repr(other) if params.get("repr", True) else repr(one).startswith("<")
    assert (one == ours(a=1)) == (other == ref(a=1))
    assert (one == ours(a=2)) == (other == ref(a=2))
    assert _outcome(lambda: hash(one) == hash(ours(a=1))) == _outcome(lambda: hash(other) == hash(ref(a=1)))
    assert _outcome(lambda: setattr(one, "a", 5)) == _outcome(lambda: setattr(other, "a", 5))
    assert _outcome(lambda: setattr(one, "zz", 5)) == _outcome(lambda: setattr(other, "zz", 5))
    assert _outcome(lambda: delattr(one, "b")) == _outcome(lambda: delattr(other, "b"))
    sub_ours, sub_ref = type("Sub", (ours,), {})(a=1), type("Sub", (ref,), {})(a=1)  # not dataclasses
    for attribute in ("a", "zz"):
        assert _outcome(lambda n=attribute: setattr(sub_ours, n, 5)) == _outcome(
            lambda n=attribute: setattr(sub_ref, n, 5)
        )
    assert _outcome(lambda: ours(1, "y"))[0] == _outcome(lambda: ref(1, "y"))[0]
    for args, kwargs in [((), {}), ((), {"a": 1, "e": 2}), ((), {"a": 1, "d": 3})]:
        mine = _outcome(lambda a=args, k=kwargs: ours(*a, **k))
        theirs = _outcome(lambda a=args, k=kwargs: ref(*a, **k))
        assert mine == theirs
    if not params.get("frozen"):
        assert dataclasses.replace(one, b="z").b == "z"
    assert dataclasses.asdict(one) == dataclasses.asdict(other)


def test_each_method_is_compiled_on_its_first_call() -> None:
    Thing = _dataclass.dataclass(frozen=True)(type("Thing", (), _body()))
    instance: Any = object.__new__(Thing)
    object.__setattr__(instance, "a", 1)
    object.__setattr__(instance, "b", "x")
    object.__setattr__(instance, "c", {})
    assert instance == instance
    assert Thing.__dict__["__eq__"].__code__.co_varnames[:2] == ("self", "other")
    assert Thing.__dict__["__init__"].__code__.co_varnames[:3] == ("self", "args", "kwargs")
    assert repr(instance) == "Thing(a=1, b='x', c={}, d=7)"


def test_explicit_methods_are_kept_and_subclasses_work() -> None:
    @_dataclass.dataclass(frozen=True)
    class Base:
        a: int

        def __repr__(self) -> str:
            return "custom"

    @_dataclass.dataclass(frozen=True)
    class Child(Base):
        b: int = 0

    assert repr(Base(1)) == "custom" and repr(Child(1, 2)).endswith(".Child(a=1, b=2)")
    assert Child(1, 2) == Child(1, 2) and hash(Child(1, 2)) == hash(Child(1, 2))
    assert Child(1) != Base(1)
    assert pickle.loads(pickle.dumps(Pickled(1, 2))) == Pickled(1, 2)
    assert Base.__dataclass_params__.frozen and Child.__dataclass_params__.frozen  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match="non-frozen"):

        @dataclasses.dataclass
        class Thawed(Child):  # type: ignore[misc]
            c: int = 0

    with pytest.raises(TypeError, match="non-frozen"):

        @_dataclass.dataclass
        class Thawed2(Child):  # type: ignore[misc]
            c: int = 0

    @_dataclass.dataclass
    class Plain:
        a: int

    with pytest.raises(TypeError, match="frozen dataclass from a non-frozen"):

        @_dataclass.dataclass(frozen=True)
        class Frozen(Plain):  # type: ignore[misc]
            b: int = 0
