"""Effective tool sets: role matrix, docs/tools.md#effective-tool-sets algorithm, allowed_tools validation
(docs/tools.md#effective-tool-sets)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_core.errors import AgentCoreError, ErrorCode
from agent_core.tools._effective import (
    ROLE_MATRIX,
    TASK_MUTATORS,
    WORKER_STEP_TOOLS,
    apply_overrides,
    compute_effective_tools,
    matches_disabled,
    role_level,
    unmatched_overrides,
    validate_allowed_tools,
)
from agent_core.types.enums import AgentRole
from agent_core.types.tools import ToolDefinition
from tests.fixtures.tool_pipeline import make_settings

OBJ: dict[str, Any] = {"type": "object", "properties": {}}
CORE = [
    ("code.read_file", "readonly", ["code", "filesystem", "readonly"], "parallel"),
    ("code.list_dir", "readonly", ["code", "filesystem", "readonly"], "parallel"),
    ("code.search", "readonly", ["code", "filesystem", "readonly"], "parallel"),
    ("code.write_file", "write", ["code", "filesystem", "write"], "serial"),
    ("code.edit_file", "write", ["code", "filesystem", "write"], "serial"),
    ("code.run_command", "write", ["code", "dangerous"], "serial"),
    ("internal.load_skill", "readonly", ["internal", "readonly"], "parallel"),
    ("internal.recall_memory", "readonly", ["internal", "readonly"], "parallel"),
    ("agent.list_agent_definitions", "readonly", ["agent", "internal", "readonly"], "parallel"),
    ("agent.list_workers", "readonly", ["agent", "internal", "readonly"], "parallel"),
    ("agent.create_sub_agent", "readonly", ["agent", "internal"], "agent"),
    ("agent.fork_agent", "readonly", ["agent", "internal"], "agent"),
    ("agent.dispatch_worker", "readonly", ["agent", "internal"], "agent"),
    ("agent.plan_template", "readonly", ["agent", "internal", "readonly"], "parallel"),
    ("agent.task_template", "readonly", ["agent", "internal", "readonly"], "parallel"),
    ("agent.task_get", "readonly", ["agent", "internal", "readonly"], "parallel"),
    ("agent.task_list", "readonly", ["agent", "internal", "readonly"], "parallel"),
    ("agent.task_query_steps", "readonly", ["agent", "internal", "readonly"], "parallel"),
    *[
        (n, "readonly", ["agent", "internal"], "serial")
        for n in (
            "agent.task_create",
            "agent.task_update",
            "agent.task_claim_step",
            "agent.task_update_step",
            "agent.task_complete",
            "agent.task_fail",
            "agent.task_cancel",
        )
    ],
]
BLACKLIST = {
    "agent.plan_template",
    "agent.create_sub_agent",
    "agent.fork_agent",
    "agent.list_agent_definitions",
    "agent.list_workers",
    "agent.dispatch_worker",
    "agent.task_create",
    "agent.task_update",
    "agent.task_template",
    "agent.task_list",
    "agent.task_complete",
    "agent.task_fail",
    "agent.task_cancel",
    "internal.recall_memory",
}


def d(name: str, permission: str = "readonly", tags: list[str] | None = None, **meta: Any) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description="d",
        input_schema=OBJ,
        permission=permission,
        tags=tags or [],
        metadata=meta,  # type: ignore[arg-type]
    )


def registry_defs() -> list[ToolDefinition]:
    defs = [d(n, p, t, concurrency=c, source=n.split(".")[0]) for n, p, t, c in CORE]
    return [
        *defs,
        d("my.tool", source="python"),
        d("decl.tool", "write", ["declarative"], source="declarative"),
        d("mcp.srv.search", "readonly", ["mcp"], source="mcp", mcp_server_id="srv"),
        d("mcp.srv.write", "write", ["mcp"], source="mcp", mcp_server_id="srv"),
        d("mcp.other.fetch", "readonly", ["mcp", "network"], source="mcp", mcp_server_id="other"),
    ]


def names(role: AgentRole, **kw: Any) -> set[str]:
    settings = kw.pop("settings", make_settings())
    return set(compute_effective_tools(registry_defs(), settings, role, **kw).names)


def test_main_default_set() -> None:
    main = names(AgentRole.main)
    assert {"agent.fork_agent", "agent.plan_template", "internal.recall_memory", "code.write_file"} <= main
    assert {"my.tool", "decl.tool", "mcp.srv.search"} <= main
    assert not {n for n in main if n.startswith("agent.task_")}
    assert "agent.dispatch_worker" not in main and "agent.list_workers" not in main


def test_orchestrator_default_set() -> None:
    orch = names(AgentRole.orchestrator)
    assert {
        "agent.dispatch_worker",
        "agent.list_workers",
        "agent.task_create",
        "agent.create_sub_agent",
    } <= orch
    assert "agent.fork_agent" not in orch and "agent.task_claim_step" not in orch
    assert {"agent.task_get", "agent.task_query_steps", "agent.task_update_step", "agent.task_cancel"} <= orch


@pytest.mark.parametrize("role", [AgentRole.sub, AgentRole.fork])
def test_sub_and_fork_never_see_blacklist_or_task_tools(role: AgentRole) -> None:
    got = names(role)
    assert not got & BLACKLIST
    assert not {n for n in got if n.startswith("agent.task_")}
    assert {"code.read_file", "code.write_file", "code.run_command", "internal.load_skill", "my.tool"} <= got
    # even an explicit request cannot add them (validation rejects, computation intersects)
    assert not names(role, requested=sorted(BLACKLIST | WORKER_STEP_TOOLS)) & (BLACKLIST | WORKER_STEP_TOOLS)


def test_default_worker_set() -> None:
    assert names(AgentRole.worker) == set(WORKER_STEP_TOOLS) | {
        "code.read_file",
        "code.list_dir",
        "code.search",
    }


def test_worker_entry_and_dispatch_lists() -> None:
    entry = ["code.read_file", "code.write_file", *sorted(WORKER_STEP_TOOLS)]
    assert "code.write_file" in names(AgentRole.worker, worker_entry_tools=entry)
    narrowed = names(AgentRole.worker, worker_entry_tools=entry, requested=["code.read_file"])
    assert narrowed == {"code.read_file"} | WORKER_STEP_TOOLS
    assert names(AgentRole.worker, requested=[]) == set(WORKER_STEP_TOOLS)
    # step tools outside the entry ceiling are not retained
    assert names(AgentRole.worker, worker_entry_tools=["code.read_file"], requested=[]) == set()
    with pytest.raises(AgentCoreError) as info:
        validate_allowed_tools(
            ["code.edit_file"], registry_defs(), make_settings(), AgentRole.worker, worker_entry_tools=entry
        )
    assert info.value.details["unavailable"] == [{"tool": "code.edit_file", "reason": "policy_restricted"}]
    assert validate_allowed_tools(
        ["code.write_file", "code.write_file"], registry_defs(), make_settings(), AgentRole.worker
    ) == ["code.write_file"]


def test_compact_fork_set_is_empty() -> None:
    assert names(AgentRole.compact) == set()
    assert names(AgentRole.compact, requested=["code.read_file"]) == set()


def test_sub_agent_allowed_tools_is_exact() -> None:
    allowed = validate_allowed_tools(["code.read_file"], registry_defs(), make_settings(), AgentRole.sub)
    assert names(AgentRole.sub, requested=allowed) == {"code.read_file"}
    assert names(AgentRole.fork, requested=[]) == set()


@pytest.mark.parametrize(
    ("requested", "key", "expected"),
    [
        (["no.such_tool"], "unknown_tools", ["no.such_tool"]),
        (["agent.fork_agent"], "unavailable", [{"tool": "agent.fork_agent", "reason": "mode_restricted"}]),
        (["agent.task_get"], "unavailable", [{"tool": "agent.task_get", "reason": "mode_restricted"}]),
    ],
)
def test_invalid_allowed_tools(requested: list[str], key: str, expected: Any) -> None:
    with pytest.raises(AgentCoreError) as info:
        validate_allowed_tools(requested, registry_defs(), make_settings(), AgentRole.sub)
    assert info.value.code == ErrorCode.validation_error
    assert info.value.details[key] == expected


def test_disabled_tools_and_patterns() -> None:
    settings = make_settings(tools={"disabled": ["code.write_file", "mcp.srv.*"]})
    for role in AgentRole:
        got = names(role, settings=settings)
        assert "code.write_file" not in got and "mcp.srv.search" not in got
    assert "mcp.other.fetch" in names(AgentRole.main, settings=settings)
    with pytest.raises(AgentCoreError) as info:
        validate_allowed_tools(["code.write_file", "mcp.srv.write"], registry_defs(), settings, AgentRole.sub)
    assert info.value.details["unavailable"] == [
        {"tool": "code.write_file", "reason": "disabled_by_config"},
        {"tool": "mcp.srv.write", "reason": "disabled_by_config"},
    ]
    assert matches_disabled("code.read_file", ["code.*"])
    assert not matches_disabled("codex.read_file", ["code.*"])
    assert not matches_disabled("code.read_file", ["*"])


def test_mcp_switches_declarative_switch_memory_and_failed_servers() -> None:
    settings = make_settings(
        tools={"declarative_enabled": False, "mcp": {"disabled_tools": ["mcp.srv.write"]}},
        memory={"enabled": False},
    )
    got = names(AgentRole.main, settings=settings)
    assert "decl.tool" not in got and "mcp.srv.write" not in got and "internal.recall_memory" not in got
    assert "mcp.srv.search" in got
    assert "mcp.srv.search" not in names(
        AgentRole.main, settings=make_settings(tools={"mcp": {"disabled_servers": ["srv"]}})
    )
    failed = names(AgentRole.main, failed_mcp_servers={"srv"})
    assert "mcp.srv.search" not in failed and "mcp.other.fetch" in failed
    with pytest.raises(AgentCoreError) as info:
        validate_allowed_tools(
            ["mcp.srv.search"], registry_defs(), make_settings(), AgentRole.sub, failed_mcp_servers={"srv"}
        )
    assert info.value.details["unavailable"][0]["reason"] == "policy_restricted"


def test_network_deny_removes_network_tools() -> None:
    settings = make_settings(permissions={"network_policy": {"default": "deny"}})
    assert "mcp.other.fetch" not in names(AgentRole.main, settings=settings)
    assert "mcp.other.fetch" in names(AgentRole.main)
    with pytest.raises(AgentCoreError) as info:
        validate_allowed_tools(["mcp.other.fetch"], registry_defs(), settings, AgentRole.fork)
    assert info.value.details["unavailable"] == [{"tool": "mcp.other.fetch", "reason": "permission_denied"}]


def test_overrides_apply_to_python_and_declarative_tools_only() -> None:
    settings = make_settings(
        tools={
            "overrides": {
                "my.tool": {"permission": "write", "tags": ["network"]},
                "decl.tool": {"permission": "readonly", "tags": ["custom"]},
            }
        },
        permissions={"network_policy": {"default": "deny"}},
    )
    eff = compute_effective_tools(registry_defs(), settings, AgentRole.main)
    by_name = {x.name: x for x in eff.definitions}
    assert "my.tool" not in by_name  # now network-tagged, removed by the deny policy
    assert by_name["decl.tool"].permission == "readonly"
    assert by_name["decl.tool"].tags == ["custom", "declarative"]
    core = d("code.read_file", source="code")
    assert apply_overrides(core, settings) is core
    extra = make_settings(
        tools={"overrides": {"my.tool": {"permission": "write"}, "gone.tool": {"tags": []}}}
    )
    assert unmatched_overrides(registry_defs(), extra) == ["gone.tool"]


def test_definitions_keep_registration_order_and_requested_narrows_main() -> None:
    eff = compute_effective_tools(
        registry_defs(), make_settings(), AgentRole.main, requested=["my.tool", "code.search"]
    )
    assert [x.name for x in eff.definitions] == ["code.search", "my.tool"]
    assert "code.search" in eff and "code.read_file" not in eff


def test_role_matrix_shape() -> None:
    assert role_level("agent.something_new", AgentRole.main) is None
    assert role_level("internal.unknown", AgentRole.orchestrator) is None
    assert role_level("code.my_tool", AgentRole.worker) == "P"
    assert role_level("code.write_file", AgentRole.worker) == "P"
    for name in TASK_MUTATORS:
        assert set(ROLE_MATRIX[name]) == {AgentRole.orchestrator}
    for role in (AgentRole.sub, AgentRole.fork, AgentRole.worker, AgentRole.compact):
        assert all(role_level(n, role) is None for n in BLACKLIST)


ALL_NAMES = [x.name for x in registry_defs()] + ["no.such"]


@given(
    role=st.sampled_from(list(AgentRole)),
    requested=st.none() | st.lists(st.sampled_from(ALL_NAMES), max_size=8),
    entry=st.none() | st.lists(st.sampled_from(ALL_NAMES), max_size=8),
)
def test_effective_set_never_exceeds_role_permission(
    role: AgentRole, requested: list[str] | None, entry: list[str] | None
) -> None:
    eff = compute_effective_tools(
        registry_defs(), make_settings(), role, requested=requested, worker_entry_tools=entry
    )
    registered = {x.name for x in registry_defs()}
    assert eff.names <= registered
    assert all(role_level(n, role) is not None for n in eff.names)
    if role != AgentRole.worker and requested is not None:
        assert eff.names <= set(requested)
    if role in (AgentRole.sub, AgentRole.fork, AgentRole.worker, AgentRole.compact):
        assert not eff.names & BLACKLIST
