"""The pure permission policy table (docs/permissions.md#what-asks, docs/permissions.md#target-scopes,
docs/permissions.md#network-policy; docs/permissions.md#decisions)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from agent_core.errors import ErrorCode
from agent_core.permissions._policy import PermissionPolicy
from agent_core.tools.preflight import Preflight
from agent_core.types.enums import PermissionDecisionKind
from agent_core.types.tools import ToolDefinition
from tests.fixtures.tool_pipeline import make_settings

OBJ: dict[str, Any] = {"type": "object", "properties": {}}


def tool(name: str = "x.tool", permission: str = "readonly", tags: tuple[str, ...] = ()) -> ToolDefinition:
    return ToolDefinition(
        name=name, description="d", input_schema=OBJ, permission=permission, tags=list(tags)
    )  # type: ignore[arg-type]


READ = tool("code.read_file", tags=("code", "filesystem", "readonly"))
WRITE = tool("code.write_file", "write", ("code", "filesystem", "write"))
RUN = tool("code.run_command", "write", ("code", "dangerous"))
DECL_WRITE = tool("decl.deploy", "write", ("declarative",))
DANGEROUS_READ = tool("x.wipe", "readonly", ("dangerous",))
NETWORK = tool("mcp.web.fetch", "readonly", ("mcp", "network"))
INTERNAL = [
    tool("internal.load_skill", tags=("internal", "readonly")),
    tool("internal.recall_memory", tags=("internal", "readonly")),
    tool("agent.plan_template", tags=("agent", "internal", "readonly")),
    tool("agent.task_get", tags=("agent", "internal", "readonly")),
    tool("agent.task_update", tags=("agent", "internal")),
]
PLAIN = Preflight(target_scope="/p/a.txt")
POLICY = PermissionPolicy.from_settings(make_settings())


@pytest.mark.parametrize(
    ("definition", "reasons"),
    [
        (WRITE, ("write",)),
        (tool("code.edit_file", "write", ("code", "write")), ("write",)),
        (RUN, ("write", "dangerous")),
        (DECL_WRITE, ("write",)),
        (DANGEROUS_READ, ("dangerous",)),
        (NETWORK, ("network",)),
    ],
)
def test_default_ask_categories(definition: ToolDefinition, reasons: tuple[str, ...]) -> None:
    """Case H15."""
    decision = POLICY.decide(definition, PLAIN, has_callback=True)
    assert decision.action == "ask"
    assert decision.reasons == reasons
    assert decision.suggested_decision == PermissionDecisionKind.allow_once


@pytest.mark.parametrize("definition", [READ, tool("my.readonly"), *INTERNAL])
def test_readonly_and_internal_never_ask(definition: ToolDefinition) -> None:
    """Cases H15, H1."""
    assert POLICY.decide(definition, PLAIN, has_callback=False).action == "allow"
    assert POLICY.decide(definition, PLAIN, has_callback=True).action == "allow"


def test_internal_tools_never_ask_even_with_risky_facts() -> None:
    risky = Preflight(target_scope="/x", sensitive=True, outside_write_roots=True)
    internal_write = tool("agent.task_create", "write", ("agent", "internal", "dangerous"))
    assert POLICY.decide(internal_write, risky, has_callback=False).action == "allow"


def test_sensitive_read_asks_with_suggested_deny() -> None:
    """Cases H2, H14."""
    facts = Preflight(target_scope="/p/.env", sensitive=True)
    decision = POLICY.decide(READ, facts, has_callback=True)
    assert (decision.action, decision.reasons, decision.suggested_decision) == (
        "ask",
        ("sensitive_path",),
        PermissionDecisionKind.deny,
    )
    denied = POLICY.decide(READ, facts, has_callback=False)
    assert denied.action == "deny" and denied.deny_code == ErrorCode.permission_denied


def test_outside_project_search_asks() -> None:
    decision = POLICY.decide(
        tool("code.search"),
        Preflight(target_scope="/elsewhere", outside_project_search=True),
        has_callback=True,
    )
    assert decision.action == "ask" and decision.reasons == ("outside_project_search",)
    assert decision.suggested_decision == PermissionDecisionKind.allow_once


def test_no_callback_denies_what_would_ask() -> None:
    """Case H6."""
    for definition in (WRITE, RUN, DECL_WRITE, DANGEROUS_READ, NETWORK):
        decision = POLICY.decide(definition, PLAIN, has_callback=False)
        assert decision.action == "deny" and decision.deny_code == ErrorCode.permission_denied
        assert decision.message and "no permission callback" in decision.message


def test_outside_write_roots_codes() -> None:
    facts = Preflight(target_scope="/etc/x", outside_write_roots=True)
    asked = POLICY.decide(WRITE, facts, has_callback=True)
    assert asked.action == "ask" and asked.reasons == ("write", "outside_write_roots")
    assert asked.suggested_decision == PermissionDecisionKind.deny
    refused = POLICY.decide(WRITE, facts, has_callback=False)
    assert refused.deny_code == ErrorCode.write_outside_allowed_roots


def test_allow_for_session_availability() -> None:
    assert POLICY.decide(WRITE, PLAIN, has_callback=True).allow_for_session_available
    assert not POLICY.decide(WRITE, Preflight(), has_callback=True).allow_for_session_available
    disabled = PermissionPolicy.from_settings(make_settings(permissions={"allow_for_session_enabled": False}))
    assert not disabled.decide(WRITE, PLAIN, has_callback=True).allow_for_session_available


def test_readonly_confirm_makes_non_internal_readonly_calls_ask() -> None:
    policy = PermissionPolicy.from_settings(make_settings(permissions={"readonly_default": "confirm"}))
    decision = policy.decide(READ, PLAIN, has_callback=True)
    assert decision.action == "ask" and decision.reasons == ("readonly_confirm",)
    assert policy.decide(INTERNAL[0], PLAIN, has_callback=True).action == "allow"


@pytest.mark.parametrize(
    ("host", "action"),
    [
        ("api.allowed.dev", "allow"),
        ("API.ALLOWED.DEV", "allow"),
        ("tools-host.io", "allow"),
        ("example.org", "allow"),
        ("deep.sub.example.org", "allow"),
        ("badexample.org", "ask"),
        ("other.dev", "ask"),
        (None, "ask"),
    ],
)
def test_network_confirm_honours_both_allow_lists(host: str | None, action: str) -> None:
    settings = make_settings(
        permissions={"network_policy": {"default": "confirm", "allowed_hosts": ["api.allowed.dev"]}},
        tools={"network": {"allowed_hosts": ["Tools-Host.io"], "allowed_domains": ["example.org"]}},
    )
    decision = PermissionPolicy.from_settings(settings).decide(
        NETWORK, Preflight(network_host=host), has_callback=True
    )
    assert decision.action == action
    if action == "ask" and host:
        assert decision.target_scope == host.lower()  # network-only asks are scoped by host


def test_network_allow_and_deny_modes() -> None:
    allow = PermissionPolicy.from_settings(
        make_settings(permissions={"network_policy": {"default": "allow"}})
    )
    assert allow.decide(NETWORK, Preflight(network_host="x.io"), has_callback=False).action == "allow"
    network_write = tool("mcp.web.post", "write", ("mcp", "network"))
    assert allow.decide(network_write, Preflight(), has_callback=True).reasons == ("write",)
    deny = PermissionPolicy.from_settings(make_settings(permissions={"network_policy": {"default": "deny"}}))
    decision = deny.decide(NETWORK, Preflight(network_host="x.io"), has_callback=True)
    assert decision.action == "deny" and decision.deny_code == ErrorCode.permission_denied


def test_decide_is_pure() -> None:
    facts = Preflight(target_scope="/p/a", sensitive=True)
    before = replace(facts)
    first = POLICY.decide(READ, facts, has_callback=True)
    assert POLICY.decide(READ, facts, has_callback=True) == first
    assert facts == before
