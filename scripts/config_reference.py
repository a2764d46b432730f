"""The ``config.toml`` key list, generated from the schema (``agent_core.config.schema.Settings``).

    python scripts/config_reference.py            # every section with its keys, types and defaults
    python scripts/config_reference.py --check    # compares docs/configuration.md with the schema

``docs/configuration.md`` documents every section as a heading ``### `[section]` `` followed by a table
whose rows start ``| `key` | type | default | meaning |``. ``--check`` (and ``tests/test_docs_coverage.py``)
fails when a key of the schema has no row under its section, when a row's default differs from the
schema's, or when the page documents a key the schema does not have. A new key therefore shows up here
first: the first command prints its row (type and default filled in; the meaning is yours to write).
"""

from __future__ import annotations

import argparse
import re
import sys
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "configuration.md"
HEADING = re.compile(r"^#{2,4} `(\[\[?[^\]`]+\]\]?)`")
ROW = re.compile(r"^\| `([^`]+)` \|([^|]*)\|([^|]*)\|")


@dataclass
class Key:
    name: str
    type: str
    default: str


@dataclass
class Section:
    """One TOML table: ``[a.b]``, ``[[a.b]]`` (an array of tables) or ``[a.<name>]`` (a keyed table)."""

    heading: str
    keys: list[Key] = field(default_factory=list)


def _settings() -> type[BaseModel]:
    sys.path.insert(0, str(ROOT / "src"))
    from agent_core.config.schema import Settings

    return Settings


def _unwrap(annotation: Any) -> Any:
    """``Annotated[X, ...]`` → ``X``."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _model_of(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """``("table" | "array" | "keyed", model)`` when the annotation holds a nested table."""
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table", annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:  # ``Model | None``: an optional table
            return _model_of(members[0])
        return None
    if (
        origin is list
        and args
        and isinstance(_unwrap(args[0]), type)
        and issubclass(_unwrap(args[0]), BaseModel)
    ):
        return "array", _unwrap(args[0])
    if origin is dict and len(args) == 2:
        value = _unwrap(args[1])
        if isinstance(value, type) and issubclass(value, BaseModel):
            return "keyed", value
    return None


def _type_name(annotation: Any) -> str:
    annotation = _unwrap(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        parts = [a for a in args if a is not type(None)]
        names = [_type_name(a) for a in parts]
        if len(names) == 2 and "string" in names and "table" in names[1]:
            return "profile name or inline table"
        text = " or ".join(dict.fromkeys(names))
        return f"{text} (optional)" if len(parts) < len(args) else text
    if origin is typing.Literal:
        return (
            "one of " + ", ".join(f"`{_toml(a)}`" for a in args) if len(args) > 1 else f"`{_toml(args[0])}`"
        )
    if origin is list:
        if args and typing.get_origin(_unwrap(args[0])) is typing.Literal:
            return "array of " + _type_name(args[0]).removeprefix("one of ")
        return f"array of {_type_name(args[0])}s" if args else "array"
    if origin is dict:
        return "table"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "table"
        return {bool: "boolean", int: "integer", float: "number", str: "string", Path: "path"}.get(
            annotation, annotation.__name__
        )
    return str(annotation)


def _toml(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Path):
        return f'"{value}"'
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{}" if not value else "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _default(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined:
        return _toml(info.default)
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
        return _toml(value)
    return "required"


def sections() -> list[Section]:
    """Every table of ``config.toml`` in schema order, with its keys (nested tables are own sections)."""
    out: list[Section] = []

    def walk(model: type[BaseModel], heading: str) -> None:
        section = Section(heading)
        out.append(section)
        nested: list[tuple[str, type[BaseModel]]] = []
        inner = heading.strip("[]")
        for name, info in model.model_fields.items():
            kind = _model_of(info.annotation)
            path = f"{inner}.{name}" if inner else name
            if kind is None:
                section.keys.append(Key(name, _type_name(info.annotation), _default(info)))
            elif kind[0] == "table":
                nested.append((f"[{path}]", kind[1]))
            elif kind[0] == "array":
                section.keys.append(Key(name, "array of tables", _default(info)))
                nested.append((f"[[{path}]]", kind[1]))
            else:
                section.keys.append(Key(name, "table of tables", _default(info)))
                nested.append((f"[{path}.<name>]", kind[1]))
        for sub_heading, sub_model in nested:
            walk(sub_model, sub_heading)

    settings = _settings()
    for name, info in settings.model_fields.items():
        kind = _model_of(info.annotation)
        assert kind is not None, name
        heading = {"table": f"[{name}]", "array": f"[[{name}]]"}.get(kind[0], f"[{name}.<name>]")
        walk(kind[1], heading)
    return [s for s in out if s.keys]


def render() -> str:
    lines: list[str] = []
    for section in sections():
        lines += [f"### `{section.heading}`", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        lines += [f"| `{k.name}` | {k.type} | `{k.default}` | |" for k in section.keys]
        lines.append("")
    return "\n".join(lines)


def documented(text: str) -> dict[str, dict[str, str]]:
    """Section heading → {key: default cell} as the page documents them (backticks stripped)."""
    found: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith("#"):
            match = HEADING.match(line)
            current = found.setdefault(match.group(1), {}) if match else None
            continue
        row = ROW.match(line)
        if current is not None and row:
            current[row.group(1)] = row.group(3).strip().strip("`")
    return found


def check(text: str) -> list[str]:
    """Differences between the schema and the page, one line each (empty: they agree)."""
    problems: list[str] = []
    pages = documented(text)
    expected = {s.heading: s for s in sections()}
    for heading, section in expected.items():
        rows = pages.get(heading)
        if rows is None:
            problems.append(f"{heading}: section missing")
            continue
        for key in section.keys:
            if key.name not in rows:
                problems.append(f"{heading} {key.name}: key missing (default `{key.default}`)")
            elif rows[key.name] != key.default:
                problems.append(
                    f"{heading} {key.name}: documented default {rows[key.name]!r}, schema {key.default!r}"
                )
        extra = set(rows) - {k.name for k in section.keys}
        problems += [f"{heading} {name}: documented, but not in the schema" for name in sorted(extra)]
    problems += [
        f"{heading}: documented section not in the schema" for heading in pages if heading not in expected
    ]
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="compare docs/configuration.md with the schema")
    args = parser.parse_args()
    if not args.check:
        print(render())
        return 0
    problems = check(DOC.read_text(encoding="utf-8"))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
