"""One typed payload per event type, and events built only through them (issue 15 item 4)."""

from __future__ import annotations

import ast
import dataclasses
import json
import typing
from collections import Counter
from pathlib import Path

import pytest

import agent_core
from agent_core._redaction import Redactor
from agent_core._storage.drafts import EventDraft
from agent_core.types import events as ev
from agent_core.types.enums import EventLevel, EventType
from agent_core.types.runtime import RuntimeEvent
from tests.fixtures.architecture import architecture_report

SRC = Path(agent_core.__file__).resolve().parent
EMITTERS = {"emit", "emit_event", "emit_events", "persist_event", "commit_tool_result", "_parent_emit"}


def test_every_event_type_has_exactly_one_payload_model() -> None:
    counts = Counter(cls.event_type for cls in ev.PAYLOAD_CLASSES)
    assert set(counts) == set(EventType), set(EventType) - set(counts)
    assert all(n == 1 for n in counts.values()), [t for t, n in counts.items() if n > 1]
    assert set(ev.PAYLOAD_MODELS) == set(EventType)
    assert all(ev.PAYLOAD_MODELS[t].event_type is t for t in EventType)
    assert set(ev.WAL_MIRRORS) == {
        t.value for t in EventType if issubclass(ev.PAYLOAD_MODELS[t], ev.TaskWalMirror)
    }
    assert len(ev.WAL_MIRRORS) == 17


def _event_type_member(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "EventType"
    )


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def test_events_are_built_only_through_the_payload_models() -> None:
    """No emitter gets an ``EventType`` member or a dict literal; only ``EventDraft.of`` drafts events."""
    offenders: list[str] = []
    for source in architecture_report().source_files(SRC.parent):
        rel = source.path.relative_to(SRC).as_posix()
        for node in source.nodes:
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            values = [*node.args, *(k.value for k in node.keywords if k.arg != "run_update")]
            nested = [e for v in values if isinstance(v, ast.List | ast.Tuple) for e in v.elts]
            nested += [e for v in nested if isinstance(v, ast.Tuple) for e in v.elts]
            if name in EMITTERS and any(_event_type_member(v) or isinstance(v, ast.Dict) for v in values):
                offenders.append(f"{rel}:{node.lineno} {name}(EventType/dict)")
            if name == "EventDraft" and rel != "storage/drafts.py":
                offenders.append(f"{rel}:{node.lineno} EventDraft(...) instead of EventDraft.of(payload)")
            if any(_event_type_member(e) for e in nested) and name not in {"frozenset", "set", "tuple"}:
                offenders.append(f"{rel}:{node.lineno} {name}(... (EventType, payload) ...)")
    assert offenders == [], "\n".join(offenders)


def test_payload_mapping_keeps_nulls_and_leaves_absent_keys_out() -> None:
    assert ev.LoopFailed(end_reason=None, error=None).to_payload() == {"end_reason": None, "error": None}
    done = ev.RunCompleted(
        end_reason="completed", turn_count=2, usage={"input_tokens": 1}, final_node_id=None
    )
    assert done.to_payload() == {
        "end_reason": "completed",
        "turn_count": 2,
        "usage": {"input_tokens": 1},
        "final_node_id": None,
    }
    failed = ev.ToolFailed(tool_name="t", error=None, reason="validation_error")
    assert failed.to_payload() == {
        "tool_name": "t",
        "error": None,
        "aborted": False,
        "reason": "validation_error",
    }
    assert ev.MessageCreated(text_preview="hi").to_payload() == {"role": "user", "text_preview": "hi"}
    assert ev.Error({"code": "x", "message": "m"}).to_payload() == {"code": "x", "message": "m"}
    debug = ev.ProviderDebug("mcp", "mcp_discovery", {"a": 1}, extra={"a": 1})
    assert debug.to_payload() == {"provider": "mcp", "kind": "mcp_discovery", "data": {"a": 1}, "a": 1}


def test_redacted_copy_and_draft(monkeypatch: object) -> None:
    import os

    os.environ["SOONG_PAYLOAD_TEST_KEY"] = "sk-payload-0123456789"
    try:
        redactor = Redactor(["SOONG_PAYLOAD_TEST_KEY"])
        denied = ev.HookDenied(phase="Stop", reason="uses sk-payload-0123456789", hook_summary=None)
        clean = denied.redacted(redactor)
        assert (
            type(clean) is ev.HookDenied
            and "sk-payload" not in clean.reason
            and "sk-payload" in denied.reason
        )
    finally:
        del os.environ["SOONG_PAYLOAD_TEST_KEY"]
    draft = EventDraft.of(ev.LoopFailed(end_reason="failed", error=None), agent_id="a", run_id="r")
    assert draft.event_type == EventType.loop_failed and draft.level == EventLevel.error
    assert draft.payload == {"end_reason": "failed", "error": None}


