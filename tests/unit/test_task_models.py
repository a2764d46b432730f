"""WAL record schema, payload contract, name/id validation and the Task tool definitions
(docs/task-board.md#task-tools, docs/task-board.md#wal-records, docs/testing.md; docs/task-board.md)."""

from __future__ import annotations

import copy
import json
import typing
from typing import Any

import pytest
from pydantic import ValidationError

from agent_core._tasks.inputs import (
    StepInput,
    TaskCreateInput,
    TaskUpdateInput,
    TaskUpdateStepInput,
    parse_input,
)
from agent_core._tasks.models import (
    EVENT_CLASSES,
    PAYLOAD_MODELS,
    TaskWalEvent,
    WalEventType,
    parse_wal_event,
)
from agent_core._tasks.tool_definitions import TASK_TOOL_NAMES, task_tool_definitions
from agent_core._tasks.wal import normalize_wal_name
from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._schema import check_schema, validate_arguments
from agent_core.types.enums import WAL_EVENT_TYPES

COMMON = [
    "wal_seq",
    "session_id",
    "event_id",
    "event_type",
    "actor_agent_id",
    "actor_run_id",
    "task_id",
    "step_id",
    "payload",
    "created_at",
]

CONTRACT_PAYLOAD_KEYS = {
    "task_created": {"task"},
    "task_running": {"previous_status", "status", "reason"},
    "task_updated": {"operations", "updated_after_dispatch_step_ids", "task_summary"},
    "task_reopened": {"previous_status", "status", "reason"},
    "task_completed": {"result_summary", "cancelled_optional_step_ids"},
    "task_failed": {"reason", "failed_step_ids"},
    "task_cancelled": {"reason", "cancelled_step_ids"},
    "task_step_ready": {"previous_status", "status", "depends_on_step_ids"},
    "task_step_claimed": {"previous_status", "claimed_by_agent_id", "claimed_by_run_id", "lease_expires_at"},
    "task_step_started": {"previous_status", "status", "lease_expires_at"},
    "task_step_updated": {"previous_status", "status", "result_summary", "artifact_ids", "lease_expires_at"},
    "task_step_blocked": {"previous_status", "reason", "result_summary", "artifact_ids"},
    "task_step_completed": {"previous_status", "result_summary", "artifact_ids"},
    "task_step_failed": {"previous_status", "reason", "result_summary", "artifact_ids"},
    "task_step_cancelled": {"previous_status", "reason", "result_summary"},
    "task_step_reopened": {"previous_status", "status", "reason"},
    "task_step_lease_expired": {"previous_status", "claimed_by_agent_id", "claimed_by_run_id", "expired_at"},
}


def claimed_line(**overrides: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "wal_seq": 4,
        "session_id": "sess_20260612_153022_a1b2",
        "event_id": "evt_5b0f12",
        "event_type": "task_step_claimed",
        "actor_agent_id": "agent_7c1e",
        "actor_run_id": "run_91d2",
        "task_id": "fix-login",
        "step_id": "collect-logs",
        "payload": {
            "previous_status": "ready",
            "claimed_by_agent_id": "agent_7c1e",
            "claimed_by_run_id": "run_91d2",
            "lease_expires_at": "2026-06-12T15:41:02.120Z",
        },
        "created_at": "2026-06-12T15:36:02.120Z",
    }
    line.update(overrides)
    return line


def test_the_task_spec_example_line_parses() -> None:
    event = parse_wal_event(claimed_line())
    assert type(event).__name__ == "StepClaimedEvent"
    assert list(type(event).model_fields) == COMMON
    assert list(TaskWalEvent.model_fields) == COMMON


@pytest.mark.parametrize("missing", COMMON)
def test_missing_common_field_fails(missing: str) -> None:
    line = claimed_line()
    del line[missing]
    with pytest.raises(ValidationError):
        parse_wal_event(line)


