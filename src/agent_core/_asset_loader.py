"""Asset loader: stable ``asset_id`` -> packaged prompt/template/agent resource
(docs/context.md#package-assets).

Prompt bodies, templates and built-in AgentDefinition bodies live as files under
``agent_core/assets/``; code refers to them only by ``asset_id`` (:data:`ASSET_PATHS`). Editing an
asset's text never requires a Python change.

Loading rules
-------------
* ``AssetLoader()`` reads the package data through :mod:`importlib.resources`;
  ``AssetLoader(root)`` reads a directory with the same layout (tests use a temp copy).
* :meth:`AssetLoader.load` returns a frozen :class:`Asset` (``asset_id``, ``text``, ``version``,
  ``resource``); ``version`` is the first 12 hex chars of the SHA-256 of the file bytes and is what
  callers record as ``metadata.template_version`` next to ``metadata.template_id = asset_id``
  (:attr:`Asset.template_metadata`). Results are cached per loader instance.
* Unknown ids and missing, empty (whitespace-only) or non-UTF-8 files raise
  ``AgentCoreError(internal_error)``; :meth:`AssetLoader.verify_all` checks all 16 required assets
  at runtime startup and names every broken one. :meth:`AssetLoader.template` resolves the config
  key ``plan.template_name`` to ``template.plan.<name>`` and raises ``ConfigError(config_error)``
  when that template does not exist. Plan templates beyond ``default`` follow the convention
  ``templates/plan_<name>.md`` (``<name>`` matching ``[a-z0-9_]+``).
* Templates contain no placeholders. ``agent.plan_template`` / ``agent.task_template`` send the
  template text unchanged and add the goal, suggested directory and constraints themselves.

Static system blocks
--------------------
:data:`STATIC_SYSTEM_BLOCKS` is the single code copy of docs/context.md#static-blocks: the ten static blocks
in emission order with ``block_id``, ``priority``, ``source`` and, for the seven package prompts, the
``asset_id`` whose text is the block content (``None`` = generated from run data by the composer).

Output contracts the packaged prompts ask models for
---------------------------------------------------
Parsers elsewhere rely on these shapes; the prompts state them to the model verbatim.

Child result (``agent.default_{sub,fork,worker}_agent``; docs/multi-agent.md#child-results): the final
assistant message ends with one fenced ``json`` block (the last such block counts; a message that is only a
JSON object also counts) holding ``{"status": "completed" | "failed", "summary": str,
"findings": list[str | dict], "proposed_actions": list[str | dict], "artifacts":
[{"artifact_id": str, "summary": str?}]}``. When the parent passed ``expected_output_schema`` the
object must follow that schema instead. Children never report ``cancelled``; core sets it.

Compaction payload (``agent.default_compact_agent``; docs/compaction.md#the-compact-fork,
docs/compaction.md#the-payload): the whole answer is one JSON object (a single fenced ``json`` block is
tolerated) ``{"summary": str, "first_kept_node_id": str, "tokens_before": int, "details": dict}``. ``summary``
is Markdown with the docs/compaction.md#the-compact-fork headings in order, ``(none)`` under empty ones, plus
``## Split Turn Prefix`` only for split turns.

Memory extraction (``memory.extraction``; docs/context.md#extraction): a tool loop of at most 8 turns
with the job-only tools ``memory_writer.read_memory {"memory_id": str}`` and
``memory_writer.submit``, which ends the job. ``submit`` arguments, all four keys required::

    operations:          list of
        {"op": "create", "category": "user" | "feedback" | "reference", "name": slug,
         "summary": str, "tags": [str], "body": str, "source_node_ids": [str], "evidence": {str: str}?}
        {"op": "update", "memory_id": str, "summary": str, "tags": [str], "body": str,
         "source_node_ids": [str], "evidence": {str: str}?}       # no category / name on update
    ignored_candidates:  [{"description": str, "reason": str, "source_node_ids": [str]}]
    duplicate_decisions: [{"description": str, "memory_id": str, "source_node_ids": [str]}]
    conflicts:           [{"memory_id": str, "description": str, "source_node_ids": [str]}]

``name`` matches ``^[a-z0-9]+(-[a-z0-9]+)*$`` (<= 64); ``summary`` one line <= 200 chars; ``tags``
<= 10 of <= 40 chars; ``body`` non-empty <= 16 KiB; ``evidence`` only on ``reference`` memories.
A conflict is resolved by an ``update`` (overwrite) and also listed in ``conflicts``. The job's
user message is expected to carry the tagged sections ``<allowed_categories>``,
``<memory_catalog>`` (``MEMORY.md``), ``<existing_memories>`` (all frontmatter), ``<conversation>``
(messages labelled with node id and role, new root user messages marked as candidates),
``<active_path_summary>`` and optionally ``<compaction_summary>``.

Recall selector (``memory.recall_selector``; docs/context.md#recall): no tools; the answer is exactly
``{"memory_ids": [str, ...]}`` in relevance order (``[]`` when nothing fits, at most ``<limit>``).
Its user message carries ``<recall_query>``, ``<user_request>``, ``<recent_context>``,
``<memory_catalog>``, ``<memory_frontmatter>`` and ``<limit>``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from agent_core.errors import AgentCoreError, ConfigError, ErrorCode, InternalError

ASSET_PATHS: dict[str, str] = {
    "system.core": "prompts/system/core.md",
    "system.tool_protocol": "prompts/system/tool_protocol.md",
    "system.todo": "prompts/system/todo.md",
    "system.permissions": "prompts/system/permissions.md",
    "system.multi_agent": "prompts/system/multi_agent.md",
    "system.memory": "prompts/system/memory.md",
    "system.compact": "prompts/system/compact.md",
    "template.config.default": "templates/config_default.toml",
    "template.plan.default": "templates/plan_default.md",
    "template.task_dag.default": "templates/task_dag_default.md",
    "agent.default_sub_agent": "agents/default_sub_agent.md",
    "agent.default_fork_agent": "agents/default_fork_agent.md",
    "agent.default_worker_agent": "agents/default_worker_agent.md",
    "agent.default_compact_agent": "agents/default_compact_agent.md",
    "memory.extraction": "prompts/memory/extraction.md",
    "memory.recall_selector": "prompts/memory/recall_selector.md",
}
"""The complete docs/context.md#package-assets mapping; every entry is a required asset."""

