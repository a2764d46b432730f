"""Core JSON-schema subset: check, Pydantic export and argument validation (docs/tools.md#input-schemas)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Any, Literal, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from agent_core.errors import AgentCoreError, ErrorCode, SchemaError
from agent_core.tools._schema import (
    check_schema,
    model_input_schema,
    schema_errors,
    strip_nulls,
    validate_arguments,
)

FULL_SUBSET = {
    "type": "object",
    "description": "every supported construct",
    "properties": {
        "s": {"type": "string", "description": "a string", "minLength": 1, "maxLength": 5, "pattern": "^a"},
        "n": {"type": "number", "minimum": 0, "maximum": 10},
        "i": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100, "default": 3},
        "b": {"type": "boolean"},
        "e": {"type": "string", "enum": ["x", "y"]},
        "arr": {
            "type": "array",
            "minItems": 1,
            "maxItems": 3,
            "uniqueItems": True,
            "items": {
                "type": "object",
                "properties": {"deep": {"type": "array", "items": {"type": "integer"}}},
                "required": ["deep"],
                "additionalProperties": False,
            },
        },
        "obj": {"type": "object", "properties": {"k": {"type": "string", "format": "uri"}}, "title": "Obj"},
    },
    "required": ["s"],
    "additionalProperties": False,
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "examples": [{"s": "a"}],
}


def test_full_subset_is_accepted() -> None:
    """Case G26."""
    check_schema(FULL_SUBSET)


@pytest.mark.parametrize(
    "fragment",
    [
        {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        {"anyOf": [{"type": "string"}, {"type": "null"}]},
        {"allOf": [{"type": "string"}]},
        {"not": {"type": "string"}},
        {"$ref": "#/$defs/X"},
        {"if": {"type": "string"}, "then": {"minLength": 1}},
        {"type": "string", "else": {"minLength": 1}},
        {"type": ["string", "null"]},
        {"type": "null"},
        {"type": "object", "patternProperties": {"^x": {"type": "string"}}},
        {"type": "object", "dependentRequired": {"a": ["b"]}},
        {"type": "object", "dependentSchemas": {"a": {"type": "object"}}},
        {"type": "object", "additionalProperties": {"type": "string"}},
        {"type": "array", "items": [{"type": "string"}]},
        {"type": "string", "const": "x"},
        {"type": "string", "nullable": True},
        {"type": "string", "pattern": "("},
        {"type": "string", "enum": []},
    ],
)
def test_out_of_subset_nested_is_rejected(fragment: dict[str, Any]) -> None:
    """Case G26."""
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": fragment}}}
    with pytest.raises(SchemaError) as info:
        check_schema(schema)
    assert info.value.code == ErrorCode.schema_error
    assert "properties.a.items" in info.value.message


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string"},
        {"properties": {}},
        [],
        {"type": "object", "$defs": {"X": {"type": "string"}}},
        {"type": "object", "definitions": {"X": {"type": "string"}}},
        {"type": "object", "required": "a"},
        {"type": "object", "properties": []},
    ],
)
def test_root_and_structural_rules(schema: Any) -> None:
    with pytest.raises(SchemaError):
        check_schema(schema)


def test_empty_defs_are_tolerated() -> None:
    check_schema({"type": "object", "$defs": {}, "properties": {}})


class Color(StrEnum):
    red = "red"
    blue = "blue"


class Inner(BaseModel):
    x: int = Field(ge=1, description="positive")
    tags: list[str] = []


class Outer(BaseModel):
    """Outer model."""

    inner: Inner
    note: Optional[str] = None  # noqa: UP045 - the Optional spelling is the case under test
    maybe: int | None
    color: Color = Color.red
    mode: Literal["fast"]
    items: list[Inner] = []
    maybe_inner: Inner | None = None


def test_pydantic_export_inlines_refs_and_rewrites_optional() -> None:
    schema = model_input_schema(Outer)
    text = json.dumps(schema)
    assert "$ref" not in text and "anyOf" not in text and "$defs" not in text
    assert "title" not in text
    check_schema(schema)
    assert schema["required"] == ["inner", "mode"]
    assert schema["properties"]["note"] == {"type": "string"}
    assert schema["properties"]["maybe"] == {"type": "integer"}
    assert schema["properties"]["inner"]["properties"]["x"] == {
        "type": "integer",
        "minimum": 1,
        "description": "positive",
    }
    assert schema["properties"]["color"]["enum"] == ["red", "blue"]
    assert schema["properties"]["mode"]["enum"] == ["fast"]
    assert schema["properties"]["items"]["items"]["required"] == ["x"]
    assert schema["properties"]["maybe_inner"]["type"] == "object"
    assert schema["description"] == "Outer model."
    # the optional field still accepts an explicit null (stripped before validation)
    assert validate_arguments(schema, {"inner": {"x": 1}, "mode": "fast", "note": None, "maybe": None}) == {
        "inner": {"x": 1},
        "mode": "fast",
    }


class Node(BaseModel):
    children: list[Node] = []


class Union2(BaseModel):
    value: int | str


class DictModel(BaseModel):
    table: dict[str, int]


@pytest.mark.parametrize("model", [Node, Union2, DictModel])
def test_unexportable_models_are_schema_errors(model: type[BaseModel]) -> None:
    with pytest.raises(SchemaError) as info:
        model_input_schema(model)
    assert info.value.code == ErrorCode.schema_error


def test_validation_errors_carry_paths() -> None:
    with pytest.raises(AgentCoreError) as info:
        validate_arguments(
            FULL_SUBSET,
            {
                "s": "bcdefgh",
                "n": -1,
                "i": 100,
                "b": "yes",
                "e": "z",
                "arr": [{"deep": [1, "2"]}, {"deep": [1, "2"]}, {"x": 1}],
                "obj": {"k": 5},
                "extra": 1,
            },
        )
    err = info.value
    assert err.code == ErrorCode.validation_error
    paths = {(e["path"], e["message"].split(" ")[0]) for e in err.details["errors"]}
    expected_paths = {
        "$.s",
        "$.n",
        "$.i",
        "$.b",
        "$.e",
        "$.arr",
        "$.arr[0].deep[1]",
        "$.arr[2].deep",
        "$.arr[2].x",
        "$.obj.k",
        "$.extra",
    }
    assert expected_paths <= {p for p, _ in paths}
    assert all(set(e) == {"path", "message"} for e in err.details["errors"])


def test_missing_required_and_type_messages() -> None:
    errors = schema_errors(FULL_SUBSET, {})
    assert errors == [{"path": "$.s", "message": "is required"}]
    assert schema_errors({"type": "object", "properties": {"a": {"type": "integer"}}}, {"a": True}) == [
        {"path": "$.a", "message": "expected an integer, got boolean"}
    ]


def test_explicit_null_equals_omission_at_any_depth() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "o": {"type": "object", "properties": {"b": {"type": "string"}}, "additionalProperties": False},
        },
        "additionalProperties": False,
    }
    assert validate_arguments(schema, {"a": None, "o": {"b": None}}) == {"o": {}}
    assert strip_nulls({"x": [{"y": None, "z": 1}, None]}) == {"x": [{"z": 1}, None]}


def test_integral_floats_are_integers_and_bools_are_not_numbers() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "f": {"type": "number"}}}
    assert validate_arguments(schema, {"n": 3.0, "f": 2}) == {"n": 3, "f": 2}
    assert isinstance(validate_arguments(schema, {"n": 3.0})["n"], int)
    with pytest.raises(AgentCoreError):
        validate_arguments(schema, {"n": 3.5})
    with pytest.raises(AgentCoreError):
        validate_arguments(schema, {"f": False})


def test_enum_uses_json_equality() -> None:
    schema = {"type": "object", "properties": {"v": {"enum": [1, "a"]}}}
    assert validate_arguments(schema, {"v": 1}) == {"v": 1}
    assert validate_arguments(schema, {"v": 1.0}) == {"v": 1.0}
    with pytest.raises(AgentCoreError):
        validate_arguments(schema, {"v": True})


def test_arguments_must_be_an_object() -> None:
    with pytest.raises(AgentCoreError) as info:
        validate_arguments({"type": "object"}, ["not", "an", "object"])
    assert info.value.details["errors"] == [{"path": "$", "message": "expected an object"}]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=3), children, max_size=3)
    ),
    max_leaves=10,
)


@given(_JSON)
def test_strip_nulls_leaves_no_null_object_values(value: Any) -> None:
    def has_null_value(v: Any) -> bool:
        if isinstance(v, dict):
            return any(x is None or has_null_value(x) for x in v.values())
        if isinstance(v, list):
            return any(has_null_value(x) for x in v)
        return False

    stripped = strip_nulls(value)
    assert not has_null_value(stripped)
    assert strip_nulls(stripped) == stripped
