"""The core JSON-schema subset (docs/tools.md#input-schemas): subset check, Pydantic export and argument
validation.

* :func:`check_schema` accepts only the subset (``type`` object/string/number/integer/boolean/array,
  ``properties``, ``required``, ``items``, ``enum``, ``description`` plus the tolerated annotation and
  constraint keywords) and raises :class:`SchemaError` (``schema_error``) for anything else, including
  unknown keywords, type arrays and a root that is not ``type: object``.
* :func:`model_input_schema` exports a Pydantic model: ``$defs``/``$ref`` are inlined (recursive models
  are a ``schema_error``), ``anyOf: [S, {"type": "null"}]`` becomes ``S`` and the property stops being
  required, ``const`` becomes a one-value ``enum``, generated ``title`` keys are dropped.
* :func:`validate_arguments` strips keys whose value is ``null`` (an explicit null equals omission),
  validates against the schema and returns the cleaned arguments, or raises ``validation_error`` with
  ``details.errors = [{path, message}]`` (paths look like ``$.edits[0].old``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from agent_core.errors import ErrorCode, InvalidArgumentError, SchemaError

SUPPORTED_TYPES = frozenset({"object", "string", "number", "integer", "boolean", "array"})
STRUCTURAL_KEYWORDS = frozenset({"type", "properties", "required", "items", "enum", "description"})
TOLERATED_KEYWORDS = frozenset(
    {
        "title",
        "default",
        "examples",
        "format",
        "additionalProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "$schema",
    }
)
REJECTED_KEYWORDS = frozenset(
    {
        "oneOf",
        "anyOf",
        "allOf",
        "not",
        "$ref",
        "if",
        "then",
        "else",
        "patternProperties",
        "dependentSchemas",
        "dependentRequired",
    }
)
_DEFS_KEYWORDS = frozenset({"$defs", "definitions"})
_NUMERIC_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_COUNT_BOUNDS = ("minLength", "maxLength", "minItems", "maxItems")

# ---------------------------------------------------------------------------------------------------
# Subset check


def check_schema(schema: Any, *, where: str = "input_schema") -> None:
    """Raises ``schema_error`` unless ``schema`` is an object-rooted schema inside the core subset."""
    if not isinstance(schema, Mapping):
        raise SchemaError(ErrorCode.schema_error, f"{where}: schema must be a JSON object")
    if schema.get("type") != "object":
        raise SchemaError(ErrorCode.schema_error, f"{where}: the root schema must have type 'object'")
    _check_node(schema, where)


def _fail(where: str, message: str) -> SchemaError:
    return SchemaError(ErrorCode.schema_error, f"{where}: {message}", details={"path": where})


def _check_node(node: Any, where: str) -> None:
    if not isinstance(node, Mapping):
        raise _fail(where, "a schema must be a JSON object")
    for key, value in node.items():
        if key in REJECTED_KEYWORDS:
            raise _fail(where, f"keyword {key!r} is not supported by the core schema subset")
        if key in _DEFS_KEYWORDS:
            if value:
                raise _fail(where, f"non-empty {key!r} is not supported (definitions must be inlined)")
            continue
        if key not in STRUCTURAL_KEYWORDS and key not in TOLERATED_KEYWORDS:
            raise _fail(where, f"unknown or unsupported keyword {key!r}")
    if "type" in node:
        kind = node["type"]
        if isinstance(kind, list):
            raise _fail(where, "type arrays are not supported")
        if kind not in SUPPORTED_TYPES:
            raise _fail(where, f"unsupported type {kind!r}")
    if "properties" in node:
        props = node["properties"]
        if not isinstance(props, Mapping):
            raise _fail(where, "'properties' must be an object")
        for name, sub in props.items():
            _check_node(sub, f"{where}.properties.{name}")
    if "required" in node:
        req = node["required"]
        if not isinstance(req, list) or not all(isinstance(r, str) for r in req):
            raise _fail(where, "'required' must be a list of strings")
    if "items" in node:
        if not isinstance(node["items"], Mapping):
            raise _fail(where, "'items' must be a single schema")
        _check_node(node["items"], f"{where}.items")
    if "enum" in node and (not isinstance(node["enum"], list) or not node["enum"]):
        raise _fail(where, "'enum' must be a non-empty list")
    for key in ("description", "title", "format"):
        if key in node and not isinstance(node[key], str):
            raise _fail(where, f"{key!r} must be a string")
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], bool):
        raise _fail(where, "'additionalProperties' must be a boolean in the core subset")
    for key in _NUMERIC_BOUNDS:
        if key in node and not _is_number(node[key]):
            raise _fail(where, f"{key!r} must be a number")
    for key in _COUNT_BOUNDS:
        if key in node and not (_is_int(node[key]) and node[key] >= 0):
            raise _fail(where, f"{key!r} must be a non-negative integer")
    if "uniqueItems" in node and not isinstance(node["uniqueItems"], bool):
        raise _fail(where, "'uniqueItems' must be a boolean")
    if "pattern" in node:
        pattern = node["pattern"]
        if not isinstance(pattern, str):
            raise _fail(where, "'pattern' must be a string")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _fail(where, f"invalid 'pattern': {exc}") from exc


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# ---------------------------------------------------------------------------------------------------
# Pydantic export


def model_input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Exports ``model`` as a core-subset schema (inlined, Optional rewritten); ``schema_error`` if not."""
    try:
        raw = model.model_json_schema()
    except Exception as exc:  # pydantic raises several error types for unexportable annotations
        raise SchemaError(
            ErrorCode.schema_error, f"cannot export a JSON schema for {model.__name__}: {exc}", cause=exc
        ) from exc
    defs = raw.pop("$defs", {}) or {}
    exported: dict[str, Any] = dict(_inline(raw, defs, ()))
    check_schema(exported, where=f"{model.__name__} schema")
    return exported