def test_extra_field_and_unknown_event_type_fail() -> None:
    with pytest.raises(ValidationError):
        parse_wal_event(claimed_line(extra=1))
    for bad in ("task_step_claim_skipped", "task_wal_replayed", "task_wal_failed", "no_step_claimed", "x"):
        with pytest.raises(ValidationError):
            parse_wal_event(claimed_line(event_type=bad))
    assert set(PAYLOAD_MODELS) == set(WAL_EVENT_TYPES) and len(WAL_EVENT_TYPES) == 17
    # the record type Literal and the enum-derived tuple are one list, in contract order
    assert typing.get_args(WalEventType) == WAL_EVENT_TYPES == tuple(PAYLOAD_MODELS) == tuple(EVENT_CLASSES)


def test_payload_keys_are_exact_and_all_required() -> None:
    for event_type, keys in CONTRACT_PAYLOAD_KEYS.items():
        assert set(PAYLOAD_MODELS[event_type].model_fields) == keys, event_type
        assert all(f.is_required() for f in PAYLOAD_MODELS[event_type].model_fields.values()), event_type
    line = claimed_line()
    line["payload"] = {**line["payload"], "extra": 1}
    with pytest.raises(ValidationError):
        parse_wal_event(line)
    line = claimed_line()
    del line["payload"]["lease_expires_at"]
    with pytest.raises(ValidationError):
        parse_wal_event(line)


def test_common_field_rules() -> None:
    with pytest.raises(ValidationError):  # step events need step_id
        parse_wal_event(claimed_line(step_id=None))
    with pytest.raises(ValidationError):  # task-level events have step_id null
        parse_wal_event(
            claimed_line(
                event_type="task_running",
                payload={"previous_status": "pending", "status": "running", "reason": None},
            )
        )
    with pytest.raises(ValidationError):  # actor_run_id null only for "core"
        parse_wal_event(claimed_line(actor_run_id=None))
    core = parse_wal_event(claimed_line(actor_agent_id="core", actor_run_id=None))
    assert core.actor_run_id is None
    with pytest.raises(ValidationError):
        parse_wal_event(claimed_line(event_id="5b0f"))
    with pytest.raises(ValidationError):
        parse_wal_event(claimed_line(created_at="2026-06-12 15:36"))
    with pytest.raises(ValidationError):
        parse_wal_event(claimed_line(wal_seq="4"))
    with pytest.raises(ValidationError):  # fixed literal values
        parse_wal_event(
            claimed_line(
                event_type="task_step_started",
                payload={"previous_status": "claimed", "status": "claimed", "lease_expires_at": "x"},
            )
        )


def test_base_class_checks_payload_matches_event_type() -> None:
    line = claimed_line()
    TaskWalEvent.model_validate(line)
    wrong = copy.deepcopy(line)
    wrong["event_type"] = "task_step_started"
    with pytest.raises(ValidationError):
        TaskWalEvent.model_validate(wrong)


def test_to_line_round_trips() -> None:
    event = parse_wal_event(claimed_line())
    raw = event.to_line()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert parse_wal_event(raw[:-1]) == event


# ---------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["work", "work.wal.jsonl", "a-b_c9", "x" * 64, "x" * 64 + ".wal.jsonl"])
def test_wal_name_accepted(name: str) -> None:
    """Case K1."""
    base = name.removesuffix(".wal.jsonl")
    assert normalize_wal_name(name) == base + ".wal.jsonl"


@pytest.mark.parametrize(
    "name",
    ["", ".hidden", "a/b", "../x", "/abs", "Work", "a.b", "x" * 65, "..", ".wal.jsonl", "a b", "a.jsonl"],
)
def test_wal_name_rejected(name: str) -> None:
    """Case K23."""
    with pytest.raises(AgentCoreError) as info:
        normalize_wal_name(name)
    assert info.value.code == ErrorCode.validation_error


@pytest.mark.parametrize("bad", ["", "A", "a/b", "..", "a.b", "A B", "x" * 65, "é"])
def test_task_and_step_id_rules(bad: str) -> None:
    """Case K23."""
    base = {
        "task_id": "t1",
        "wal_name": "w",
        "title": "T",
        "summary": "S",
        "steps": [{"step_id": "s1", "title": "t", "summary": "s", "depends_on_step_ids": []}],
    }
    for args in ({**base, "task_id": bad}, {**base, "steps": [{**base["steps"][0], "step_id": bad}]}):
        with pytest.raises(AgentCoreError) as info:
            parse_input(TaskCreateInput, args)
        assert info.value.code == ErrorCode.validation_error
        assert info.value.details["errors"]
    assert parse_input(TaskCreateInput, {**base, "task_id": "x" * 64}).task_id == "x" * 64


