"""The run scope handed to tools is typed wiring, not a dict of extras (issue 35 item 8): a worker's Task
scope, the run's mode and purpose and the MCP servers that failed in the run are fields of their own."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from agent_core._agents.spec import ChildSpec
from agent_core._runtime.agent_run import AgentRunSpec
from agent_core.tools.context import RunScope, ToolContext, WorkerTaskScope
from agent_core.types.enums import RunMode


@pytest.mark.parametrize("record", [RunScope, ToolContext, AgentRunSpec, ChildSpec])
def test_no_dict_of_extras_travels_with_a_run(record: type) -> None:
    assert [f.name for f in dataclasses.fields(record) if "extras" in f.name] == []


@pytest.mark.parametrize("record", [RunScope, ToolContext])
def test_what_tools_see_of_their_run_has_no_free_form_mapping(record: type) -> None:
    assert [
        f.name for f in dataclasses.fields(record) if "dict[" in str(f.type) or str(f.type) == "Any"
    ] == []


def test_the_scope_fields_carry_their_types() -> None:
    hints = typing.get_type_hints(RunScope)
    assert hints["task_scope"] == WorkerTaskScope | None
    assert hints["mode"] == RunMode | None
    assert hints["purpose"] == str | None
    assert hints["mcp_failed_servers"] == set[str]