# ---- the typed public surface (issue 35 item 3) -----------------------------------------------------
def _sample(cls: type[ev.EventPayload]) -> tuple[ev.EventPayload, dict[str, object]]:
    """An instance of ``cls`` with a distinct value in every field, and the JSON payload it stands for."""
    data: dict[str, object] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        data[f.name] = {"k": f.name} if f.name in ("error", "report", "fields") else f"v_{f.name}"
    if cls is ev.Error:
        data = {"code": "internal_error", "message": "m"}
    elif cls is ev.ContextBuilt:
        data = {"run_id": "r", "turn": 1}
    elif issubclass(cls, ev.TaskWalMirror):
        data = {"task_id": "t", "wal_path": "/w", "wal_seq": 3}
    elif cls is ev.ProviderDebug:
        data = {"provider": "p", "kind": "k", "data": [1], "more": True}
    return cls.from_data(data), data


def test_every_event_type_reads_back_its_typed_payload_losslessly() -> None:
    for event_type, cls in ev.PAYLOAD_MODELS.items():
        payload, data = _sample(cls)
        assert type(payload) is cls and payload.event_type is event_type
        assert payload.to_payload() == data, cls.__name__
        assert cls.from_data(payload.to_payload()) == payload
        event = RuntimeEvent(event_id="evt_1", session_id="ses_1", event_type=event_type, payload=data)
        assert event.data == data and type(event.payload) is cls and event.payload == payload
        wire = json.loads(event.model_dump_json())
        assert wire["payload"] == data and "data" not in wire  # the JSON form is unchanged
        assert RuntimeEvent.model_validate_json(event.model_dump_json()) == event


def test_the_union_lists_every_payload_class() -> None:
    members = set(typing.get_args(ev.RuntimeEventPayload))
    expected = {c for c in ev.PAYLOAD_CLASSES if not issubclass(c, ev.TaskWalMirror)} | {ev.TaskWalMirror}
    assert members == expected
    assert {c.__name__ for c in ev.PAYLOAD_CLASSES} <= set(dir(ev))  # WAL mirrors too (pickle finds them)
    assert set(ev.__all__) <= set(dir(ev))
    assert (
        agent_core.RuntimeEventPayload is ev.RuntimeEventPayload
        and agent_core.EventPayload is ev.EventPayload
    )


def test_reading_a_payload_is_lenient_and_the_data_keeps_everything() -> None:
    event = RuntimeEvent(
        event_id="evt_1", session_id="ses_1", event_type="tool_completed", payload={"tool_name": "t", "x": 1}
    )
    payload = event.payload
    assert isinstance(payload, ev.ToolCompleted)
    assert payload.tool_name == "t" and payload.duration_ms is None and payload.internal is ev.ABSENT
    assert event.data == {"tool_name": "t", "x": 1}  # an undeclared key stays in the JSON form
    assert json.loads(event.model_dump_json())["payload"] == {"tool_name": "t", "x": 1}
    assert RuntimeEvent(
        event_id="e", session_id="s", event_type="message_delta", data={"text": "a"}
    ).payload == (ev.MessageDelta("a"))


def test_payloads_are_frozen_slotted_dataclasses() -> None:
    delta = ev.MessageDelta("hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.text = "changed"  # type: ignore[misc]
    assert not hasattr(delta, "__dict__")
    for cls in ev.PAYLOAD_CLASSES:
        params = cls.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and "__slots__" in vars(cls), cls.__name__
    assert repr(ev.ToolFailed("t", None)) == (
        "ToolFailed(tool_name='t', error=None, aborted=False, reason=ABSENT, skipped=ABSENT, "
        "duration_ms=ABSENT, internal=ABSENT)"
    )
    assert ev.MessageDelta("a") == ev.MessageDelta("a") != ev.ModelTextDelta("a")
    assert hash(ev.MessageDelta("a")) == hash(ev.MessageDelta("a"))


def test_match_narrows_a_stream_of_events() -> None:
    seen: list[str] = []
    for event_type, payload in [
        ("message_delta", {"text": "Hel"}),
        ("message_delta", {"text": "lo"}),
        ("tool_started", {"tool_name": "code.read_file", "args_summary": "a.txt"}),
        ("run_completed", {"end_reason": "completed", "turn_count": 1, "usage": {}, "final_node_id": None}),
    ]:
        event = RuntimeEvent(event_id="e", session_id="s", event_type=event_type, payload=payload)
        match event.payload:
            case ev.MessageDelta(text=text):
                seen.append(text)
            case ev.ToolStarted(tool_name=name, args_summary=args):
                seen.append(f"[{name} {args}]")
            case ev.RunCompleted(end_reason=end):
                seen.append(f"<{end}>")
    assert seen == ["Hel", "lo", "[code.read_file a.txt]", "<completed>"]