def _optional_member(node: Mapping[str, Any]) -> Any | None:
    """The non-null member of ``anyOf: [S, {"type": "null"}]`` (either order), else ``None``."""
    members = node.get("anyOf")
    if not isinstance(members, list) or len(members) != 2:
        return None
    nulls = [m for m in members if m == {"type": "null"}]
    if len(nulls) != 1:
        return None
    return next(m for m in members if m != {"type": "null"})


def _inline(node: Any, defs: Mapping[str, Any], stack: tuple[str, ...]) -> Any:
    if not isinstance(node, Mapping):
        return node
    node = dict(node)
    if "$ref" in node:
        ref = node.pop("$ref")
        prefix = "#/$defs/"
        if not isinstance(ref, str) or not ref.startswith(prefix) or ref[len(prefix) :] not in defs:
            raise SchemaError(ErrorCode.schema_error, f"unresolvable $ref {ref!r}")
        name = ref[len(prefix) :]
        if name in stack:
            raise SchemaError(ErrorCode.schema_error, f"recursive model {name!r} cannot be exported")
        target = _inline(defs[name], defs, (*stack, name))
        node = {**target, **{k: _inline(v, defs, stack) for k, v in node.items()}}
    member = _optional_member(node)
    if member is not None:
        rest = {k: v for k, v in node.items() if k != "anyOf"}
        if rest.get("default", ...) is None:
            rest.pop("default")
        node = {**_inline(member, defs, stack), **rest}
    if "const" in node:
        node["enum"] = [node.pop("const")]
    node.pop("title", None)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _inline(sub, defs, stack) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _inline(value, defs, stack)
        elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
            out[key] = [_inline(v, defs, stack) for v in value]
        else:
            out[key] = value
    props = node.get("properties")
    if isinstance(props, Mapping) and isinstance(out.get("required"), list):
        optional = {name for name, sub in props.items() if isinstance(sub, Mapping) and _optional_member(sub)}
        out["required"] = [r for r in out["required"] if r not in optional]
        if not out["required"]:
            out.pop("required")
    return out


# ---------------------------------------------------------------------------------------------------
# Argument validation


