"""An MCP server's elicitation form answered as typed text (``soong-agent chat``, chat channels).

MCP restricts ``requested_schema`` to a flat object of string, number, integer, boolean and enum
fields. Pure functions: :func:`form_fields` lists the fields, :func:`convert` checks one typed value,
:func:`parse_reply` reads a whole reply (one field: the text is its value; several: one ``name: value``
or ``name=value`` line per field, optional ones may be left out). Errors are ``ValueError`` with a
message that names the field and what it expects.
"""

from __future__ import annotations

from typing import Any


def form_fields(schema: dict[str, Any]) -> list[tuple[str, dict[str, Any], bool]]:
    """``(name, spec, required)`` for every property of ``schema``, in its order."""
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    if not isinstance(properties, dict):
        return []
    return [(str(n), s if isinstance(s, dict) else {}, n in required) for n, s in properties.items()]


def kind_of(spec: dict[str, Any]) -> str:
    """What a field takes, for a label: ``a/b/c`` for an enum, else its JSON type."""
    if "enum" in spec:
        return "/".join(str(o) for o in spec["enum"])
    return str(spec.get("type", "string"))


def convert(value: str, spec: dict[str, Any]) -> Any:
    """``value`` as the field's type; ``ValueError("<what it expects>")`` when it is not one."""
    kind = spec.get("type")
    if "enum" in spec:
        options = [str(o) for o in spec["enum"]]
        if value not in options:
            raise ValueError(f"one of {', '.join(options)}")
        return value
    if kind == "boolean":
        lowered = value.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("yes or no")
    try:
        if kind == "integer":
            return int(value)
        if kind == "number":
            return float(value)
    except ValueError:
        raise ValueError("an integer" if kind == "integer" else "a number") from None
    return value


def parse_reply(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The form's content from a typed reply (see the module docstring)."""
    fields = form_fields(schema)
    if not fields:
        return {}
    if len(fields) == 1:
        name, spec, required = fields[0]
        value = text.strip()
        if not value:
            if required:
                raise ValueError(f"{name} is required")
            return {}
        try:
            return {name: convert(value, spec)}
        except ValueError as exc:
            raise ValueError(f"{name}: expected {exc}") from None
    specs = {name: spec for name, spec, _ in fields}
    content: dict[str, Any] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        cut = min((i for i in (line.find(":"), line.find("=")) if i > 0), default=-1)
        if cut < 0:
            raise ValueError(f"write one 'name: value' line per field ({', '.join(specs)})")
        name, value = line[:cut].strip(), line[cut + 1 :].strip()
        if name not in specs:
            raise ValueError(f"unknown field {name!r} (fields: {', '.join(specs)})")
        try:
            content[name] = convert(value, specs[name])
        except ValueError as exc:
            raise ValueError(f"{name}: expected {exc}") from None
    missing = [name for name, _, required in fields if required and name not in content]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    return content
