"""Compaction payload extraction/validation/normalisation and the compact fork's input
(docs/compaction.md#the-compact-fork, docs/compaction.md#the-payload)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from agent_core._compact.inputs import TOOL_RESULT_CHARS, build_input, range_facts
from agent_core._compact.payload import (
    REQUIRED_SECTIONS,
    extract_json_object,
    normalize_sections,
    validate_payload,
)
from agent_core._compact.policy import plan_cut
from agent_core.errors import ErrorCode, SchemaError
from agent_core.types.content import (
    ArtifactRefBlock,
    ErrorPayload,
    JsonBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
)
from agent_core.types.runtime import Node
from tests.unit.test_compact_policy import assistant, node, turn, user

FULL = "\n".join(f"{'#' * level} {name}\n- item" for name, level in REQUIRED_SECTIONS)


def payload(**overrides: Any) -> str:
    body: dict[str, Any] = {
        "summary": FULL,
        "first_kept_node_id": "node_k",
        "tokens_before": 1234,
        "details": {},
    }
    body.update(overrides)
    return json.dumps({k: v for k, v in body.items() if v is not ...})


def check(text: str, *, split: bool = False) -> Any:
    return validate_payload(text, expected_first_kept="node_k", tokens_before=1234, split_turn=split)


def test_extraction_order_whole_fenced_outermost() -> None:
    assert extract_json_object('{"a": 1}') == {"a": 1}
    fenced = 'Here it is:\n```json\n{"a": 2}\n```\nand {"b": 3} later'
    assert extract_json_object(fenced) == {"a": 2}
    assert extract_json_object('Sure! {"a": {"b": 4}} done.') == {"a": {"b": 4}}
    with pytest.raises(SchemaError):
        extract_json_object("no json here")
    with pytest.raises(SchemaError):
        extract_json_object("[1, 2]")


def test_valid_payload_keeps_summary_and_model_details() -> None:
    result = check(payload(details={"note": "x"}))
    assert result.summary == FULL and result.normalized_sections == []
    assert result.model_details == {"note": "x"} and result.reported_tokens_before == 1234


def test_missing_next_steps_heading_is_appended() -> None:
    summary = "\n".join(
        f"{'#' * level} {name}\n- item" for name, level in REQUIRED_SECTIONS if name != "Next Steps"
    )
    result = check(payload(summary=summary))
    assert result.normalized_sections == ["Next Steps"]
    assert result.summary.endswith("## Next Steps\n(none)")


def test_split_turn_requires_the_prefix_section() -> None:
    text, added = normalize_sections(FULL, split_turn=True)
    assert added == ["Split Turn Prefix"] and text.endswith("## Split Turn Prefix\n(none)")
    text, added = normalize_sections(FULL + "\n## Split Turn Prefix\nearly part", split_turn=True)
    assert added == [] and text == FULL + "\n## Split Turn Prefix\nearly part"


def test_headings_only_summary_gets_every_missing_section() -> None:
    text, added = normalize_sections("Just prose.", split_turn=False)
    assert added == [name for name, _ in REQUIRED_SECTIONS]
    assert text.startswith("Just prose.") and "### Blocked\n(none)" in text


@pytest.mark.parametrize(
    "text",
    [
        payload(first_kept_node_id=...),
        payload(summary="   "),
        payload(first_kept_node_id="node_other"),
        payload(tokens_before=-1),
        payload(tokens_before="12"),
        payload(details=[1]),
        payload(extra="nope"),
        "I could not summarise this.",
    ],
    ids=[
        "missing-first-kept",
        "empty-summary",
        "wrong-cut",
        "negative",
        "string-int",
        "details",
        "extra",
        "prose",
    ],
)
def test_invalid_payloads_are_schema_errors(text: str) -> None:
    with pytest.raises(SchemaError) as info:
        check(text)
    assert info.value.code == ErrorCode.schema_error


def test_reported_tokens_before_may_differ() -> None:
    assert check(payload(tokens_before=7)).reported_tokens_before == 7


def _result_node(call_id: str, blocks: list[Any], *, error: bool = False) -> Node:
    err = ErrorPayload(code=ErrorCode.file_not_found, message="gone") if error else None
    block = ToolResultBlock(tool_call_id=call_id, content=blocks, is_error=error, error=err)
    return node("tool", 20, content=[block])


def _read_turn(path: str, call_id: str, *, error: bool = False, name: str = "code.read_file") -> list[Node]:
    call = node(
        "assistant", 20, content=[ToolCallBlock(tool_call_id=call_id, name=name, arguments={"path": path})]
    )
    return [user(), call, _result_node(call_id, [TextBlock(text="r")], error=error), assistant()]


def test_range_facts_file_operations_and_artifacts() -> None:
    previous = node(
        "user",
        10,
        node_type="compaction",
        metadata={
            "first_kept_node_id": "x",
            "details": {"files_read": ["old.txt"], "files_modified": ["m.py"]},
        },
    )
    artifact_result = _result_node(
        "call_art",
        [
            ArtifactRefBlock(artifact_id="art_1", summary="big log"),
            JsonBlock(artifact_id="art_2", summary="json shape"),
        ],
    )
    nodes = [
        *_read_turn("a.txt", "c1"),
        *_read_turn("missing.txt", "c2", error=True),
        *_read_turn("b.py", "c3", name="code.write_file"),
        *_read_turn("c.py", "c4", name="code.edit_file"),
        *_read_turn("old.txt", "c5"),
        artifact_result,
    ]
    facts = range_facts(nodes, previous)
    assert facts.files_read == ["old.txt", "a.txt"]
    assert facts.files_modified == ["m.py", "b.py", "c.py"]
    assert facts.artifacts == {"art_1": "big log", "art_2": "json shape"}


def test_compact_input_sections_and_split_prefix() -> None:
    path = turn(0, calls=6, result_tokens=300)
    plan = plan_cut(path, keep_recent_tokens=700, non_system_budget=2000)
    assert plan is not None and plan.split_turn
    facts = range_facts(plan.summarised, None)
    text = build_input(plan, facts, tokens_before=4321, budget_tokens=100_000).text
    assert "<split_turn_prefix>" in text and "<conversation>" in text
    assert "<previous_summary>" not in text
    assert f"<first_kept_node_id>{plan.first_kept_node_id}</first_kept_node_id>" in text
    assert "<tokens_before>4321</tokens_before>" in text
    assert "<file_operations>" in text and "<artifacts>" in text
    prefix = text.split("<split_turn_prefix>")[1].split("</split_turn_prefix>")[0]
    assert path[0].node_id in prefix and "tool_call code.read_file" in prefix


def test_compact_input_truncates_tool_results_and_oldest_entries() -> None:
    big = _result_node("c_big", [TextBlock(text="z" * 5000)])
    older = [n for i in range(30) for n in turn(100 + i)]
    path = [*older, user(), assistant(20, ("c_big",)), big, assistant(), *turn(200), *turn(201)]
    comp = node(
        "user",
        50,
        node_type="compaction",
        content=[TextBlock(text="PREVIOUS SUMMARY TEXT")],
        metadata={"first_kept_node_id": path[0].node_id},
    )
    path = [path[0], comp, *path[1:]]
    plan = plan_cut(path, keep_recent_tokens=400, non_system_budget=100_000)
    assert plan is not None
    facts = range_facts(plan.summarised, plan.previous_compaction)
    full = build_input(plan, facts, tokens_before=1, budget_tokens=1_000_000)
    assert not full.truncated and full.omitted_entries == 0
    line = next(ln for ln in full.text.splitlines() if "tool result" in ln and "c_big" in ln)
    assert "z" * TOOL_RESULT_CHARS in line and "z" * (TOOL_RESULT_CHARS + 1) not in line
    small = build_input(plan, facts, tokens_before=1, budget_tokens=len(full.text) // 8)
    assert small.truncated and small.omitted_entries > 0
    assert re.search(rf"\[… {small.omitted_entries} earlier items omitted …\]", small.text)
    assert "PREVIOUS SUMMARY TEXT" in small.text
    assert len(small.text) // 4 + 4 <= len(full.text) // 8


def test_compact_input_shortens_the_split_prefix_but_keeps_the_user_message() -> None:
    path = turn(0, calls=8, result_tokens=300)
    plan = plan_cut(path, keep_recent_tokens=300, non_system_budget=5000)
    assert plan is not None and plan.split_turn and plan.conversation == ()
    facts = range_facts(plan.summarised, None)
    full = build_input(plan, facts, tokens_before=1, budget_tokens=1_000_000)
    budget = len(full.text) // 4 // 2
    short = build_input(plan, facts, tokens_before=1, budget_tokens=budget)
    assert short.fits and short.truncated and short.omitted_entries > 0
    prefix = short.text.split("<split_turn_prefix>")[1].split("</split_turn_prefix>")[0].strip().splitlines()
    assert prefix[0].startswith(f"[{path[0].node_id}] user:")
    assert prefix[1] == f"[… {short.omitted_entries} earlier items omitted …]"
    assert len(short.text) // 4 + 4 <= budget + 1
    hopeless = build_input(plan, facts, tokens_before=1, budget_tokens=50)
    assert not hopeless.fits and hopeless.truncated