def strip_nulls(value: Any) -> Any:
    """Removes object keys whose value is ``None`` at any depth (objects inside arrays included)."""
    if isinstance(value, dict):
        return {k: strip_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [strip_nulls(v) for v in value]
    return value


def validate_arguments(schema: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """Returns the null-stripped, validated arguments or raises ``validation_error`` with details.errors."""
    if not isinstance(arguments, dict):
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            "tool arguments must be a JSON object",
            details={"errors": [{"path": "$", "message": "expected an object"}]},
        )
    cleaned = strip_nulls(arguments)
    errors: list[dict[str, str]] = []
    result = _validate(schema, cleaned, "$", errors)
    if errors:
        shown = "; ".join(f"{e['path']}: {e['message']}" for e in errors[:5])
        more = f" (+{len(errors) - 5} more)" if len(errors) > 5 else ""
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            f"invalid tool arguments: {shown}{more}",
            details={"errors": errors},
        )
    assert isinstance(result, dict)
    return result


def schema_errors(schema: Mapping[str, Any], value: Any) -> list[dict[str, str]]:
    """All violations of ``value`` against ``schema`` (no null-stripping)."""
    errors: list[dict[str, str]] = []
    _validate(schema, value, "$", errors)
    return errors


_TYPE_NAMES = {
    "object": "an object",
    "array": "an array",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _matches_type(kind: str, value: Any) -> bool:
    actual = _json_type(value)
    if kind == "number":
        return actual in ("integer", "number") and not (isinstance(value, float) and not math.isfinite(value))
    if kind == "integer":
        return actual == "integer" or (isinstance(value, float) and value.is_integer())
    return actual == kind


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


def _validate(schema: Mapping[str, Any], value: Any, path: str, errors: list[dict[str, str]]) -> Any:
    def err(message: str, at: str = path) -> None:
        errors.append({"path": at, "message": message})

    kind = schema.get("type")
    if isinstance(kind, str):
        if not _matches_type(kind, value):
            err(f"expected {_TYPE_NAMES.get(kind, kind)}, got {_json_type(value)}")
            return value
        if kind == "integer" and isinstance(value, float):
            value = int(value)
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        options = ", ".join(repr(o) for o in schema["enum"][:10])
        err(f"value must be one of: {options}")
    if _is_number(value):
        _check_number(schema, value, err)
    elif isinstance(value, str):
        _check_string(schema, value, err)
    elif isinstance(value, list):
        value = _check_array(schema, value, path, errors, err)
    elif isinstance(value, dict):
        value = _check_object(schema, value, path, errors, err)
    return value


def _check_number(schema: Mapping[str, Any], value: float, err: Any) -> None:
    if "minimum" in schema and value < schema["minimum"]:
        err(f"must be >= {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        err(f"must be <= {schema['maximum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        err(f"must be > {schema['exclusiveMinimum']}")
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        err(f"must be < {schema['exclusiveMaximum']}")


def _check_string(schema: Mapping[str, Any], value: str, err: Any) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        err(f"must be at least {schema['minLength']} characters long")
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        err(f"must be at most {schema['maxLength']} characters long")
    if "pattern" in schema and re.search(schema["pattern"], value) is None:
        err(f"does not match pattern {schema['pattern']!r}")


def _check_array(
    schema: Mapping[str, Any], value: list[Any], path: str, errors: list[dict[str, str]], err: Any
) -> list[Any]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        err(f"must contain at least {schema['minItems']} items")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        err(f"must contain at most {schema['maxItems']} items")
    if schema.get("uniqueItems"):
        for i, item in enumerate(value):
            if any(_json_equal(item, other) for other in value[:i]):
                err(f"items must be unique (duplicate at index {i})")
                break
    items = schema.get("items")
    if isinstance(items, Mapping):
        return [_validate(items, item, f"{path}[{i}]", errors) for i, item in enumerate(value)]
    return value


def _check_object(
    schema: Mapping[str, Any], value: dict[str, Any], path: str, errors: list[dict[str, str]], err: Any
) -> dict[str, Any]:
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        if name not in value:
            err("is required", _child(path, name))
    out: dict[str, Any] = {}
    for key, item in value.items():
        sub = props.get(key)
        if sub is not None:
            out[key] = _validate(sub, item, _child(path, key), errors)
        else:
            if schema.get("additionalProperties") is False:
                err("unexpected property", _child(path, key))
            out[key] = item
    return out


_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if _SIMPLE_KEY.match(key) else f"{path}[{key!r}]"
