"""One typed payload per event type, and events built only through them (issue 15 item 4)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import agent_core
from agent_core._events import payloads as ev
from agent_core._redaction import Redactor
from agent_core._storage.drafts import EventDraft
from agent_core.types.enums import EventLevel, EventType

SRC = Path(agent_core.__file__).parent
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
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
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
