"""The ``config.toml`` schema (config.md §6). Attribute names equal TOML keys; unknown keys are errors.

Path-valued keys hold absolute :class:`~pathlib.Path` values after placeholder expansion, which the
loader performs before validation (``${SOONG_AGENT_HOME}``, ``<project>``, leading ``~``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agent_core.config.model import ModelProfile, ModelSection
from agent_core.types.base import StrictModel

PROFILE_NAME = re.compile(r"^[A-Za-z0-9_]+$")
DEFAULT_SENSITIVE_PATHS = [
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.config/gcloud",
    "*.pem",
    "*.key",
    ".env",
    ".env.*",
]

MemoryCategory = Literal["user", "feedback", "reference"]
MEMORY_CATEGORIES: tuple[MemoryCategory, ...] = ("user", "feedback", "reference")


def _absolute(value: Path, key: str) -> Path:
    if not value.is_absolute():
        raise ValueError(f"{key} must be an absolute path after placeholder expansion, got {str(value)!r}")
    return value


class RuntimeSection(StrictModel):
    cancel_timeout_ms: int = Field(default=10000, ge=1)
    max_turns: int = Field(default=50, ge=1)


class ContextSection(StrictModel):
    session_db_path: Path | None = None
    active_path_only: Literal[True] = True
    allow_branch_from: Literal["user_message"] = "user_message"
    branch_summary: Literal[False] = False
    reserve_output_tokens: int = Field(default=4096, ge=1)
    dynamic_system_budget: int = Field(default=12000, ge=1)
    non_system_budget: int | None = Field(default=None, ge=1)
    task_board_token_budget: int = Field(default=1200, ge=1)
    task_recent_changes_limit: int = Field(default=20, ge=1)
    task_recent_changes_window_minutes: int = Field(default=30, ge=1)

    @field_validator("session_db_path")
    @classmethod
    def _abs(cls, v: Path | None) -> Path | None:
        return None if v is None else _absolute(v, "context.session_db_path")


class CompactSection(StrictModel):
    enabled: bool = True
    reserve_tokens: int = Field(default=8000, ge=1)
    keep_recent_tokens: int = Field(default=16000, ge=1)
    auto_background: bool = True
    recovery_sync: bool = True
    model_profile: str | ModelProfile | None = None
    max_summary_tokens: int = Field(default=2048, ge=1)


class MemorySection(StrictModel):
    enabled: bool = True
    memory_dir: Path | None = None
    categories: list[MemoryCategory] = Field(default_factory=lambda: list(MEMORY_CATEGORIES), min_length=1)
    extract_every_messages: int = Field(default=32, ge=1)
    extract_every_tokens: int = Field(default=12000, ge=1)
    idle_seconds: int = Field(default=120, ge=1)
    catalog_max_tokens: int = Field(default=4000, ge=1)
    recall_top_k: int = Field(default=5, ge=1)
    memory_context_token_budget: int = Field(default=6000, ge=1)
    extract_model_profile: str | ModelProfile | None = None
    recall_model_profile: str | ModelProfile | None = None

    @field_validator("categories")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("memory.categories must not repeat a category")
        return v


class WorkerEntry(StrictModel):
    worker_id: str | None = None
    agent_definition_id: str
    allowed_tools: list[str] | None = None


class WorkerPool(StrictModel):
    pool_id: str
    workers: list[WorkerEntry] = Field(default_factory=list)


class AgentsSection(StrictModel):
    max_children_per_run: int = Field(default=4, ge=1)
    max_concurrent_children_per_session: int = Field(default=8, ge=1)
    default_sub_agent_definition: str = "default_sub_agent"
    default_fork_agent_definition: str = "default_fork_agent"
    default_child_timeout_ms: int = Field(default=600000, ge=1)
    child_cancel_timeout_ms: int = Field(default=30000, ge=1)
    worker_pools: list[WorkerPool] = Field(default_factory=list)

    @model_validator(mode="after")
    def _structural(self) -> AgentsSection:
        pool_ids: set[str] = set()
        for pool in self.worker_pools:
            if pool.pool_id in pool_ids:
                raise ValueError(f"duplicate worker pool_id {pool.pool_id!r}")
            pool_ids.add(pool.pool_id)
            explicit = [w.worker_id for w in pool.workers if w.worker_id is not None]
            if len(set(explicit)) != len(explicit):
                raise ValueError(f"duplicate worker_id in pool {pool.pool_id!r}")
            for index, worker in enumerate(pool.workers, start=1):
                if worker.worker_id is None:
                    generated = generated_worker_id(pool.pool_id, index, worker.agent_definition_id)
                    if generated in explicit:
                        raise ValueError(
                            f"generated worker id {generated!r} collides with an explicit worker_id in pool "
                            f"{pool.pool_id!r}"
                        )
        return self


def generated_worker_id(pool_id: str, position: int, agent_definition_id: str) -> str:
    """Stable id for a worker entry without ``worker_id`` (multi-agent.md §9.2)."""
    return f"{pool_id}_w{position}_{agent_definition_id}"


class PlanSection(StrictModel):
    default_dir: Path | None = None
    template_name: str = "default"

    @field_validator("default_dir")
    @classmethod
    def _abs(cls, v: Path | None) -> Path | None:
        return None if v is None else _absolute(v, "plan.default_dir")


class TaskSection(StrictModel):
    wal_dir: Path | None = None
    step_lease_timeout_ms: int = Field(default=300000, ge=1)

    @field_validator("wal_dir")
    @classmethod
    def _abs(cls, v: Path | None) -> Path | None:
        return None if v is None else _absolute(v, "task.wal_dir")


class NetworkPolicy(StrictModel):
    default: Literal["allow", "confirm", "deny"] = "confirm"
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)


class PermissionsSection(StrictModel):
    readonly_default: Literal["allow", "confirm"] = "allow"
    write_without_callback: Literal["deny"] = "deny"
    remember_scope: Literal["session"] = "session"
    allow_for_session_enabled: bool = True
    network_policy: NetworkPolicy = Field(default_factory=NetworkPolicy)


class HooksSection(StrictModel):
    enabled: bool = True
    default_timeout_ms: int = Field(default=30000, ge=1)


class ToolOverride(StrictModel):
    permission: Literal["readonly", "write"] | None = None
    tags: list[str] | None = None


class ToolsNetwork(StrictModel):
    allowed_hosts: list[str] = Field(default_factory=list)
    allowed_domains: list[str] = Field(default_factory=list)


class ToolsMcp(StrictModel):
    disabled_servers: list[str] = Field(default_factory=list)
    disabled_tools: list[str] = Field(default_factory=list)
    tool_overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    discovery_cache_ttl_ms: int = Field(default=300000, ge=1)


class ToolsSection(StrictModel):
    declarative_enabled: bool = True
    disabled: list[str] = Field(default_factory=list)
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    allowed_write_roots: list[Path] = Field(default_factory=list)
    allow_tmp_write: bool = False
    default_timeout_ms: int = Field(default=120000, ge=1)
    max_timeout_ms: int = Field(default=600000, ge=1)
    env_allowlist: list[str] = Field(default_factory=lambda: ["PATH", "HOME", "TMPDIR"])
    stdout_limit_bytes: int = Field(default=65536, ge=1)
    stderr_limit_bytes: int = Field(default=65536, ge=1)
    result_limit_bytes: int = Field(default=65536, ge=1)
    result_limit_tokens: int = Field(default=8000, ge=1)
    sensitive_paths: list[str] = Field(default_factory=lambda: list(DEFAULT_SENSITIVE_PATHS))
    network: ToolsNetwork = Field(default_factory=ToolsNetwork)
    mcp: ToolsMcp = Field(default_factory=ToolsMcp)

    @field_validator("allowed_write_roots")
    @classmethod
    def _abs(cls, v: list[Path]) -> list[Path]:
        return [_absolute(p, "tools.allowed_write_roots entry") for p in v]

    @field_validator("overrides")
    @classmethod
    def _override_targets(cls, v: dict[str, ToolOverride]) -> dict[str, ToolOverride]:
        for name in v:
            if name.split(".", 1)[0] in {"code", "agent", "internal", "mcp"}:
                raise ValueError(
                    f"tools.overrides may not target built-in or MCP tool {name!r} "
                    "(use tools.mcp.tool_overrides for MCP tools)"
                )
        return v

    @model_validator(mode="after")
    def _timeouts(self) -> ToolsSection:
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError("tools.default_timeout_ms must be <= tools.max_timeout_ms")
        return self


class Settings(StrictModel):
    """The whole validated ``config.toml``."""

    runtime: RuntimeSection = Field(default_factory=RuntimeSection)
    model: ModelSection
    model_overrides: dict[str, ModelProfile] = Field(default_factory=dict)
    context: ContextSection = Field(default_factory=ContextSection)
    compact: CompactSection = Field(default_factory=CompactSection)
    memory: MemorySection = Field(default_factory=MemorySection)
    agents: AgentsSection = Field(default_factory=AgentsSection)
    plan: PlanSection = Field(default_factory=PlanSection)
    task: TaskSection = Field(default_factory=TaskSection)
    permissions: PermissionsSection = Field(default_factory=PermissionsSection)
    hooks: HooksSection = Field(default_factory=HooksSection)
    tools: ToolsSection = Field(default_factory=ToolsSection)

    @field_validator("model_overrides")
    @classmethod
    def _profile_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not PROFILE_NAME.match(name):
                raise ValueError(f"model_overrides profile name {name!r} must match {PROFILE_NAME.pattern}")
        return v

    @model_validator(mode="after")
    def _profile_refs(self) -> Settings:
        for key, ref in (
            ("compact.model_profile", self.compact.model_profile),
            ("memory.extract_model_profile", self.memory.extract_model_profile),
            ("memory.recall_model_profile", self.memory.recall_model_profile),
        ):
            if isinstance(ref, str) and ref not in self.model_overrides:
                raise ValueError(f"{key} names unknown profile {ref!r} (no [model_overrides.{ref}])")
        return self
