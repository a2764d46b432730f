"""The AgentDefinition registry (docs/multi-agent.md#agent-definitions): sources, validation, overrides,
catalog, inspect.

Sources: ``builtin`` (the packaged ``assets/agents/*.md``, same frontmatter format as user files),
``user`` (``${SOONG_AGENT_HOME}/agents/*.md``, non-recursive, filename order; no project directory is ever
read) and ``code`` (``runtime.register_agent_definition``). Contracts:

* Every definition is checked when it loads: id ``^[a-z0-9][a-z0-9_-]{0,63}$``; non-empty ``name`` and
  ``description``; at most 32 tags of 1-64 characters; ``overrides`` of the form ``<source>:<id>``;
  ``suggested_tools`` naming registered tools (or core built-ins, or ``mcp.<server>.<tool>`` of a server in
  the MCP catalog); a string ``model_profile`` naming an existing ``[model_overrides]`` table and an inline
  profile that resolves. Failures raise ``invalid_agent_definition``; unknown frontmatter keys too.
* Override resolution per id (docs/multi-agent.md#overrides): one candidate per source (else
  ``duplicate_agent_definition``); the lowest-ranked candidate declares no ``overrides``; each higher one
  names exactly the next-lower candidate (missing → ``duplicate_agent_definition``, wrong source/id →
  ``invalid_agent_override``). The internal ``default_compact_agent`` can never be re-declared or targeted
  (``invalid_agent_override``).
* Building fails startup with the first error; :meth:`AgentDefinitionRegistry.register` validates
  immediately and leaves the registry unchanged on failure. When only the packaged definitions exist
  they are parsed on the first lookup (their ids, all the open-time checks need, are known statically). ``agents.default_sub_agent_definition`` and
  ``agents.default_fork_agent_definition`` must name an existing public definition (``config_error``).
* A definition's instructions are its body; an empty body falls back to the packaged
  ``agent.default_sub_agent`` body (never an overridden definition's body).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

from pydantic import ValidationError

from agent_core._asset_loader import BUILTIN_AGENT_ASSETS, Asset, AssetLoader
from agent_core._frontmatter import split_frontmatter
from agent_core.config._profiles import ProfileError, resolve_model
from agent_core.config.loader import LoadedConfig
from agent_core.config.model import ModelProfile, ResolvedModelConfig
from agent_core.config.schema import Settings
from agent_core.errors import (
    AgentCoreError,
    AgentDefinitionError,
    ConfigError,
    ErrorCode,
    InternalError,
    InvalidArgumentError,
)
from agent_core.tools._effective import (
    ROLE_MATRIX,
    UnavailableReason,
    apply_overrides,
    disabled_by_config,
    removed_by_network_policy,
    role_permits,
)
from agent_core.types.enums import AgentRole
from agent_core.types.model import SystemBlock
from agent_core.types.runtime import AgentDefinition
from agent_core.types.tools import ToolDefinition

Source = Literal["builtin", "user", "code"]
SOURCE_RANK: dict[str, int] = {"builtin": 0, "user": 1, "code": 2}
INTERNAL_DEFINITIONS = frozenset({"default_compact_agent"})
DEFAULT_SUB_AGENT_ASSET = "agent.default_sub_agent"
DEFINITION_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
OVERRIDES = re.compile(r"^(builtin|user|code):(.*)$")
FRONTMATTER_KEYS = frozenset(
    {"id", "name", "description", "model_profile", "suggested_tools", "tags", "overrides", "metadata"}
)
MAX_TAGS = 32
MAX_TAG_LENGTH = 64
CORE_TOOL_NAMES = frozenset(ROLE_MATRIX)
"""Canonical names of the core inventory (docs/tools.md#built-in-tools); always valid ``suggested_tools``
entries."""
DEFINITION_BLOCK_PRIORITY = 100


def invalid(message: str, **details: Any) -> AgentCoreError:
    return AgentDefinitionError(ErrorCode.invalid_agent_definition, message, details=details)


def _override_error(message: str, **details: Any) -> AgentCoreError:
    return AgentDefinitionError(ErrorCode.invalid_agent_override, message, details=details)


@dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """One definition from one source; ``origin`` is its file path, ``"code"`` or the asset resource."""

    definition: AgentDefinition
    origin: str
    asset: Asset | None = None

    @property
    def source(self) -> str:
        return self.definition.source

    @property
    def where(self) -> str:
        return f"agent definition {self.definition.agent_definition_id!r} ({self.source}: {self.origin})"


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedDefinition:
    """The effective (highest-ranked) definition of one id and its override chain, lowest rank first."""

    chain: tuple[Candidate, ...]

    @property
    def winner(self) -> Candidate:
        return self.chain[-1]

    @property
    def definition(self) -> AgentDefinition:
        return self.chain[-1].definition


# ---------------------------------------------------------------------------------------------------
# Parsing and structural checks (pure)


def definition_from_mapping(
    data: Mapping[str, Any], body: str, *, source: Source, where: str
) -> AgentDefinition:
    """Builds a definition from frontmatter ``data`` and a Markdown ``body`` (``invalid_agent_definition``)."""
    unknown = sorted(set(data) - FRONTMATTER_KEYS)
    if unknown:
        raise invalid(f"{where}: unknown frontmatter key(s) {', '.join(unknown)}", unknown_keys=unknown)
    for key in ("id", "name", "description"):
        value = data.get(key)
        if not isinstance(value, str) or not value.strip():
            raise invalid(f"{where}: frontmatter {key!r} is required and must be a non-empty string", key=key)
    fields: dict[str, Any] = {
        "agent_definition_id": data["id"],
        "name": data["name"],
        "description": data["description"],
        "body": body.strip(),
        "source": source,
    }
    for key in ("model_profile", "suggested_tools", "tags", "overrides", "metadata"):
        if key in data and data[key] is not None:
            fields[key] = data[key]
    try:
        definition = AgentDefinition.model_validate(fields, strict=True)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise invalid(f"{where}: invalid {loc or 'definition'}: {first.get('msg')}") from exc
    check_structure(definition, where=where)
    return definition


def parse_definition_text(text: str, *, source: Source, where: str) -> AgentDefinition:
    """Parses a definition file (YAML frontmatter + Markdown body)."""
    front = split_frontmatter(text)
    if not front.present or front.error:
        raise invalid(f"{where}: the file must start with a YAML frontmatter mapping between '---' lines")
    return definition_from_mapping(front.data, front.body, source=source, where=where)


def parse_overrides(value: str) -> tuple[str, str]:
    match = OVERRIDES.fullmatch(value)
    if match is None:
        raise invalid(f"malformed overrides {value!r}: expected '<builtin|user|code>:<agent_definition_id>'")
    return match.group(1), match.group(2)


def check_structure(definition: AgentDefinition, *, where: str) -> None:
    """Id, required texts, tags and the ``overrides`` format (no registry context needed)."""
    agent_id = definition.agent_definition_id
    if not DEFINITION_ID.fullmatch(agent_id):
        raise invalid(
            f"{where}: agent_definition_id {agent_id!r} must match {DEFINITION_ID.pattern}", id=agent_id
        )
    for key in ("name", "description"):
        if not getattr(definition, key).strip():
            raise invalid(f"{where}: {key} must not be empty")
    if len(definition.tags) > MAX_TAGS:
        raise invalid(f"{where}: at most {MAX_TAGS} tags are allowed, got {len(definition.tags)}")
    for tag in definition.tags:
        if not isinstance(tag, str) or not tag or len(tag) > MAX_TAG_LENGTH:
            raise invalid(f"{where}: every tag must be a non-empty string of at most {MAX_TAG_LENGTH} chars")
    for name in definition.suggested_tools:
        if not isinstance(name, str) or not name:
            raise invalid(f"{where}: suggested_tools entries must be non-empty strings")
    if definition.overrides is not None:
        try:
            parse_overrides(definition.overrides)
        except AgentCoreError as exc:
            raise invalid(f"{where}: {exc.message}") from exc


def resolve_chain(agent_id: str, candidates: Sequence[Candidate]) -> ResolvedDefinition:
    """The override algorithm of docs/multi-agent.md#overrides steps 1-5 for one id."""
    by_source: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        by_source.setdefault(candidate.source, []).append(candidate)
    for source, group in by_source.items():
        if len(group) > 1:
            origins = ", ".join(c.origin for c in group)
            raise AgentDefinitionError(
                ErrorCode.duplicate_agent_definition,
                f"agent definition {agent_id!r} is defined more than once in source {source!r} ({origins})",
                details={"agent_definition_id": agent_id, "source": source},
            )
    ordered = sorted(candidates, key=lambda c: SOURCE_RANK[c.source])
    lowest = ordered[0]
    if lowest.definition.overrides is not None:
        raise _override_error(
            f"{lowest.where}: overrides {lowest.definition.overrides!r} names no existing definition",
            agent_definition_id=agent_id,
        )
    for lower, higher in pairwise(ordered):
        declared = higher.definition.overrides
        if declared is None:
            raise AgentDefinitionError(
                ErrorCode.duplicate_agent_definition,
                f"{higher.where}: id {agent_id!r} already exists as a {lower.source} definition "
                f"({lower.origin}); declare 'overrides: {lower.source}:{agent_id}' to replace it",
                details={"agent_definition_id": agent_id, "existing_source": lower.source},
            )
        source, target = parse_overrides(declared)
        if source != lower.source or target != agent_id:
            raise _override_error(
                f"{higher.where}: overrides {declared!r} must name the next-lower definition "
                f"'{lower.source}:{agent_id}'",
                agent_definition_id=agent_id,
            )
    return ResolvedDefinition(chain=tuple(ordered))


# ---------------------------------------------------------------------------------------------------
# The registry


class AgentDefinitionRegistry:
    """All definitions of one runtime; :meth:`load` once at startup, :meth:`register` afterwards."""

    def __init__(
        self,
        *,
        assets: AssetLoader,
        config: LoadedConfig,
        tools: Callable[[], Iterable[ToolDefinition]],
        has_permission_callback: bool = False,
        mcp_server_ids: Callable[[], Collection[str]] | None = None,
    ) -> None:
        self._assets = assets
        self._config = config
        self._tools = tools
        self._has_callback = has_permission_callback
        self._mcp_server_ids = mcp_server_ids
        self._candidates: dict[str, list[Candidate]] = {}
        self._resolved: dict[str, ResolvedDefinition] = {}
        self._builtins_pending = False

    @property
    def settings(self) -> Settings:
        return self._config.settings

    # ---- loading ------------------------------------------------------------------------------
    def load(self, code_definitions: Sequence[AgentDefinition] = ()) -> None:
        """Builds the registry from builtins, user files and ``code_definitions``; raises on any error.

        With no user files and no code definitions, only the packaged definitions exist: their ids are
        known without parsing them, so the config defaults are checked now and the files are parsed on
        the first lookup (cold start: no YAML at open).
        """
        user = self._user_candidates()
        code = [self._code_candidate(d) for d in code_definitions]
        if not user and not code:
            self._check_config_defaults(BUILTIN_AGENT_ASSETS)
            self._builtins_pending = True
            return
        self._build([*self._builtin_candidates(), *user, *code])

    def _loaded(self) -> dict[str, ResolvedDefinition]:
        """The resolved definitions, parsing the packaged ones first if :meth:`load` deferred them."""
        if self._builtins_pending:
            self._build(self._builtin_candidates())
            self._builtins_pending = False
        return self._resolved

    def _build(self, candidates: Sequence[Candidate]) -> None:
        grouped: dict[str, list[Candidate]] = {}
        for candidate in candidates:
            if candidate.source != "builtin":
                self._check_candidate(candidate)
            grouped.setdefault(candidate.definition.agent_definition_id, []).append(candidate)
        resolved = {agent_id: resolve_chain(agent_id, grouped[agent_id]) for agent_id in sorted(grouped)}
        self._check_config_defaults(resolved)
        self._candidates = grouped
        self._resolved = resolved

    def _builtin_candidates(self) -> list[Candidate]:
        out: list[Candidate] = []
        for agent_id, asset_id in BUILTIN_AGENT_ASSETS.items():
            asset = self._assets.load(asset_id)
            try:
                definition = parse_definition_text(asset.text, source="builtin", where=asset.resource)
            except AgentCoreError as exc:
                raise InternalError(
                    ErrorCode.internal_error, f"broken built-in agent asset: {exc.message}", cause=exc
                ) from exc
            if definition.agent_definition_id != agent_id or not definition.body.startswith("# "):
                raise InternalError(
                    ErrorCode.internal_error,
                    f"built-in agent asset {asset.resource} must declare id {agent_id!r} and a '# ' title",
                )
            out.append(Candidate(definition=definition, origin=asset.resource, asset=asset))
        return out

    def _user_candidates(self) -> list[Candidate]:
        directory = self._config.home / "agents"
        if not directory.is_dir():
            return []
        out: list[Candidate] = []
        for path in sorted(p for p in directory.iterdir() if p.suffix == ".md" and p.is_file()):
            where = str(path)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise invalid(f"{where}: cannot read agent definition file: {type(exc).__name__}") from exc
            definition = parse_definition_text(text, source="user", where=where)
            out.append(Candidate(definition=definition, origin=where))
        return out

    @staticmethod
    def _code_candidate(definition: AgentDefinition) -> Candidate:
        if not isinstance(definition, AgentDefinition):
            raise invalid("register_agent_definition expects an AgentDefinition")
        definition = definition.model_copy(update={"source": "code"})
        check_structure(definition, where=f"code agent definition {definition.agent_definition_id!r}")
        return Candidate(definition=definition, origin="code")

    def register(self, definition: AgentDefinition) -> None:
        """Adds a code definition (``source`` forced to ``code``); validated now, atomic on failure."""
        candidate = self._code_candidate(definition)
        self._check_candidate(candidate)
        resolved_all = self._loaded()
        agent_id = candidate.definition.agent_definition_id
        group = [*self._candidates.get(agent_id, []), candidate]
        resolved = resolve_chain(agent_id, group)
        self._candidates[agent_id] = group
        resolved_all[agent_id] = resolved

    def _check_candidate(self, candidate: Candidate) -> None:
        definition = candidate.definition
        agent_id = definition.agent_definition_id
        if agent_id in INTERNAL_DEFINITIONS:
            raise _override_error(
                f"{candidate.where}: the internal definition {agent_id!r} cannot be re-declared or overridden",
                agent_definition_id=agent_id,
            )
        if definition.overrides is not None:
            _source, target = parse_overrides(definition.overrides)
            if target in INTERNAL_DEFINITIONS:
                raise _override_error(
                    f"{candidate.where}: the internal definition {target!r} cannot be overridden",
                    agent_definition_id=agent_id,
                )
        self._check_suggested_tools(candidate)
        self._check_model_profile(candidate)

    def _check_suggested_tools(self, candidate: Candidate) -> None:
        registered = {d.name for d in self._tools()}
        servers: Collection[str] | None = None
        for name in candidate.definition.suggested_tools:
            if name.startswith("mcp."):
                parts = name.split(".")
                if servers is None:
                    servers = set(self._mcp_server_ids()) if self._mcp_server_ids else set()
                if len(parts) >= 3 and parts[1] in servers:
                    continue
                raise invalid(f"{candidate.where}: suggested tool {name!r} names no configured MCP server")
            if name not in registered and name not in CORE_TOOL_NAMES:
                raise invalid(
                    f"{candidate.where}: suggested tool {name!r} is not a registered tool", tool=name
                )

    def _check_model_profile(self, candidate: Candidate) -> None:
        profile = candidate.definition.model_profile
        if profile is None:
            return
        try:
            resolve_model(self._config, purpose="sub", profile=profile, source_key=candidate.where)
        except ProfileError as exc:
            raise invalid(f"{candidate.where}: invalid model_profile: {exc.message}") from exc

    def _check_config_defaults(self, resolved: Collection[str]) -> None:
        agents = self.settings.agents
        for key in ("default_sub_agent_definition", "default_fork_agent_definition"):
            name = getattr(agents, key)
            if name not in resolved or name in INTERNAL_DEFINITIONS:
                raise ConfigError(
                    ErrorCode.config_error,
                    f"{self._config.config_path}: agents.{key} = {name!r} names no usable agent definition",
                    details={"key": f"agents.{key}", "value": name},
                )

    # ---- lookup -------------------------------------------------------------------------------
    def get(self, agent_definition_id: str) -> AgentDefinition | None:
        """The effective definition (internal ones included), or ``None``."""
        entry = self._loaded().get(agent_definition_id)
        return entry.definition if entry is not None else None

    def resolved(self, agent_definition_id: str) -> ResolvedDefinition | None:
        return self._loaded().get(agent_definition_id)

    def public_ids(self) -> list[str]:
        return sorted(i for i in self._loaded() if i not in INTERNAL_DEFINITIONS)

    def for_child(self, agent_definition_id: str) -> AgentDefinition:
        """A definition an agent tool may use: unknown or internal ids → ``validation_error``."""
        entry = self._loaded().get(agent_definition_id)
        if entry is None or agent_definition_id in INTERNAL_DEFINITIONS:
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"unknown agent_definition_id {agent_definition_id!r}",
                details={"agent_definition_id": agent_definition_id},
            )
        return entry.definition

    # ---- prompt and model ---------------------------------------------------------------------
    def instructions(self, definition: AgentDefinition) -> tuple[str, dict[str, Any]]:
        """The child's instructions and block metadata; an empty body uses ``agent.default_sub_agent``."""
        meta: dict[str, Any] = {
            "agent_definition_id": definition.agent_definition_id,
            "definition_source": definition.source,
        }
        if definition.body.strip():
            entry = self._loaded().get(definition.agent_definition_id)
            asset = entry.winner.asset if entry and entry.definition is definition else None
            if asset is not None:
                meta.update(asset.template_metadata)
            meta["body_origin"] = "own"
            return definition.body, meta
        fallback = self._assets.load(DEFAULT_SUB_AGENT_ASSET)
        body = split_frontmatter(fallback.text).body.strip()
        meta.update(fallback.template_metadata)
        meta["body_origin"] = "default_fallback"
        return body, meta

    def definition_block(self, definition: AgentDefinition) -> SystemBlock:
        """The ``agent_definition:<id>`` dynamic block (priority 100; never the description)."""
        body, meta = self.instructions(definition)
        return SystemBlock(
            block_id=f"agent_definition:{definition.agent_definition_id}",
            source="agent_definition",
            content=body,
            priority=DEFINITION_BLOCK_PRIORITY,
            dynamic=True,
            metadata=meta,
        )

    def resolve_model(
        self,
        definition: AgentDefinition,
        *,
        purpose: str,
        policy: ModelProfile | dict[str, Any] | None = None,
    ) -> ResolvedModelConfig:
        """``[model]`` → ``definition.model_profile`` → runtime ``policy`` overlay (policy wins)."""
        try:
            model = resolve_model(
                self._config,
                purpose=purpose,
                profile=definition.model_profile,
                source_key=f"agent definition {definition.agent_definition_id}: model_profile",
            )
        except ProfileError as exc:
            raise invalid(f"agent definition {definition.agent_definition_id!r}: {exc.message}") from exc
        if policy is None:
            return model
        partial = policy if isinstance(policy, ModelProfile) else ModelProfile.model_validate(policy)
        data = model.model_dump()
        for key, value in partial.model_dump(exclude_unset=True).items():
            if key == "retry":
                if value:
                    data["retry"] = {**data["retry"], **{k: v for k, v in value.items() if v is not None}}
            else:
                data[key] = value
        data["source"] = f"{model.source} + runtime policy"
        return ResolvedModelConfig.model_validate(data)

    # ---- catalog ------------------------------------------------------------------------------
    def tool_availability(
        self, name: str, role: AgentRole, *, ceiling: Collection[str] | None = None
    ) -> tuple[UnavailableReason | None, str]:
        """``(reason, detail)`` for one suggested tool under ``role``; ``reason`` is ``None`` if available.

        Order when several apply: disabled_by_config, mode_restricted, policy_restricted (worker ceiling,
        missing MCP/core tool), permission_denied (network deny, write tool without a callback).
        """
        settings = self.settings
        definition = next((d for d in self._tools() if d.name == name), None)
        if definition is not None:
            definition = apply_overrides(definition, settings)
        probe = definition or ToolDefinition(
            name=name, description="", input_schema={"type": "object"}, permission="readonly"
        )
        if disabled_by_config(probe, settings):
            return "disabled_by_config", "listed in tools.disabled or disabled by MCP/memory config"
        if not role_permits(name, role):
            return "mode_restricted", f"not permitted for agent role {role.value!r}"
        if ceiling is not None and name not in ceiling:
            return "policy_restricted", "outside the worker entry's allowed_tools ceiling"
        if definition is None:
            return "policy_restricted", "not registered or not discovered in this runtime"
        if removed_by_network_policy(definition, settings):
            return "permission_denied", "network-tagged tool with network_policy.default = deny"
        if definition.permission == "write" and not self._has_callback:
            return (
                "permission_denied",
                "write tool without a permission callback (write_without_callback=deny)",
            )
        return None, "available"

    def suggested_tools_view(
        self, definition: AgentDefinition, role: AgentRole, *, ceiling: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name in definition.suggested_tools:
            reason, _detail = self.tool_availability(name, role, ceiling=ceiling)
            item: dict[str, Any] = {"name": name, "available": reason is None}
            if reason is not None:
                item["unavailable_reason"] = reason
            out.append(item)
        return out

    def catalog(self, role: AgentRole = AgentRole.sub) -> list[dict[str, Any]]:
        """``agent.list_agent_definitions`` entries (public ids, sorted); availability as ``role``."""
        entries = []
        for agent_id in self.public_ids():
            definition = self._loaded()[agent_id].definition
            entries.append(
                {
                    "agent_definition_id": agent_id,
                    "name": definition.name,
                    "description": definition.description,
                    "source": definition.source,
                    "suggested_tools": self.suggested_tools_view(definition, role),
                    "tags": list(definition.tags),
                }
            )
        return entries

    def inspect(self) -> dict[str, Any]:
        """Debug view of every id (internal included): source, override chain, tool details, body origin."""
        out: dict[str, Any] = {}
        resolved = self._loaded()
        for agent_id in sorted(resolved):
            entry = resolved[agent_id]
            definition = entry.definition
            tools = []
            for name in definition.suggested_tools:
                reason, detail = self.tool_availability(name, AgentRole.sub)
                tools.append({"name": name, "available": reason is None, "reason": reason, "detail": detail})
            out[agent_id] = {
                "source": definition.source,
                "internal": agent_id in INTERNAL_DEFINITIONS,
                "chain": [
                    {"source": c.source, "origin": c.origin, "overrides": c.definition.overrides}
                    for c in entry.chain
                ],
                "suggested_tools": tools,
                "body_origin": "own" if definition.body.strip() else "default_fallback",
                "model_profile": definition.model_profile,
            }
        return out
