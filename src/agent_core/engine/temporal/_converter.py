"""The engine's Temporal data converter: the SDK's default, with the type hints of each dataclass resolved
once per process.

Decoding a payload into a dataclass (every activity input and result, the workflow input, each signal)
makes the SDK's ``value_to_type`` call ``typing.get_type_hints`` on the class — for every payload and
every nested dataclass, a measurable share of a worker's CPU per turn. :class:`CachedDataclasses` is a
custom JSON type converter that does the same conversion with the hints cached per class; the wire
format is unchanged (encoding is the SDK's), so processes with and without it interoperate.
"""

from __future__ import annotations

import dataclasses
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from temporalio.converter import (
    BinaryNullPayloadConverter,
    BinaryPlainPayloadConverter,
    BinaryProtoPayloadConverter,
    CompositePayloadConverter,
    DataConverter,
    JSONPlainPayloadConverter,
    JSONProtoPayloadConverter,
    JSONTypeConverter,
    value_to_type,
)

_Fields = tuple[tuple[str, Any, bool, frozenset[type] | None], ...]
"""A dataclass's fields as (name, resolved type hint, is an ``__init__`` argument, the JSON value types
kept as they are)."""
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _kept_as_is(hint: Any) -> frozenset[type] | None:
    """The JSON value types ``value_to_type(hint, v)`` returns unchanged (an equal value) for ``hint``:
    ``str``, ``int``, ``float``, ``bool``, ``None``, ``dict[str, Any]`` and unions of them; else ``None``."""
    if hint in _SCALARS:
        return frozenset({hint})
    if hint is dict or (get_origin(hint) is dict and get_args(hint) == (str, Any)):
        return frozenset({dict})
    if get_origin(hint) in (Union, UnionType):
        kinds = [_kept_as_is(arg) for arg in get_args(hint)]
        if all(k is not None for k in kinds):
            return frozenset().union(*(k for k in kinds if k is not None))
    return None


class CachedDataclasses(JSONTypeConverter):
    """Converts JSON objects to dataclasses as ``value_to_type`` does (unknown keys ignored, missing
    required fields fail at instantiation, ``init=False`` fields set afterwards), hints resolved once."""

    def __init__(self) -> None:
        self._fields: dict[type, _Fields] = {}
        self._converters: list[JSONTypeConverter] = [self]

    def to_typed_value(self, hint: type, value: Any) -> Any:
        fields = self._fields.get(hint) if isinstance(hint, type) else None
        if fields is None:
            if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
                return JSONTypeConverter.Unhandled
            hints = get_type_hints(hint)
            fields = tuple(
                (f.name, hints[f.name], f.init, _kept_as_is(hints[f.name])) for f in dataclasses.fields(hint)
            )
            self._fields[hint] = fields
        if not isinstance(value, dict):
            raise TypeError(f"Cannot convert to dataclass {hint}, value is {type(value)} not dict")
        init: dict[str, Any] = {}
        later: dict[str, Any] = {}
        for name, field_hint, is_init, kept in fields:
            if name not in value:
                continue
            converted = value[name]
            if kept is None or type(converted) not in kept:
                try:
                    converted = value_to_type(field_hint, converted, self._converters)
                except Exception as err:
                    raise TypeError(f"Failed converting field {name} on dataclass {hint}") from err
            (init if is_init else later)[name] = converted
        obj = hint(**init)
        for name, converted in later.items():
            object.__setattr__(obj, name, converted)
        return obj


_JSON = JSONPlainPayloadConverter(custom_type_converters=[CachedDataclasses()])
_CONVERTERS = (
    BinaryNullPayloadConverter(),
    BinaryPlainPayloadConverter(),
    JSONProtoPayloadConverter(),
    BinaryProtoPayloadConverter(),
    _JSON,  # last, as in the SDK's default: it throws on unknown types
)


class PayloadConverter(CompositePayloadConverter):
    """The SDK's default payload converters, JSON decoding through :class:`CachedDataclasses` (the SDK
    creates one per workflow activation: the converters and the cache are shared)."""

    def __init__(self) -> None:
        super().__init__(*_CONVERTERS)


DATA_CONVERTER = DataConverter(payload_converter_class=PayloadConverter)
"""The data converter of the engine's clients (the starting runtime's and the workers')."""
