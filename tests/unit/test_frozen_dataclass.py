"""``frozen_dataclass`` (event payloads): the class and instances of ``dataclass(frozen=True)``, with the
``__init__`` compiled on first instantiation (issue 16, cold start)."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any

import pytest

from agent_core._events import payloads as ev
from agent_core._events._frozen import Frozen, compiled_init, frozen_dataclass


def _pair(kw_only: bool) -> tuple[type[Any], type[Any]]:
    """The same fields declared with ``frozen_dataclass`` and with ``dataclass(frozen=True)``."""

    class Base(Frozen):
        a: int
        b: str = "x"
        c: dict[str, int] = dataclasses.field(default_factory=dict)
        d: int = dataclasses.field(default=7, init=False)

    class Ref:
        a: int
        b: str = "x"
        c: dict[str, int] = dataclasses.field(default_factory=dict)
        d: int = dataclasses.field(default=7, init=False)

    ours = frozen_dataclass(kw_only=kw_only)(Base)
    ref = dataclasses.dataclass(frozen=True, eq=False, repr=False, kw_only=kw_only)(Ref)
    return ours, ref


@pytest.mark.parametrize("kw_only", [False, True])
def test_same_init_as_a_frozen_dataclass(kw_only: bool) -> None:
    ours, ref = _pair(kw_only)
    assert ours.__init__.__code__.co_varnames[:3] == ("self", "args", "kwargs")  # not compiled yet
    assert [(f.name, f.kw_only, f.init) for f in dataclasses.fields(ours)] == [
        (f.name, f.kw_only, f.init) for f in dataclasses.fields(ref)
    ]
    one, other = ours(a=1), ref(a=1)
    assert inspect.signature(ours.__init__) == inspect.signature(ref.__init__)  # compiled now
    assert one.__dict__ == other.__dict__ == {"a": 1, "b": "x", "c": {}}
    assert one.d == other.d == 7  # the class attribute, as for a dataclass
    assert ours(a=2).c is not one.c  # a fresh default per instance
    bad: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((), {}),
        ((), {"a": 1, "e": 2}),
        ((), {"a": 1, "d": 3}),
    ]
    for args, kwargs in bad + ([((1, "y"), {})] if kw_only else []):
        with pytest.raises(TypeError) as mine:
            ours(*args, **kwargs)
        with pytest.raises(TypeError) as theirs:
            ref(*args, **kwargs)
        assert str(mine.value).replace("Base", "Ref") == str(theirs.value)
    if not kw_only:
        assert ours(1, "y").__dict__ == ref(1, "y").__dict__


def test_instances_are_frozen_and_copy_like_dataclasses() -> None:
    payload = ev.RunQueued(queue_position=2, mode="interactive")
    with pytest.raises(dataclasses.FrozenInstanceError):
        payload.mode = "x"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del payload.mode
    with pytest.raises(dataclasses.FrozenInstanceError):
        payload.other = 1  # type: ignore[attr-defined]
    assert dataclasses.is_dataclass(payload)
    assert dataclasses.replace(payload, mode="batch") == ev.RunQueued(2, "batch")
    assert dataclasses.asdict(payload) == {"queue_position": 2, "mode": "interactive"}
    assert pickle.loads(pickle.dumps(payload)) == payload
    assert repr(payload) == "RunQueued(queue_position=2, mode='interactive')"
    with pytest.raises(TypeError, match="positional"):
        ev.MessageCreated("user", "hi")  # type: ignore[call-arg]  # keyword-only class
    assert ev.MessageCreated(text_preview="hi").to_payload() == {"role": "user", "text_preview": "hi"}


def test_every_payload_class_compiles_the_init_of_its_fields() -> None:
    for cls in ev.PAYLOAD_CLASSES:
        init = compiled_init(cls)
        params = list(inspect.signature(init).parameters)[1:]
        assert params == [f.name for f in dataclasses.fields(cls) if f.init], cls


def test_only_subclasses_of_frozen() -> None:
    class Plain:
        a: int

    with pytest.raises(TypeError, match="Frozen"):
        frozen_dataclass(Plain)