BUILTIN_AGENT_ASSETS: dict[str, str] = {
    "default_sub_agent": "agent.default_sub_agent",
    "default_fork_agent": "agent.default_fork_agent",
    "default_worker_agent": "agent.default_worker_agent",
    "default_compact_agent": "agent.default_compact_agent",
}
"""Built-in ``agent_definition_id`` -> asset id (file form of docs/multi-agent.md#agent-definitions, id ==
file stem)."""

PLAN_TEMPLATE_PREFIX = "template.plan."
TASK_TEMPLATE_ID = "template.task_dag.default"
CONFIG_TEMPLATE_ID = "template.config.default"
VERSION_LENGTH = 12

_PLAN_TEMPLATE_NAME = re.compile(r"^[a-z0-9_]{1,64}$")


def asset_version(data: bytes) -> str:
    """Template version of docs/context.md#package-assets: first 12 hex chars of SHA-256 of the asset
    bytes."""
    return hashlib.sha256(data).hexdigest()[:VERSION_LENGTH]


@dataclass(frozen=True, slots=True)
class Asset:
    """One loaded asset; ``resource`` is its path relative to the assets root."""

    asset_id: str
    text: str
    version: str
    resource: str

    @property
    def template_metadata(self) -> dict[str, str]:
        """``{"template_id", "template_version"}`` for node metadata and tool event payloads."""
        return {"template_id": self.asset_id, "template_version": self.version}


@dataclass(frozen=True, slots=True)
class StaticBlockSpec:
    """A static system block (docs/context.md#static-blocks); ``asset_id`` is ``None`` for generated
    blocks."""

    block_id: str
    priority: int
    source: str
    asset_id: str | None


STATIC_SYSTEM_BLOCKS: tuple[StaticBlockSpec, ...] = (
    StaticBlockSpec("system.core", 0, "core", "system.core"),
    StaticBlockSpec("system.tool_protocol", 10, "core", "system.tool_protocol"),
    StaticBlockSpec("system.todo", 20, "core", "system.todo"),
    StaticBlockSpec("system.permissions", 30, "core", "system.permissions"),
    StaticBlockSpec("system.multi_agent", 40, "core", "system.multi_agent"),
    StaticBlockSpec("system.memory", 50, "core", "system.memory"),
    StaticBlockSpec("system.compact", 60, "core", "system.compact"),
    StaticBlockSpec("runtime.role", 62, "core", None),
    StaticBlockSpec("runtime.tool_catalog", 64, "core", None),
    StaticBlockSpec("instruction_catalog", 70, "instruction_catalog", None),
)
"""All static blocks in emission order; every one has ``dynamic = false`` and is never trimmed."""

STATIC_SYSTEM_ASSETS: tuple[StaticBlockSpec, ...] = tuple(
    spec for spec in STATIC_SYSTEM_BLOCKS if spec.asset_id is not None
)
"""The asset-backed subset of :data:`STATIC_SYSTEM_BLOCKS` (the seven ``system.*`` prompts), in order."""


