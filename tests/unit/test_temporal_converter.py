"""The temporal engine's data converter decodes payloads as the SDK's default converter does (with each
dataclass's type hints resolved once): same values, same failures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio.converter import DataConverter

from agent_core.engine.temporal._converter import DATA_CONVERTER
from agent_core.engine.temporal._payloads import (
    Checkpoint,
    PermissionSignal,
    PlannedCall,
    RunInput,
    RunResult,
    Step,
    StepInput,
    ToolGroup,
    ToolPlan,
)


@dataclass
class WithLateField:
    name: str
    count: int = 0
    late: list[str] = field(default_factory=list, init=False)


def _decode(converter: DataConverter, value: Any, hint: type) -> Any:
    payloads = DataConverter.default.payload_converter.to_payloads([value])
    return converter.payload_converter.from_payloads(payloads, [hint])[0]


STEP = Step(
    "tools",
    Checkpoint(turns=2, usages=[{"input_tokens": 3}], budget={"tokens": 3}, tip_node_id="n1"),
    assistant_node_id="n2",
    outcome={"status": "completed", "end_reason": None},
    tools=ToolPlan("plan_1", "q@w", [ToolGroup("serial", [PlannedCall(0, "call_1", done=True)])]),
    finished=RunResult("run_1", "completed", None),
)


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (StepInput("run_1", "ses_1", STEP, begin=RunInput("run_1", "ses_1", '{"content": "hi"}')), StepInput),
        (StepInput("run_1", "ses_1", Step("model", Checkpoint())), StepInput),
        ([PermissionSignal("perm_1", "{}")], list[PermissionSignal]),
        (RunResult("run_1", "failed", "error"), RunResult),
    ],
)
def test_payloads_decode_as_with_the_default_converter(value: Any, hint: type) -> None:
    ours = _decode(DATA_CONVERTER, value, hint)
    assert ours == value == _decode(DataConverter.default, value, hint)


def test_init_false_fields_unknown_keys_and_mistyped_fields_as_the_default() -> None:
    value = WithLateField("a", 2)
    value.late = ["x"]
    assert _decode(DATA_CONVERTER, value, WithLateField).late == ["x"]
    payloads = DataConverter.default.payload_converter.to_payloads([{"name": "b", "extra": 1}])
    assert DATA_CONVERTER.payload_converter.from_payloads(payloads, [WithLateField])[0] == WithLateField("b")
    for bad in ({"name": 1}, {"name": "c", "count": "3"}, ["not", "a", "dict"], {"count": 1}):
        payloads = DataConverter.default.payload_converter.to_payloads([bad])
        for converter in (DATA_CONVERTER, DataConverter.default):
            with pytest.raises(TypeError):
                converter.payload_converter.from_payloads(payloads, [WithLateField])