@pytest.mark.parametrize("field", ["priority", "order", "reorder"])
def test_ordering_fields_rejected(field: str) -> None:
    """Case K24."""
    with pytest.raises(ValidationError):
        StepInput.model_validate(
            {"step_id": "s", "title": "t", "summary": "s", "depends_on_step_ids": [], field: 1}
        )


def test_required_defaults_true_and_deps_are_mandatory() -> None:
    """Case K39."""
    step = StepInput.model_validate({"step_id": "s", "title": "t", "summary": "s", "depends_on_step_ids": []})
    assert step.required is True and step.worker_pool_id is None
    with pytest.raises(ValidationError):
        StepInput.model_validate({"step_id": "s", "title": "t", "summary": "s"})
    with pytest.raises(ValidationError):
        StepInput.model_validate({"step_id": "s", "title": "", "summary": "s", "depends_on_step_ids": []})


def test_actor_fields_are_rejected_by_schema_and_model() -> None:
    """Case K46."""
    defs = {d.name: d for d in task_tool_definitions()}
    for name in TASK_TOOL_NAMES:
        args = {"task_id": "t1", "actor_agent_id": "agent_x"}
        with pytest.raises(AgentCoreError) as info:
            validate_arguments(defs[name].input_schema, args)
        assert info.value.code == ErrorCode.validation_error
    with pytest.raises(AgentCoreError):
        parse_input(
            TaskUpdateStepInput, {"task_id": "t1", "step_id": "s", "status": "running", "actor_agent_id": "a"}
        )


@pytest.mark.parametrize(
    "op",
    [
        {"op": "update_task"},
        {"op": "add_step"},
        {"op": "add_step", "step": {"step_id": "x", "title": "t", "summary": "s"}},
        {"op": "update_step", "step_id": "a"},
        {"op": "update_step", "step_id": "a", "fields": {}},
        {"op": "update_step", "step_id": "a", "fields": {"status": "ready"}},
        {"op": "delete_step"},
        {"op": "add_dependency", "step_id": "a"},
        {"op": "remove_dependency", "depends_on_step_id": "a"},
        {"op": "cancel_step"},
        {"op": "reopen_step", "reason": "x"},
        {"op": "archive_step", "step_id": "a"},
        {"op": "update_task", "status": "completed"},
        {
            "op": "add_step",
            "step_id": "y",
            "step": {"step_id": "x", "title": "t", "summary": "s", "depends_on_step_ids": []},
        },
        {
            "op": "add_step",
            "required": False,
            "step": {
                "step_id": "x",
                "title": "t",
                "summary": "s",
                "depends_on_step_ids": [],
                "required": True,
            },
        },
    ],
)
def test_operation_required_fields(op: dict[str, Any]) -> None:
    """Case K21."""
    inp = TaskUpdateInput(task_id="t1", operations=[{"op": "cancel_step", "step_id": "a"}, op])
    with pytest.raises(AgentCoreError) as info:
        inp.parsed_operations()
    assert info.value.code == ErrorCode.validation_error
    assert info.value.details["op_index"] == 1


def test_update_step_input_rules() -> None:
    with pytest.raises(AgentCoreError):
        parse_input(TaskUpdateStepInput, {"task_id": "t1", "step_id": "s"})
    with pytest.raises(AgentCoreError):
        parse_input(TaskUpdateStepInput, {"task_id": "t1", "step_id": "s", "status": "ready"})
    for field in ("title", "summary", "depends_on_step_ids", "worker_pool_id", "required"):
        with pytest.raises(AgentCoreError):
            parse_input(
                TaskUpdateStepInput, {"task_id": "t1", "step_id": "s", "status": "running", field: "x"}
            )
    ok = parse_input(
        TaskUpdateStepInput, {"task_id": "t1", "step_id": "s", "result_summary": "r", "reason": None}
    )
    assert ok.reason is None


