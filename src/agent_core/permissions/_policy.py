"""The pure permission policy (docs/permissions.md#what-asks, docs/permissions.md#target-scopes,
docs/permissions.md#network-policy; docs/permissions.md#decisions).

:meth:`PermissionPolicy.decide` maps a tool definition (overrides applied) and the call's pre-flight
facts to ``allow`` / ``ask`` / ``deny`` with the reasons for asking, the suggested decision, the
``allow_for_session`` scope and, for a denial without a callback, the error code. It performs no I/O and
keeps no state; the session cache and the callback live in :mod:`agent_core.permissions._gate`.

A protected target (:mod:`agent_core.permissions._protected`: git internals, soong-agent's state, credential
files) adds ``protected_path`` / ``credential_path``: the call asks with ``suggested_decision = deny`` and
``allow_for_session`` unavailable, and is denied without a callback, whatever else the table says.

A ``network``-tagged call whose host is in ``tools.network.denied_domains`` is denied without asking
(host lists: :mod:`agent_core.permissions._network`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from agent_core.config.schema import PermissionsSection, Settings, ToolsNetwork
from agent_core.errors import ErrorCode
from agent_core.permissions._network import DENIED_DOMAINS_KEY, NetworkRules, normalise_host
from agent_core.permissions._protected import ProtectedPath
from agent_core.types.enums import PermissionDecisionKind
from agent_core.types.tools import ToolDefinition

Action = Literal["allow", "ask", "deny"]

REASON_WRITE = "write"
REASON_DANGEROUS = "dangerous"
REASON_SENSITIVE = "sensitive_path"
REASON_OUTSIDE_ROOTS = "outside_write_roots"
REASON_NETWORK = "network"
REASON_OUTSIDE_SEARCH = "outside_project_search"
REASON_READONLY_CONFIRM = "readonly_confirm"
REASON_PROTECTED = "protected_path"
"""A write into git internals or soong-agent's own state (``permissions._protected``)."""
REASON_CREDENTIAL = "credential_path"
"""A well-known credential file (``permissions._protected``)."""
UNGRANTABLE = frozenset({REASON_PROTECTED, REASON_CREDENTIAL})
"""Reasons no permission rule waives and no ``allow_for_session`` grant covers: such a call always asks."""


def protected_of(facts: CallFacts) -> tuple[ProtectedPath, ...]:
    """The protected targets a pre-flight found (``Preflight.protected``; none for other fact types)."""
    found = getattr(facts, "protected", ())
    return tuple(p for p in found if isinstance(p, ProtectedPath)) if found else ()


class CallFacts(Protocol):
    """What the policy needs to know about one call (``tools.adapter.Preflight`` satisfies it)."""

    @property
    def target_scope(self) -> str | None: ...
    @property
    def network_host(self) -> str | None: ...
    @property
    def cwd(self) -> Path | None: ...
    @property
    def env_summary(self) -> dict[str, str]: ...
    @property
    def sensitive(self) -> bool: ...
    @property
    def outside_write_roots(self) -> bool: ...
    @property
    def outside_project_search(self) -> bool: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyDecision:
    action: Action
    reasons: tuple[str, ...] = ()
    """Why the call asks (or was denied for lack of a callback)."""
    suggested_decision: PermissionDecisionKind = PermissionDecisionKind.allow_once
    allow_for_session_available: bool = False
    target_scope: str | None = None
    """Scope used for ``allow_for_session`` (pre-flight scope, or the lowercased host of a network-only ask)."""
    deny_code: ErrorCode | None = None
    message: str | None = None


