"""The reference pages in ``docs/`` list everything the code defines: every ``config.toml`` key (with its
default), every ``ErrorCode``, every ``EventType`` (with its visibility, persistence, level and payload
keys) and every ``ContextBuildReport`` field. A key, code, event or field added to the code without its
row in the docs fails here, and so does a row the code no longer has.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from agent_core import ErrorCode
from agent_core.types.enums import DEBUG_ONLY_EVENTS, TRANSIENT_EVENTS, EventType
from agent_core.types.runtime import ContextBuildReport

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)$")


def _section(page: str, heading: str) -> str:
    """The text of ``page`` from the ``heading`` line up to the next heading of the same level."""
    text = (DOCS / page).read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n")
    end = text.find(f"\n{level} ", start + len(heading) + 2)
    return text[start : end if end != -1 else len(text)]


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows whose first cell is one backticked name: name -> the other cells."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = [cell.strip() for cell in m.group(2).rstrip().rstrip("|").split("|")]
    return rows


def _config_reference() -> ModuleType:
    script = ROOT / "scripts" / "config_reference.py"
    spec = importlib.util.spec_from_file_location("config_reference", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def _payload_fields() -> dict[EventType, tuple[list[str], list[str]] | None]:
    """Event type -> (always present keys, keys present on some events), or None when the payload is not a
    fixed key list (the error fields, the ContextBuildReport, a Task WAL record's fields)."""
    from agent_core._events.payloads import ABSENT, PAYLOAD_MODELS, ContextBuilt, Error, TaskWalMirror

    fields: dict[EventType, tuple[list[str], list[str]] | None] = {}
    for event_type, model in PAYLOAD_MODELS.items():
        if issubclass(model, Error | ContextBuilt | TaskWalMirror):
            fields[event_type] = None
            continue
        required, optional = [], []
        for f in dataclasses.fields(model):
            (optional if f.default is ABSENT else required).append(f.name)
        fields[event_type] = (required, optional)
    return fields


def _level(event_type: EventType) -> str:
    from agent_core._events.catalog import level_of

    return str(level_of(event_type).value)


def test_configuration_reference_lists_every_settings_key_with_its_default() -> None:
    reference: Any = _config_reference()
    problems = reference.check((DOCS / "configuration.md").read_text(encoding="utf-8"))
    assert not problems, "docs/configuration.md is out of date:\n" + "\n".join(problems)


def test_error_reference_lists_every_error_code() -> None:
    documented = set(_rows(_section("errors.md", "## Codes")))
    codes = {code.value for code in ErrorCode}
    assert sorted(codes - documented) == [], "ErrorCode values without a row in docs/errors.md"
    assert sorted(documented - codes) == [], "rows in docs/errors.md for codes ErrorCode does not have"


def test_event_catalogue_lists_every_event_type_with_its_visibility_persistence_and_level() -> None:
    rows = _rows(_section("events.md", "## Catalogue"))
    types = {t.value for t in EventType}
    assert sorted(types - set(rows)) == [], "EventType values without a row in docs/events.md"
    assert sorted(set(rows) - types) == [], "rows in docs/events.md for events EventType does not have"
    wrong = []
    for event_type in EventType:
        vis, pers, level = rows[event_type.value][:3]
        expected = (
            "D" if event_type in DEBUG_ONLY_EVENTS else "U",
            "T" if event_type in TRANSIENT_EVENTS else "P",
            _level(event_type),
        )
        if (vis, pers, level) != expected:
            wrong.append(f"{event_type.value}: documented {(vis, pers, level)}, code {expected}")
    assert not wrong, "\n".join(wrong)


def test_event_catalogue_names_every_payload_key() -> None:
    rows = _rows(_section("events.md", "## Catalogue"))
    missing = []
    for event_type, keys in _payload_fields().items():
        if keys is None:
            continue
        cell = rows[event_type.value][3]
        required, optional = keys
        missing += [f"{event_type.value}: `{k}`" for k in required if f"`{k}`" not in cell]
        missing += [f"{event_type.value}: `{k}?`" for k in optional if f"`{k}?`" not in cell]
    assert not missing, "payload keys missing from docs/events.md:\n" + "\n".join(missing)


def test_context_build_report_fields_are_documented() -> None:
    section = _section("events.md", "## ContextBuildReport")
    names = {
        name
        for line in section.splitlines()
        if line.startswith("| `")
        for name in re.findall(r"`([^`]+)`", line.split("|")[1])
    }
    fields = set(ContextBuildReport.model_fields)
    assert sorted(fields - names) == [], "ContextBuildReport fields missing from docs/events.md"
    assert sorted(names - fields) == [], "docs/events.md documents fields ContextBuildReport does not have"