def _package_root() -> Traversable:
    return resources.files("agent_core").joinpath("assets")


def _resource_for(asset_id: str) -> str | None:
    known = ASSET_PATHS.get(asset_id)
    if known is not None:
        return known
    if asset_id.startswith(PLAN_TEMPLATE_PREFIX):
        name = asset_id[len(PLAN_TEMPLATE_PREFIX) :]
        if _PLAN_TEMPLATE_NAME.fullmatch(name):
            return f"templates/plan_{name}.md"
    return None


def _locate(root: Traversable, resource: str) -> Traversable:
    node = root
    for part in resource.split("/"):
        node = node.joinpath(part)
    return node


def packaged_location(asset_id: str) -> str:
    """Where the installed package keeps the built-in asset ``asset_id`` (a file path for a regular
    install), for messages that point a user at it, e.g. the commented config template
    (:data:`CONFIG_TEMPLATE_ID`). Unknown ids raise ``internal_error`` like :meth:`AssetLoader.load`."""
    resource = _resource_for(asset_id)
    if resource is None:
        raise InternalError(
            ErrorCode.internal_error,
            f"unknown built-in asset id {asset_id!r}",
            details={"asset_id": asset_id},
        )
    return str(_locate(_package_root(), resource))


class AssetLoader:
    """Loads assets by id from the package data (``root=None``) or from a directory copy."""

    def __init__(self, root: Path | None = None) -> None:
        self._root: Traversable = Path(root) if root is not None else _package_root()
        self._cache: dict[str, Asset] = {}

    @property
    def root(self) -> Traversable:
        return self._root

    def load(self, asset_id: str) -> Asset:
        """Returns the asset; unknown id, missing, empty or undecodable file -> ``internal_error``."""
        cached = self._cache.get(asset_id)
        if cached is not None:
            return cached
        resource = _resource_for(asset_id)
        if resource is None:
            raise InternalError(
                ErrorCode.internal_error,
                f"unknown built-in asset id {asset_id!r}",
                details={"asset_id": asset_id},
            )
        asset = self._read(asset_id, resource)
        self._cache[asset_id] = asset
        return asset

    def template(self, name: str, *, config_path: Path | None = None) -> Asset:
        """Plan template ``template.plan.<name>`` (config ``plan.template_name``).

        A template that does not exist raises ``ConfigError`` (``config_error``; the message and details
        name ``config_path`` when given, and the key); an existing but empty or unreadable one raises
        ``internal_error`` like any broken built-in asset.
        """
        asset_id = f"{PLAN_TEMPLATE_PREFIX}{name}"
        resource = _resource_for(asset_id)
        if resource is None or not self._exists(resource):
            where = f"invalid config file {config_path}: " if config_path is not None else ""
            details: dict[str, str] = {
                "template_name": name,
                "asset_id": asset_id,
                "key": "plan.template_name",
            }
            if config_path is not None:
                details["config_path"] = str(config_path)
            raise ConfigError(
                ErrorCode.config_error,
                f"{where}plan.template_name {name!r} names no built-in plan template ({asset_id!r})",
                details=details,
            )
        return self.load(asset_id)

    def verify_all(self) -> tuple[Asset, ...]:
        """Loads every required asset (startup check); names all missing or empty ones at once."""
        loaded: list[Asset] = []
        broken: list[str] = []
        for asset_id in ASSET_PATHS:
            try:
                loaded.append(self.load(asset_id))
            except AgentCoreError as exc:
                broken.append(
                    f"{asset_id} ({ASSET_PATHS[asset_id]}): {exc.details.get('problem', exc.message)}"
                )
        if broken:
            raise InternalError(
                ErrorCode.internal_error,
                "broken built-in package assets: " + "; ".join(broken),
                details={"assets": broken},
            )
        return tuple(loaded)

    def _exists(self, resource: str) -> bool:
        try:
            return _locate(self._root, resource).is_file()
        except OSError:
            return False

    def _read(self, asset_id: str, resource: str) -> Asset:
        def broken(problem: str, cause: BaseException | None = None) -> AgentCoreError:
            return InternalError(
                ErrorCode.internal_error,
                f"built-in asset {asset_id!r} ({resource}) is {problem}",
                details={"asset_id": asset_id, "resource": resource, "problem": problem},
                cause=cause,
            )

        node = _locate(self._root, resource)
        try:
            if not node.is_file():
                raise broken("missing")
            data = node.read_bytes()
        except OSError as exc:
            raise broken("unreadable", exc) from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise broken("not valid UTF-8", exc) from exc
        if not text.strip():
            raise broken("empty")
        return Asset(asset_id=asset_id, text=text, version=asset_version(data), resource=resource)
