"""Typed answers to an MCP elicitation form (chat, chat channels): fields converted and checked, a whole
reply read as one value or as ``name: value`` lines."""

from __future__ import annotations

import pytest

from agent_core._mcp.forms import convert, form_fields, parse_reply

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "mood": {"type": "string", "enum": ["good", "bad"]},
        "sure": {"type": "boolean"},
    },
    "required": ["name", "age"],
}


def test_fields_keep_the_schema_order_and_requiredness() -> None:
    assert [(n, r) for n, _, r in form_fields(PERSON)] == [
        ("name", True),
        ("age", True),
        ("mood", False),
        ("sure", False),
    ]


def test_values_are_converted_or_refused_with_what_is_expected() -> None:
    assert convert("36", {"type": "integer"}) == 36
    assert convert("2.5", {"type": "number"}) == 2.5
    assert convert("yes", {"type": "boolean"}) is True and convert("0", {"type": "boolean"}) is False
    for value, spec, expected in [
        ("abc", {"type": "integer"}, "an integer"),
        ("x", {"type": "number"}, "a number"),
        ("maybe", {"type": "boolean"}, "yes or no"),
        ("meh", {"enum": ["good", "bad"]}, "one of good, bad"),
    ]:
        with pytest.raises(ValueError, match=expected):
            convert(value, spec)


def test_a_reply_of_lines_fills_the_form() -> None:
    assert parse_reply("name: Ada Lovelace\nage=36\n\nsure: no", PERSON) == {
        "name": "Ada Lovelace",
        "age": 36,
        "sure": False,
    }
    assert parse_reply("name: a: b\nage: 1", PERSON)["name"] == "a: b"  # the first separator splits
    for reply, problem in [
        ("name: Ada", "missing age"),
        ("name: Ada\nage: old", "age: expected an integer"),
        ("name: Ada\nage: 3\ncolor: red", "unknown field 'color'"),
        ("Ada, 36", "one 'name: value' line per field"),
        ("name: Ada\nage: 3\nmood: meh", "mood: expected one of good, bad"),
    ]:
        with pytest.raises(ValueError, match=problem):
            parse_reply(reply, PERSON)


def test_a_single_field_takes_the_whole_text() -> None:
    one = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert parse_reply("  New York: Manhattan \n", one) == {"city": "New York: Manhattan"}
    with pytest.raises(ValueError, match="city is required"):
        parse_reply("   ", one)
    optional = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert parse_reply("", optional) == {}
    assert parse_reply("7", optional) == {"n": 7}
    assert parse_reply("anything", {"type": "object", "properties": {}}) == {}