class PermissionPolicy:
    """Stateless decision table built from ``[permissions]`` and ``[tools.network]``."""

    def __init__(self, permissions: PermissionsSection, network: ToolsNetwork | None = None) -> None:
        self._permissions = permissions
        net = network or ToolsNetwork()
        policy = permissions.network_policy
        self.network = NetworkRules(
            allowed_hosts=(*policy.allowed_hosts, *net.allowed_hosts),
            allowed_domains=(*policy.allowed_domains, *net.allowed_domains),
            denied_domains=net.denied_domains,
            private_networks=net.allowed_private_networks,
        )
        """The host lists (``permissions._network``), shared with the tools that connect."""

    @classmethod
    def from_settings(cls, settings: Settings) -> PermissionPolicy:
        return cls(settings.permissions, settings.tools.network)

    def host_allowed(self, host: str | None) -> bool:
        """Exact allow-listed host, or a host equal to / below an allow-listed domain (case-insensitive),
        never a denied one."""
        return self.network.host_allowed(host)

    def decide(self, tool: ToolDefinition, facts: CallFacts, *, has_callback: bool) -> PolicyDecision:
        tags = set(tool.tags)
        scope = facts.target_scope
        if "internal" in tags:
            return PolicyDecision(action="allow", target_scope=scope)
        reasons: list[str] = []
        if tool.permission == "write":
            reasons.append(REASON_WRITE)
        if "dangerous" in tags:
            reasons.append(REASON_DANGEROUS)
        if facts.sensitive:
            reasons.append(REASON_SENSITIVE)
        if facts.outside_write_roots:
            reasons.append(REASON_OUTSIDE_ROOTS)
        if facts.outside_project_search:
            reasons.append(REASON_OUTSIDE_SEARCH)
        protected = protected_of(facts)
        kinds = {p.kind for p in protected}
        if kinds - {"credential"}:
            reasons.append(REASON_PROTECTED)
        if "credential" in kinds:
            reasons.append(REASON_CREDENTIAL)
        if "network" in tags:
            if self.network.host_denied(facts.network_host):
                return PolicyDecision(
                    action="deny",
                    reasons=(REASON_NETWORK,),
                    target_scope=scope,
                    deny_code=ErrorCode.permission_denied,
                    message=f"tool '{tool.name}' may not contact {facts.network_host}: it is in "
                    f"{DENIED_DOMAINS_KEY}",
                )
            mode = self._permissions.network_policy.default
            if mode == "deny":
                return PolicyDecision(
                    action="deny",
                    reasons=(REASON_NETWORK,),
                    target_scope=scope,
                    deny_code=ErrorCode.permission_denied,
                    message=f"tool '{tool.name}' needs network access, which permissions.network_policy denies",
                )
            if mode == "confirm" and not self.host_allowed(facts.network_host):
                reasons.append(REASON_NETWORK)
        if not reasons and tool.permission == "readonly" and self._permissions.readonly_default == "confirm":
            reasons.append(REASON_READONLY_CONFIRM)
        if not reasons:
            return PolicyDecision(action="allow", target_scope=scope)
        if scope is None and reasons == [REASON_NETWORK] and facts.network_host:
            scope = normalise_host(facts.network_host)
        risky = facts.sensitive or facts.outside_write_roots or bool(protected)
        suggested = PermissionDecisionKind.deny if risky else PermissionDecisionKind.allow_once
        available = self._permissions.allow_for_session_enabled and scope is not None and not protected
        if not has_callback:
            if protected:
                code = ErrorCode.permission_denied
                first = protected[0]
                message = (
                    f"tool '{tool.name}' touches the protected path {first.path} ({first.why}); it always "
                    "needs an explicit permission answer and no permission callback is configured"
                )
            elif facts.outside_write_roots:
                code = ErrorCode.write_outside_allowed_roots
                message = (
                    f"tool '{tool.name}' targets a path outside the allowed write roots and no permission "
                    "callback is configured"
                )
            else:
                code = ErrorCode.permission_denied
                message = (
                    f"tool '{tool.name}' requires permission ({', '.join(reasons)}) and no permission "
                    "callback is configured"
                )
            return PolicyDecision(
                action="deny",
                reasons=tuple(reasons),
                suggested_decision=suggested,
                allow_for_session_available=available,
                target_scope=scope,
                deny_code=code,
                message=message,
            )
        return PolicyDecision(
            action="ask",
            reasons=tuple(reasons),
            suggested_decision=suggested,
            allow_for_session_available=available,
            target_scope=scope,
        )
