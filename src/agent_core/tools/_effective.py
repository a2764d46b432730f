"""Effective tool sets (docs/tools.md#effective-tool-sets): the role matrix, the per-run algorithm and
``allowed_tools`` checks.

Everything here is pure. The role matrix (docs/tools.md#effective-tool-sets) is hard-coded: ``P`` =
role-permitted, ``D`` = default. Tools outside the core table that are not in the ``agent.``/``internal.``
namespaces (declarative, Python-registered and ``mcp.*`` tools, user ``code.*`` tools) follow the "extension"
row; unknown names in the ``agent.``/``internal.`` namespaces are never permitted. The child blacklist follows
from the matrix: sub, fork, worker and compact rows never contain the blacklisted tools.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agent_core.config.schema import Settings
from agent_core.errors import ErrorCode, InvalidArgumentError
from agent_core.types.enums import AgentRole
from agent_core.types.tools import ToolDefinition

Level = Literal["D", "P"]
UnavailableReason = Literal["disabled_by_config", "permission_denied", "mode_restricted", "policy_restricted"]

_M, _O, _S, _F, _W = (AgentRole.main, AgentRole.orchestrator, AgentRole.sub, AgentRole.fork, AgentRole.worker)

CODE_READ_TOOLS = frozenset({"code.read_file", "code.list_dir", "code.search"})
CODE_WRITE_TOOLS = frozenset({"code.write_file", "code.edit_file", "code.run_command"})
WORKER_STEP_TOOLS = frozenset(
    {"agent.task_get", "agent.task_query_steps", "agent.task_claim_step", "agent.task_update_step"}
)
TASK_MUTATORS = frozenset(
    {"agent.task_create", "agent.task_update", "agent.task_complete", "agent.task_fail", "agent.task_cancel"}
)
"""Task content/DAG-modifying tools: a worker calling one gets ``permission_denied``
(docs/tools.md#effective-tool-sets)."""

_ORCH_TASK_TOOLS = ("agent.task_template", "agent.task_list", *sorted(TASK_MUTATORS))


def _row(**levels: Level) -> dict[AgentRole, Level]:
    return {AgentRole(role): level for role, level in levels.items()}


ROLE_MATRIX: dict[str, dict[AgentRole, Level]] = {
    **{n: _row(main="D", orchestrator="D", sub="D", fork="D", worker="D") for n in CODE_READ_TOOLS},
    **{n: _row(main="D", orchestrator="D", sub="D", fork="D", worker="P") for n in CODE_WRITE_TOOLS},
    # an orchestrator plans and dispatches (its sub-agents and workers fetch); its context stays for the board
    "code.web_fetch": _row(main="D", orchestrator="P", sub="D", fork="D", worker="D"),
    "internal.load_skill": _row(main="D", orchestrator="D", sub="D", fork="D", worker="P"),
    # background jobs (docs/jobs-and-schedules.md#background-jobs): whoever may run commands may watch and
    # cancel them
    **{
        n: _row(main="D", orchestrator="D", sub="D", fork="D", worker="P")
        for n in ("internal.job_status", "internal.job_cancel")
    },
    "internal.recall_memory": _row(main="D", orchestrator="D"),
    "internal.ask_user": _row(main="D", orchestrator="D", sub="P", fork="P"),
    "agent.list_agent_definitions": _row(main="D", orchestrator="D"),
    "agent.create_sub_agent": _row(main="D", orchestrator="D"),
    "agent.fork_agent": _row(main="D"),
    "agent.list_workers": _row(orchestrator="D"),
    "agent.dispatch_worker": _row(orchestrator="D"),
    "agent.plan_template": _row(main="D", orchestrator="D"),
    **{n: _row(orchestrator="D") for n in _ORCH_TASK_TOOLS},
    **{
        n: _row(orchestrator="D", worker="D")
        for n in ("agent.task_get", "agent.task_query_steps", "agent.task_update_step")
    },
    "agent.task_claim_step": _row(worker="D"),
    **{  # teams (docs/teams.md): a lead and its teammates (root agents); registered only when teams are on
        n: _row(main="D", orchestrator="D")
        for n in (
            "agent.team_spawn",
            "agent.team_send",
            "agent.team_request",
            "agent.team_respond",
            "agent.team_list",
        )
    },
}
"""docs/tools.md#effective-tool-sets rows of the core tools."""

EXTENSION_ROW: dict[AgentRole, Level] = _row(main="D", orchestrator="D", sub="D", fork="D", worker="P")
"""Declarative, Python-registered and MCP tools."""


def role_level(name: str, role: AgentRole) -> Level | None:
    """``"D"``, ``"P"`` or ``None`` (never) for ``name`` under ``role``."""
    row = ROLE_MATRIX.get(name)
    if row is None:
        if name.startswith(("agent.", "internal.")):
            return None
        row = EXTENSION_ROW
    return row.get(role)


def role_permits(name: str, role: AgentRole) -> bool:
    return role_level(name, role) is not None


def role_default(name: str, role: AgentRole) -> bool:
    return role_level(name, role) == "D"


# ---------------------------------------------------------------------------------------------------
# Config and policy filters


def _mcp_server(definition: ToolDefinition) -> str | None:
    if not definition.name.startswith("mcp."):
        return None
    server = definition.metadata.get("mcp_server_id")
    if isinstance(server, str) and server:
        return server
    parts = definition.name.split(".")
    return parts[1] if len(parts) > 2 else None


def matches_disabled(name: str, patterns: Iterable[str]) -> bool:
    """Exact canonical names or ``<prefix>.*`` namespace patterns (config ``tools.disabled``)."""
    for pattern in patterns:
        if pattern == name:
            return True
        if pattern.endswith(".*") and len(pattern) > 2 and name.startswith(pattern[:-1]):
            return True
    return False


def disabled_by_config(definition: ToolDefinition, settings: Settings) -> bool:
    """``tools.disabled``, MCP disabled servers/tools, declarative switch, ``memory.enabled``."""
    tools = settings.tools
    if matches_disabled(definition.name, tools.disabled):
        return True
    if definition.metadata.get("source") == "declarative" and not tools.declarative_enabled:
        return True
    server = _mcp_server(definition)
    if server is not None and (
        server in tools.mcp.disabled_servers or definition.name in tools.mcp.disabled_tools
    ):
        return True
    return definition.name == "internal.recall_memory" and not settings.memory.enabled


def removed_by_network_policy(definition: ToolDefinition, settings: Settings) -> bool:
    return settings.permissions.network_policy.default == "deny" and "network" in definition.tags


def apply_overrides(definition: ToolDefinition, settings: Settings) -> ToolDefinition:
    """Applies ``tools.overrides[name]`` (permission / full tag replace) to declarative and Python tools.

    Core and MCP tools are never affected (MCP overrides are applied at discovery). A declarative tool
    keeps its ``declarative`` tag.
    """
    override = settings.tools.overrides.get(definition.name)
    if override is None or definition.name.startswith(("code.", "agent.", "internal.", "mcp.")):
        return definition
    if definition.metadata.get("source") not in (None, "python", "declarative"):
        return definition
    update: dict[str, Any] = {}
    if override.permission is not None:
        update["permission"] = override.permission
    if override.tags is not None:
        tags = list(dict.fromkeys(override.tags))
        if definition.metadata.get("source") == "declarative" and "declarative" not in tags:
            tags.append("declarative")
        update["tags"] = tags
    return definition.model_copy(update=update) if update else definition


def unmatched_overrides(definitions: Iterable[ToolDefinition], settings: Settings) -> list[str]:
    """``tools.overrides`` keys naming no registered tool (the runtime logs a warning for each)."""
    registered = {d.name for d in definitions}
    return [name for name in settings.tools.overrides if name not in registered]


# ---------------------------------------------------------------------------------------------------
# The algorithm (docs/tools.md#effective-tool-sets)


@dataclass(frozen=True, slots=True)
class EffectiveTools:
    """The run's effective tool set; ``definitions`` (registration order, overrides applied) go to the
    provider, ``names`` to :class:`RunScope.effective_tools`."""

    names: frozenset[str]
    definitions: tuple[ToolDefinition, ...]

    def __contains__(self, name: object) -> bool:
        return name in self.names


def _unavailable_reason(
    definition: ToolDefinition, settings: Settings, role: AgentRole, failed_mcp_servers: Collection[str]
) -> UnavailableReason | None:
    if disabled_by_config(definition, settings):
        return "disabled_by_config"
    if removed_by_network_policy(definition, settings):
        return "permission_denied"
    if not role_permits(definition.name, role):
        return "mode_restricted"
    if _mcp_server(definition) in failed_mcp_servers:
        return "policy_restricted"
    return None


def compute_effective_tools(
    definitions: Iterable[ToolDefinition],
    settings: Settings,
    role: AgentRole,
    *,
    requested: Sequence[str] | None = None,
    worker_entry_tools: Sequence[str] | None = None,
    failed_mcp_servers: Collection[str] = (),
) -> EffectiveTools:
    """Steps 1–6 of docs/tools.md#effective-tool-sets. ``requested`` is the validated ``allowed_tools`` of the
    child (for workers: the dispatch list); ``worker_entry_tools`` is the worker entry's ``allowed_tools``
    ceiling."""
    defs = [apply_overrides(d, settings) for d in definitions]
    candidates = {
        d.name: d for d in defs if _unavailable_reason(d, settings, role, failed_mcp_servers) is None
    }
    all_names = [d.name for d in defs]
    wanted: set[str]
    if role == AgentRole.compact:
        wanted = set()
    elif role == AgentRole.worker:
        if worker_entry_tools is not None:
            ceiling = set(worker_entry_tools)
            base = set(worker_entry_tools)
        else:
            ceiling = {n for n in all_names if role_permits(n, role)}
            base = {n for n in all_names if role_default(n, role)}
        chosen = set(requested) if requested is not None else base
        wanted = (chosen & ceiling) | (WORKER_STEP_TOOLS & ceiling)
    elif requested is not None:
        wanted = set(requested)
    else:
        wanted = {n for n in all_names if role_default(n, role)}
    names = frozenset(n for n in wanted if n in candidates)
    return EffectiveTools(names=names, definitions=tuple(d for d in defs if d.name in names))


def adjust_effective(
    effective: EffectiveTools,
    definitions: Iterable[ToolDefinition],
    settings: Settings,
    *,
    remove: Collection[str] = (),
    add: Collection[str] = (),
) -> EffectiveTools:
    """``effective`` without ``remove`` and with the registered, not config-disabled tools of ``add`` (a
    teammate's root runs: no ``agent.team_spawn``; the Task step tools of a step it claimed)."""
    if not remove and not add:
        return effective
    defs = [apply_overrides(d, settings) for d in definitions]
    added = {d.name for d in defs if d.name in add and not disabled_by_config(d, settings)}
    names = frozenset((effective.names - set(remove)) | added)
    return EffectiveTools(names=names, definitions=tuple(d for d in defs if d.name in names))


class EffectiveToolsMemo:
    """The last :func:`compute_effective_tools` result of a root run, reused while its inputs are the very
    same objects (the registry's definitions, the settings object) with the same role and failed MCP
    servers: every turn of a session asks again (issue 16). A re-registered tool or reloaded config is a
    new object, so it recomputes."""

    __slots__ = ("_key", "_value")

    def __init__(self) -> None:
        self._key: tuple[tuple[ToolDefinition, ...], Settings, AgentRole, frozenset[str]] | None = None
        self._value: EffectiveTools | None = None

    def get(
        self,
        definitions: Sequence[ToolDefinition],
        settings: Settings,
        role: AgentRole,
        failed_mcp_servers: Collection[str] = (),
    ) -> EffectiveTools:
        failed = frozenset(failed_mcp_servers)
        key = self._key
        if (
            key is not None
            and self._value is not None
            and key[1] is settings
            and key[2] == role
            and key[3] == failed
            and len(key[0]) == len(definitions)
            and all(map(operator.is_, key[0], definitions))
        ):
            return self._value
        value = compute_effective_tools(definitions, settings, role, failed_mcp_servers=failed)
        self._key, self._value = (tuple(definitions), settings, role, failed), value
        return value


def validate_allowed_tools(
    allowed_tools: Sequence[str],
    definitions: Iterable[ToolDefinition],
    settings: Settings,
    role: AgentRole,
    *,
    worker_entry_tools: Sequence[str] | None = None,
    failed_mcp_servers: Collection[str] = (),
) -> list[str]:
    """Checks a child's ``allowed_tools`` (docs/tools.md#effective-tool-sets); returns the de-duplicated list.

    Raises ``validation_error`` with ``details.unavailable = [{tool, reason}]`` (reasons
    ``disabled_by_config``, ``permission_denied``, ``mode_restricted``, ``policy_restricted`` — the latter
    for a tool outside the worker's ceiling or of a failed MCP server) and ``details.unknown_tools`` for
    names that are not registered.
    """
    if isinstance(allowed_tools, str) or not all(isinstance(n, str) for n in allowed_tools):
        raise InvalidArgumentError(ErrorCode.validation_error, "allowed_tools must be a list of tool names")
    names = list(dict.fromkeys(allowed_tools))
    registered = {d.name: apply_overrides(d, settings) for d in definitions}
    unknown = [n for n in names if n not in registered]
    unavailable: list[dict[str, str]] = []
    for name in names:
        if name not in registered:
            continue
        reason = _unavailable_reason(registered[name], settings, role, failed_mcp_servers)
        outside_ceiling = worker_entry_tools is not None and name not in worker_entry_tools
        if reason is None and role == AgentRole.worker and outside_ceiling:
            reason = "policy_restricted"
        if reason is not None:
            unavailable.append({"tool": name, "reason": reason})
    if unknown or unavailable:
        parts = []
        if unknown:
            parts.append("unknown tool(s): " + ", ".join(unknown))
        if unavailable:
            parts.append(
                "unavailable tool(s): " + ", ".join(f"{u['tool']} ({u['reason']})" for u in unavailable)
            )
        raise InvalidArgumentError(
            ErrorCode.validation_error,
            "invalid allowed_tools: " + "; ".join(parts),
            details={"unavailable": unavailable, "unknown_tools": unknown},
        )
    return names