# ---------------------------------------------------------------------------------------------- tools


def test_tool_definitions() -> None:
    """Case K38."""
    defs = task_tool_definitions()
    names = [d.name for d in defs]
    assert names == list(TASK_TOOL_NAMES) and len(names) == 11
    assert "agent.task_archive" not in names and "agent.task_delete" not in names
    reads = {"agent.task_template", "agent.task_get", "agent.task_list", "agent.task_query_steps"}
    for d in defs:
        check_schema(d.input_schema)
        assert d.permission == "readonly"
        assert d.input_schema["additionalProperties"] is False
        if d.name in reads:
            assert d.tags == ["agent", "internal", "readonly"] and d.metadata["concurrency"] == "parallel"
        else:
            assert d.tags == ["agent", "internal"] and d.metadata["concurrency"] == "serial"


def test_tool_schemas_follow_contract_json_types() -> None:
    defs = {d.name: d.input_schema for d in task_tool_definitions()}
    assert set(defs["agent.task_query_steps"]["properties"]) == {
        "task_id",
        "statuses",
        "worker_pool_id",
        "claimed_by_agent_id",
        "include_terminal_steps",
        "limit",
        "offset",
    }
    assert defs["agent.task_query_steps"]["properties"]["statuses"]["type"] == "array"
    assert defs["agent.task_list"]["properties"]["limit"]["type"] == "integer"
    assert defs["agent.task_list"]["properties"]["include_terminal"]["type"] == "boolean"
    assert defs["agent.task_update_step"]["properties"]["artifact_ids"]["items"]["type"] == "string"
    assert defs["agent.task_create"]["required"] == ["task_id", "wal_name", "title", "summary", "steps"]
    assert defs["agent.task_update"]["properties"]["operations"]["items"]["type"] == "object"
    assert set(defs["agent.task_update_step"]["properties"]) == {
        "task_id",
        "step_id",
        "status",
        "result_summary",
        "artifact_ids",
        "reason",
    }
    validate_arguments(
        defs["agent.task_update"], {"task_id": "t1", "operations": [{"op": "delete_step", "step_id": "a"}]}
    )


# ---- replay's validator without the per-record actor rule ---------------------------------------------


def _record_line(actor_agent_id: str, actor_run_id: str | None) -> bytes:
    return json.dumps(
        {
            "wal_seq": 3,
            "session_id": "sess_1",
            "event_id": "evt_3",
            "event_type": "task_step_updated",
            "actor_agent_id": actor_agent_id,
            "actor_run_id": actor_run_id,
            "task_id": "t1",
            "step_id": "a",
            "payload": {
                "previous_status": "running",
                "status": "running",
                "result_summary": "half",
                "artifact_ids": ["art_1"],
                "lease_expires_at": "2026-06-12T15:30:00.000Z",
            },
            "created_at": "2026-06-12T15:30:00.000Z",
        }
    ).encode()


def test_the_unchecked_actor_validator_differs_only_by_the_actor_rule() -> None:
    from agent_core._tasks.models import unchecked_actor_validator, wal_event_adapter

    fast = unchecked_actor_validator().validate_json
    for agent, run in [("agent_w", "run_w"), ("core", None)]:
        line = _record_line(agent, run)
        checked = wal_event_adapter.validate_json(line)
        unchecked = fast(line)
        assert type(unchecked) is type(checked)
        assert unchecked == checked and unchecked.to_line() == checked.to_line()
    for agent, run in [("agent_w", None), ("core", "run_w")]:
        line = _record_line(agent, run)
        with pytest.raises(ValidationError, match="actor_run_id may be null only"):
            wal_event_adapter.validate_json(line)
        assert fast(line).actor_agent_id == agent  # the rule is the caller's (replay checks it per line)
    with pytest.raises(ValidationError):
        fast(_record_line("agent_w", "run_w").replace(b'"evt_3"', b'"evt-3"'))
