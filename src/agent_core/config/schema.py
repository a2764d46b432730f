"""The ``config.toml`` schema (docs/configuration.md#keys). Attribute names equal TOML keys; unknown keys are
errors.

Path-valued keys (``context.session_db_path``, ``memory.memory_dir``, ``plan.default_dir``,
``task.wal_dir``, ``tools.allowed_write_roots[*]``) are expanded by :func:`expand_placeholders` (placeholders
and a leading ``~``) and ``tools.sensitive_paths`` entries get the two placeholders only (a leading ``~`` is
left to the sensitive-path matcher) when validation runs with a path context::

    Settings.model_validate(data, strict=True, context={"home": home, "project": project})

which is what :func:`agent_core.config.load_config` does; afterwards every path key is a concrete absolute
:class:`~pathlib.Path` (defaults filled) and ``memory.memory_dir`` is exactly ``<home>/memory``.
Without a context (direct construction in unit tests) values are taken literally, path keys must be
absolute, and omitted path keys keep their documented placeholder templates.
"""

# No `from __future__ import annotations`: pydantic would compile every field's annotation string when
# the models are created (issue 16, cold start); annotations naming a class defined later are quoted.

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_core.config.model import ModelProfile, ModelSection, section_default
from agent_core.errors import ConfigError, ErrorCode
from agent_core.types.base import StrictModel, empty_list
from agent_core.types.permissions import PermissionMode

PROFILE_NAME = re.compile(r"^[A-Za-z0-9_]+$")
POOL_OR_WORKER_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
TEMPLATE_NAME = re.compile(r"^[A-Za-z0-9_-]+$")
MCP_OVERRIDE_KEY = re.compile(r"^mcp\.[A-Za-z0-9_-]+\.(\*|[A-Za-z0-9_.-]+)$")
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
HOME_PLACEHOLDER = "${SOONG_AGENT_HOME}"
PROJECT_PLACEHOLDER = "<project>"
DEFAULT_SESSION_DB_PATH = HOME_PLACEHOLDER + "/sessions.sqlite"
DEFAULT_MEMORY_DIR = HOME_PLACEHOLDER + "/memory"
DEFAULT_PLAN_DIR = PROJECT_PLACEHOLDER + "/.soong-agent/plans"
DEFAULT_WAL_DIR = PROJECT_PLACEHOLDER + "/.soong-agent/tasks"
DEFAULT_TRACES_PATH = HOME_PLACEHOLDER + "/traces.jsonl"
_SHOULD = re.compile(r"^(Input|String|List|Value|Dictionary|Tuple|Set|Object) should ")
_PLACEHOLDER = re.compile(r"\$\{SOONG_AGENT_HOME\}|<project>")

MemoryCategory = Literal["user", "feedback", "reference"]
MEMORY_CATEGORIES: tuple[MemoryCategory, ...] = ("user", "feedback", "reference")


def expand_placeholders(value: str, home: Path, project: Path, *, expand_user: bool = True) -> str:
    """Expands ``${SOONG_AGENT_HOME}`` → ``home``, ``<project>`` → ``project`` and (unless ``expand_user`` is
    false) a leading ``~`` (alone or followed by ``/``) → the OS user's home (``HOME``). Nothing else is
    expanded: ``${HOME}``, ``$VAR`` and ``~name`` stay literal.

    Raises ``ConfigError(config_error)`` if ``~`` is used but the OS home cannot be determined.
    """
    if expand_user and (value == "~" or value.startswith("~/")):
        try:
            user_home = str(Path.home())
        except RuntimeError as exc:
            raise ConfigError(
                ErrorCode.config_error, f"cannot expand '~' in {value!r}: the OS home is unknown", cause=exc
            ) from exc
        value = user_home + value[1:]
    return _PLACEHOLDER.sub(lambda m: str(home) if m.group(0) == HOME_PLACEHOLDER else str(project), value)


def _path_context(info: ValidationInfo) -> tuple[Path, Path] | None:
    ctx = info.context
    if isinstance(ctx, dict) and isinstance(ctx.get("home"), Path) and isinstance(ctx.get("project"), Path):
        return ctx["home"], ctx["project"]
    return None


def _expand_path(value: Any, info: ValidationInfo) -> Any:
    if not isinstance(value, str | Path):
        return value  # wrong type: reported by the type check
    paths = _path_context(info)
    text = str(value)
    if paths is not None:
        text = expand_placeholders(text, *paths)
    return Path(text)


def _require_absolute(value: Path, info: ValidationInfo) -> Path:
    if _path_context(info) is None and _PLACEHOLDER.search(str(value)):
        return value  # unexpanded template of a directly constructed Settings
    if not value.is_absolute():
        raise ValueError(f"must be an absolute path after placeholder expansion, got {str(value)!r}")
    return value


def _expand_pattern(value: Any, info: ValidationInfo) -> Any:
    """Sensitive-path entries: placeholders only; a leading ``~`` is left to the matcher
    (docs/tools.md#sensitive-paths)."""
    paths = _path_context(info)
    if paths is None or not isinstance(value, str):
        return value
    return expand_placeholders(value, *paths, expand_user=False)


def _check_pattern(value: str) -> str:
    if value.startswith("~") and value != "~" and not value.startswith("~/"):
        raise ValueError(f"only a leading '~' or '~/' denotes the user's home, got {value!r}")
    return value


ConfigPath = Annotated[Path, BeforeValidator(_expand_path), AfterValidator(_require_absolute)]
"""A path-valued key: placeholders expanded (with a path context), must be absolute."""
SensitivePattern = Annotated[str, BeforeValidator(_expand_pattern), AfterValidator(_check_pattern)]


def _profile_tag(value: Any) -> str:
    return "inline" if isinstance(value, dict | ModelProfile) else "name"


ProfileRef = Annotated[
    Annotated[str, Tag("name")] | Annotated[ModelProfile, Tag("inline")],
    Discriminator(_profile_tag),
]
"""A ``model_profile`` value: a ``model_overrides`` name or an inline partial model table."""
PROFILE_REF_TAGS = frozenset({"name", "inline"})


class RuntimeSection(StrictModel):
    cancel_timeout_ms: int = Field(default=10000, ge=1)
    max_turns: int = Field(default=50, ge=1)
    """Legacy location of ``limits.max_turns`` (still accepted; ``[limits]`` wins when both are set)."""


class LimitsSection(StrictModel):
    """``[limits]`` (docs/runs.md#limits): one budget per root run, shared by its whole agent tree."""

    max_turns: int | None = Field(default=None, ge=1)
    max_total_tokens: int | None = Field(default=None, ge=1)
    max_tool_calls: int | None = Field(default=None, ge=1)
    max_wall_time_ms: int | None = Field(default=None, ge=1)
    max_cost_usd: float | None = Field(default=None, gt=0)
    repeat_tool_call_limit: int = Field(default=3, ge=2)


class TemporalSection(StrictModel):
    """``[engine.temporal]``: the Temporal service the ``temporal`` engine runs workflows on."""

    address: str = Field(default="127.0.0.1:7233", pattern=r"^[A-Za-z0-9_.\-\[\]:]+:[0-9]{1,5}$")
    namespace: str = Field(default="default", min_length=1)
    task_queue: str = Field(default="soong-agent", min_length=1)
    heartbeat_timeout_ms: int = Field(default=10000, ge=500)
    """A step whose worker has not heartbeated for this long is retried on another worker."""


class EngineSection(StrictModel):
    """``[engine]`` (docs/scale-out.md#3-what-a-workflow-does): where runs execute — ``local`` (this process)
    or ``temporal``."""

    kind: Literal["local", "temporal"] = "local"
    temporal: TemporalSection = Field(default_factory=section_default, validate_default=True)


class TelemetrySection(StrictModel):
    """``[telemetry]``: OpenTelemetry GenAI spans built from the event bus (needs the ``otel`` extra)."""

    enabled: bool = False
    exporter: Literal["otlp", "jsonl"] = "otlp"
    endpoint: str = Field(default="http://127.0.0.1:4318", pattern=r"^https?://")
    path: ConfigPath = Field(default=Path(DEFAULT_TRACES_PATH), validate_default=True)
    capture_content: bool = False


class StoragePostgres(StrictModel):
    """``[storage.postgres]``: the DSN is read from the environment variable ``dsn_env`` names (never
    stored in the config, logged or shown; the variable is redacted like an API key)."""

    dsn_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    reconnect_timeout_ms: int = Field(default=15_000, ge=0, le=600_000)
    """How long a lost connection (a server restart) is retried before calls fail with ``storage_error``."""


class StorageSection(StrictModel):
    """``[storage]`` (docs/scale-out.md#3-what-a-workflow-does): the session-store backend."""

    backend: Literal["sqlite", "postgres"] = "sqlite"
    postgres: StoragePostgres = Field(default_factory=section_default, validate_default=True)

    @model_validator(mode="after")
    def _postgres_needs_dsn_env(self) -> "StorageSection":
        if self.backend == "postgres" and not self.postgres.dsn_env:
            raise ValueError('storage.postgres.dsn_env: required when storage.backend = "postgres"')
        return self


class ContextSection(StrictModel):
    session_db_path: ConfigPath = Field(default=Path(DEFAULT_SESSION_DB_PATH), validate_default=True)
    active_path_only: Literal[True] = True
    allow_branch_from: Literal["user_message"] = "user_message"
    branch_summary: Literal[False] = False
    reserve_output_tokens: int = Field(default=4096, ge=1)
    min_output_tokens: int = Field(default=512, ge=1)
    dynamic_system_budget: int = Field(default=12000, ge=1)
    non_system_budget: int | None = Field(default=None, ge=1)
    task_board_token_budget: int = Field(default=1200, ge=1)
    task_recent_changes_limit: int = Field(default=20, ge=1)
    task_recent_changes_window_minutes: int = Field(default=30, ge=1)


class CompactSection(StrictModel):
    enabled: bool = True
    reserve_tokens: int = Field(default=8000, ge=1)
    keep_recent_tokens: int = Field(default=16000, ge=1)
    auto_background: bool = True
    recovery_sync: bool = True
    model_profile: ProfileRef | None = None
    max_summary_tokens: int = Field(default=2048, ge=1)


class MemorySection(StrictModel):
    enabled: bool = True
    memory_dir: ConfigPath = Field(default=Path(DEFAULT_MEMORY_DIR), validate_default=True)
    categories: list[MemoryCategory] = Field(default_factory=lambda: list(MEMORY_CATEGORIES), min_length=1)
    extract_every_messages: int = Field(default=32, ge=1)
    extract_every_tokens: int = Field(default=12000, ge=1)
    idle_seconds: float = Field(default=120, gt=0)
    catalog_max_tokens: int = Field(default=4000, ge=1)
    recall_top_k: int = Field(default=5, ge=1)
    memory_context_token_budget: int = Field(default=6000, ge=1)
    extract_model_profile: ProfileRef | None = None
    recall_model_profile: ProfileRef | None = None

    @field_validator("categories")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("must not repeat a category")
        return v

    @field_validator("memory_dir")
    @classmethod
    def _fixed_dir(cls, v: Path, info: ValidationInfo) -> Path:
        paths = _path_context(info)
        if paths is None:
            return v
        expected = paths[0] / "memory"
        if Path(os.path.normpath(v)).resolve() != expected.resolve():
            raise ValueError(
                f"must be {DEFAULT_MEMORY_DIR} ({expected}) in v1, got {str(v)!r} (memory is user-level only)"
            )
        return expected


class WorkerEntry(StrictModel):
    worker_id: str | None = Field(default=None, pattern=POOL_OR_WORKER_ID.pattern)
    agent_definition_id: str = Field(min_length=1)
    allowed_tools: list[str] | None = None


class WorkerPool(StrictModel):
    pool_id: str = Field(pattern=POOL_OR_WORKER_ID.pattern)
    workers: list[WorkerEntry] = Field(default_factory=empty_list)
    autonomous: bool = False
    """Idle workers of this pool claim ready steps of the session's active Task board themselves."""


def generated_worker_id(pool_id: str, position: int, agent_definition_id: str) -> str:
    """Stable id for a worker entry without ``worker_id`` (docs/multi-agent.md#worker-pools); ``position`` is
    1-based."""
    return f"{pool_id}_w{position}_{agent_definition_id}"


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    """One configured worker: ``worker_id`` is explicit or generated, ``position`` is 1-based in its pool."""

    pool_id: str
    worker_id: str
    position: int
    agent_definition_id: str
    allowed_tools: tuple[str, ...] | None
    generated_id: bool


class AgentsSection(StrictModel):
    max_children_per_run: int = Field(default=4, ge=1)
    max_concurrent_children_per_session: int = Field(default=8, ge=1)
    default_sub_agent_definition: str = Field(default="default_sub_agent", min_length=1)
    default_fork_agent_definition: str = Field(default="default_fork_agent", min_length=1)
    default_child_timeout_ms: int = Field(default=600000, ge=1)
    child_cancel_timeout_ms: int = Field(default=30000, ge=1)
    worker_pools: list[WorkerPool] = Field(default_factory=empty_list)
    worker_isolation: Literal["shared", "worktree"] = "shared"
    """``worktree``: each dispatched worker runs in its own git worktree and branch
    (docs/multi-agent.md#worktree-isolation)."""
    inbox_max_entries: int = Field(default=100, ge=1)
    """Unread entries one agent's inbox holds; a delivery beyond it is refused (an error to the sender)."""
    max_teammates_per_session: int = Field(default=0, ge=0)
    """Teammates a lead session may have at once (``agent.team_*`` tools); ``0`` turns teams off."""

    @field_validator("worker_pools")
    @classmethod
    def _structural(cls, pools: list[WorkerPool]) -> list[WorkerPool]:
        """Structural checks of docs/multi-agent.md#worker-pools (reference checks happen at orchestrator
        start)."""
        seen_pools: set[str] = set()
        for p_index, pool in enumerate(pools):
            where = f"agents.worker_pools[{p_index}]"
            if pool.pool_id in seen_pools:
                raise ValueError(f"{where}.pool_id: duplicate pool_id {pool.pool_id!r}")
            seen_pools.add(pool.pool_id)
            explicit: set[str] = set()
            for w_index, worker in enumerate(pool.workers):
                if worker.worker_id is None:
                    continue
                if worker.worker_id in explicit:
                    raise ValueError(
                        f"{where}.workers[{w_index}].worker_id: duplicate worker_id {worker.worker_id!r} "
                        f"in pool {pool.pool_id!r}"
                    )
                explicit.add(worker.worker_id)
            for w_index, worker in enumerate(pool.workers):
                if worker.worker_id is None:
                    generated = generated_worker_id(pool.pool_id, w_index + 1, worker.agent_definition_id)
                    if generated in explicit:
                        raise ValueError(
                            f"{where}.workers[{w_index}]: generated worker id {generated!r} collides with an "
                            f"explicit worker_id in pool {pool.pool_id!r}"
                        )
        return pools


class PlanSection(StrictModel):
    default_dir: ConfigPath = Field(default=Path(DEFAULT_PLAN_DIR), validate_default=True)
    template_name: str = Field(default="default", pattern=TEMPLATE_NAME.pattern)


class TaskSection(StrictModel):
    wal_dir: ConfigPath = Field(default=Path(DEFAULT_WAL_DIR), validate_default=True)
    step_lease_timeout_ms: int = Field(default=300000, ge=1)


class NetworkPolicy(StrictModel):
    default: Literal["allow", "confirm", "deny"] = "confirm"
    allowed_hosts: list[str] = Field(default_factory=empty_list)
    allowed_domains: list[str] = Field(default_factory=empty_list)


class PermissionRule(StrictModel):
    """One ``[[permissions.rules]]`` entry (issue 14 item 9): ``tool`` (exact name or ``fnmatch`` glob such as
    ``code.*``), at most one of ``argv_prefix`` (command calls whose argv starts with it; a bare first
    element matches only a bare ``argv[0]`` looked up on the allowlisted PATH) and ``path`` (``fnmatch``
    glob on the resolved target path; ``~`` and ``<project>`` expanded), and the ``decision``."""

    tool: str = Field(min_length=1)
    argv_prefix: list[str] | None = Field(default=None, min_length=1)
    path: str | None = Field(default=None, min_length=1)
    decision: Literal["allow", "deny", "confirm"]

    @model_validator(mode="after")
    def _one_matcher(self) -> "PermissionRule":
        if self.argv_prefix is not None and self.path is not None:
            raise ValueError("a permission rule takes argv_prefix or path, not both")
        if self.argv_prefix is not None and any(not a or "\x00" in a for a in self.argv_prefix):
            raise ValueError("argv_prefix entries must be non-empty strings without NUL")
        return self


class PermissionsSection(StrictModel):
    readonly_default: Literal["allow", "confirm"] = "allow"
    write_without_callback: Literal["deny"] = "deny"
    remember_scope: Literal["session"] = "session"
    allow_for_session_enabled: bool = True
    network_policy: NetworkPolicy = Field(default_factory=section_default, validate_default=True)
    rules: list[PermissionRule] = Field(default_factory=empty_list)
    """Checked in front of the default policy; ``deny`` wins over ``confirm`` wins over ``allow``."""
    mode: PermissionMode = "default"
    """The permission mode of runs that do not choose one (``AgentRuntime.start(permission_mode=...)``,
    ``run --permission-mode``, chat ``/mode``); ``bypass`` needs ``tools.sandbox = "bwrap"``."""


class HooksSection(StrictModel):
    enabled: bool = True
    default_timeout_ms: int = Field(default=30000, ge=1)


class ToolOverride(StrictModel):
    permission: Literal["readonly", "write"] | None = None
    tags: list[str] | None = None


def _network_list(values: list[str]) -> list[str]:
    """CIDR networks or single addresses (``10.0.0.0/8``, ``127.0.0.1``, ``::1``), checked at load."""
    import ipaddress

    for value in values:
        try:
            ipaddress.ip_network(value.strip(), strict=False)
        except ValueError:
            raise ValueError(f"{value!r} is not an IP network (CIDR such as 10.0.0.0/8) or address") from None
    return values


class ToolsNetwork(StrictModel):
    allowed_hosts: list[str] = Field(default_factory=empty_list)
    allowed_domains: list[str] = Field(default_factory=empty_list)
    denied_domains: list[str] = Field(default_factory=empty_list)
    """Domains (each with its subdomains) no network-tagged call may reach: denied without asking, also
    when a host or domain allow-list or a permission rule would allow it; ``code.web_fetch`` refuses them
    as redirect targets too."""
    allowed_private_networks: Annotated[list[str], AfterValidator(_network_list)] = Field(
        default_factory=empty_list
    )
    """Non-public address space ``code.web_fetch`` may connect to (loopback, private, link-local, ...),
    as CIDR networks or single addresses; every other non-public address is refused."""


class ToolsMcp(StrictModel):
    disabled_servers: list[str] = Field(default_factory=empty_list)
    disabled_tools: list[str] = Field(default_factory=empty_list)
    tool_overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    discovery_cache_ttl_ms: int = Field(default=300000, ge=1)

    @field_validator("tool_overrides")
    @classmethod
    def _mcp_keys(cls, v: dict[str, ToolOverride]) -> dict[str, ToolOverride]:
        for name in v:
            if not MCP_OVERRIDE_KEY.match(name):
                raise ValueError(f"key {name!r} must be 'mcp.<server_id>.<tool_name>' or 'mcp.<server_id>.*'")
        return v


class ToolsSection(StrictModel):
    declarative_enabled: bool = True
    disabled: list[str] = Field(default_factory=empty_list)
    overrides: dict[str, ToolOverride] = Field(default_factory=dict)
    allowed_write_roots: list[ConfigPath] = Field(default_factory=empty_list)
    allow_tmp_write: bool = False
    default_timeout_ms: int = Field(default=120000, ge=1)
    max_timeout_ms: int = Field(default=600000, ge=1)
    env_allowlist: list[str] = Field(default_factory=lambda: ["PATH", "HOME", "TMPDIR"])
    stdout_limit_bytes: int = Field(default=65536, ge=1)
    stderr_limit_bytes: int = Field(default=65536, ge=1)
    result_limit_bytes: int = Field(default=65536, ge=1)
    result_limit_tokens: int = Field(default=8000, ge=1)
    offload_after_ms: int = Field(default=0, ge=0)
    """code.run_command / declarative calls still running after this long become background jobs (0: off)."""
    wake_on_completion: bool = True
    """A finished background job starts a run of its idle session (otherwise the next run is told)."""
    sensitive_paths: list[SensitivePattern] = Field(
        default_factory=lambda: list(DEFAULT_SENSITIVE_PATHS), validate_default=True
    )
    network: ToolsNetwork = Field(default_factory=section_default, validate_default=True)
    mcp: ToolsMcp = Field(default_factory=section_default, validate_default=True)
    sandbox: Literal["off", "bwrap"] = "off"
    """``bwrap``: ``code.run_command`` and declarative tools run inside bubblewrap (issue 14 item 8)."""

    @field_validator("overrides")
    @classmethod
    def _override_targets(cls, v: dict[str, ToolOverride]) -> dict[str, ToolOverride]:
        for name in v:
            if name.split(".", 1)[0] in {"code", "agent", "internal", "mcp"}:
                raise ValueError(
                    f"may not target built-in or MCP tool {name!r} "
                    "(use tools.mcp.tool_overrides for MCP tools)"
                )
        return v

    @model_validator(mode="after")
    def _timeouts(self) -> "ToolsSection":
        if self.default_timeout_ms > self.max_timeout_ms:
            raise ValueError("tools.default_timeout_ms: must be <= tools.max_timeout_ms")
        return self


CHANNEL_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ChannelSection(StrictModel):
    """One ``[[channels]]`` entry: a chat platform the agent answers on (``docs/channels.md``).

    ``allowed_chats`` / ``allowed_users`` are required (at least one non-empty): a channel never answers
    strangers. A message is taken when its chat is in ``allowed_chats`` (or that list is empty) and its
    sender is in ``allowed_users`` (or that list is empty). Secrets are named by environment variable,
    never written here.
    """

    kind: Literal["telegram", "slack"]
    name: str | None = Field(default=None, pattern=CHANNEL_NAME.pattern)
    """Identity of the channel (its session map); default: ``kind``. Unique among the channels."""
    token_env: str = Field(pattern=ENV_VAR_NAME.pattern)
    """Telegram: the bot token's variable; Slack: the bot token (``xoxb-...``)'s variable."""
    signing_secret_env: str | None = Field(default=None, pattern=ENV_VAR_NAME.pattern)
    """Slack only (required there): the variable holding the app's signing secret."""
    allowed_chats: list[str] = Field(default_factory=empty_list)
    allowed_users: list[str] = Field(default_factory=empty_list)
    project: ConfigPath | None = None
    """The project the channel's sessions run on; default: the project of the command that runs it."""
    session_scope: Literal["chat", "thread"] = "thread"
    """One session per chat, or per thread (Slack thread, Telegram forum topic) of a chat."""
    base_url: str | None = Field(default=None, min_length=1)
    """The platform API's base URL (tests, self-hosted gateways); default: the public API."""
    listen_host: str = "127.0.0.1"
    """Slack only: the address the Events API endpoint listens on (put a TLS proxy in front)."""
    listen_port: int = Field(default=8790, ge=0, le=65535)
    """Slack only: the endpoint's port (``0``: a free port, logged at start)."""
    poll_timeout_s: int = Field(default=30, ge=1, le=600)
    """Telegram only: the long-polling timeout of ``getUpdates``."""

    @property
    def channel_name(self) -> str:
        return self.name or self.kind

    @field_validator("allowed_chats", "allowed_users")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        if any(not item.strip() for item in v):
            raise ValueError("entries must be non-empty chat / user ids")
        return v

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"must be an http(s) URL, got {v!r}")
        return v.rstrip("/") if v is not None else None

    @model_validator(mode="after")
    def _per_kind(self) -> "ChannelSection":
        if not self.allowed_chats and not self.allowed_users:
            raise ValueError("allowed_chats or allowed_users is required (a channel never answers strangers)")
        if self.kind == "slack" and self.signing_secret_env is None:
            raise ValueError("signing_secret_env is required for a slack channel")
        if self.kind == "telegram" and self.signing_secret_env is not None:
            raise ValueError("signing_secret_env is only for slack channels")
        return self


class CheckpointsSection(StrictModel):
    """File checkpoints before write/edit tool calls and commands (rewind, ``agent_core._checkpoints``).

    A command's checkpoint walks the write roots by ``stat`` (skipping ``.git``, ``.soong-agent``,
    dependency and cache directories, ``.gitignore``d paths and ``exclude``); a file's content is read and
    stored once per version it is seen in, so later walks only ``stat``. Sensitive and credential files are
    never copied into the store."""

    enabled: bool = True
    commands: bool = True
    """Checkpoint ``code.run_command`` and declarative tools too (a ``stat`` walk of the write roots)."""
    max_file_bytes: int = Field(default=10_485_760, ge=0)
    """Larger files are recorded by size and time only: a rewind cannot restore them (it says so)."""
    max_files: int = Field(default=50_000, ge=1)
    """A walk stops after this many entries (the checkpoint is marked incomplete)."""
    max_store_bytes: int = Field(default=1_073_741_824, ge=0)
    """Content stored per session at most; beyond it files are recorded by size and time only."""
    exclude: list[str] = Field(default_factory=empty_list)
    """More ``.gitignore``-style patterns (relative to each write root) that command walks skip."""
    use_gitignore: bool = True
    """Command walks skip what the ``.gitignore`` files of the write roots ignore."""


_PATH_SECTIONS = ("context", "memory", "plan", "task", "tools", "telemetry")


class Settings(StrictModel):
    """The whole validated ``config.toml``."""

    runtime: RuntimeSection = Field(default_factory=section_default, validate_default=True)
    model: ModelSection
    model_overrides: dict[str, ModelProfile] = Field(default_factory=dict)
    context: ContextSection = Field(default_factory=section_default, validate_default=True)
    compact: CompactSection = Field(default_factory=section_default, validate_default=True)
    memory: MemorySection = Field(default_factory=section_default, validate_default=True)
    agents: AgentsSection = Field(default_factory=section_default, validate_default=True)
    plan: PlanSection = Field(default_factory=section_default, validate_default=True)
    task: TaskSection = Field(default_factory=section_default, validate_default=True)
    permissions: PermissionsSection = Field(default_factory=section_default, validate_default=True)
    hooks: HooksSection = Field(default_factory=section_default, validate_default=True)
    tools: ToolsSection = Field(default_factory=section_default, validate_default=True)
    limits: LimitsSection = Field(default_factory=section_default, validate_default=True)
    telemetry: TelemetrySection = Field(default_factory=section_default, validate_default=True)
    storage: StorageSection = Field(default_factory=section_default, validate_default=True)
    engine: EngineSection = Field(default_factory=section_default, validate_default=True)
    channels: list[ChannelSection] = Field(default_factory=empty_list)
    """``[[channels]]``: chat platforms run by ``soong-agent channels`` and ``serve`` (docs/channels.md)."""

    @field_validator("channels")
    @classmethod
    def _channel_names(cls, v: list[ChannelSection]) -> list[ChannelSection]:
        seen: set[str] = set()
        for index, channel in enumerate(v):
            if channel.channel_name in seen:
                raise ValueError(
                    f"channels[{index}]: duplicate channel name {channel.channel_name!r} (set a distinct name)"
                )
            seen.add(channel.channel_name)
        return v

    checkpoints: CheckpointsSection = Field(default_factory=section_default, validate_default=True)

    @model_validator(mode="after")
    def _bypass_needs_sandbox(self) -> "Settings":
        if self.permissions.mode == "bypass" and self.tools.sandbox != "bwrap":
            raise ValueError(
                'permissions.mode: "bypass" needs the command sandbox: set [tools] sandbox = "bwrap" '
                "(or choose another mode)"
            )
        return self

    @model_validator(mode="after")
    def _legacy_max_turns(self) -> "Settings":
        """``limits.max_turns`` falls back to the legacy ``runtime.max_turns`` (default 50)."""
        if self.limits.max_turns is None:
            self.limits.max_turns = self.runtime.max_turns
        return self

    @model_validator(mode="before")
    @classmethod
    def _sections_with_paths(cls, data: Any) -> Any:
        """Absent sections holding path keys are validated from ``{}`` so their defaults get expanded."""
        if isinstance(data, dict):
            data = dict(data)
            for section in _PATH_SECTIONS:
                data.setdefault(section, {})
        return data

    @field_validator("model_overrides")
    @classmethod
    def _profile_names(cls, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not PROFILE_NAME.match(name):
                raise ValueError(f"profile name {name!r} must match {PROFILE_NAME.pattern}")
        return v

    @model_validator(mode="after")
    def _required_model_values(self) -> "Settings":
        for key in ("provider", "name"):
            if not getattr(self.model, key):
                raise ValueError(f"model.{key}: must be a non-empty string")
        return self

    @model_validator(mode="after")
    def _profile_refs(self) -> "Settings":
        for key, ref in (
            ("compact.model_profile", self.compact.model_profile),
            ("memory.extract_model_profile", self.memory.extract_model_profile),
            ("memory.recall_model_profile", self.memory.recall_model_profile),
        ):
            if isinstance(ref, str) and ref not in self.model_overrides:
                raise ValueError(f"{key}: names unknown profile {ref!r} (no [model_overrides.{ref}])")
        fallbacks = [("model.fallback_profiles", self.model.fallback_profiles)]
        fallbacks += [
            (f"model_overrides.{name}.fallback_profiles", profile.fallback_profiles or [])
            for name, profile in self.model_overrides.items()
        ]
        for key, names in fallbacks:
            for ref in names:
                if ref not in self.model_overrides:
                    raise ValueError(f"{key}: names unknown profile {ref!r} (no [model_overrides.{ref}])")
        return self


def worker_entries(settings: Settings) -> list[WorkerSpec]:
    """Every configured worker in config order (pools in order, entries in order), ids resolved."""
    specs: list[WorkerSpec] = []
    for pool in settings.agents.worker_pools:
        for position, entry in enumerate(pool.workers, start=1):
            generated = entry.worker_id is None
            worker_id = (
                generated_worker_id(pool.pool_id, position, entry.agent_definition_id)
                if entry.worker_id is None
                else entry.worker_id
            )
            specs.append(
                WorkerSpec(
                    pool_id=pool.pool_id,
                    worker_id=worker_id,
                    position=position,
                    agent_definition_id=entry.agent_definition_id,
                    allowed_tools=None if entry.allowed_tools is None else tuple(entry.allowed_tools),
                    generated_id=generated,
                )
            )
    return specs


def _key_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    previous: int | str | None = None
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in PROFILE_REF_TAGS and isinstance(previous, str) and previous.endswith("model_profile"):
            pass  # union tag of a model_profile value, not a key
        else:
            out += f".{part}" if out else part
        previous = part
    return out


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _reason(error: Any) -> str:
    kind = error["type"]
    msg: str = error["msg"]
    value = error.get("input")
    tagged = any(part in PROFILE_REF_TAGS for part in error["loc"][-1:])
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return "unknown key (not part of the config schema)"
    if kind == "string_type" and tagged:
        return f"must be a [model_overrides] profile name or an inline table, got {_shown(value)}"
    if kind == "is_instance_of" and error.get("ctx", {}).get("class") == "Path":
        return f"must be a path string, got {_shown(value)}"
    if kind in {"model_type", "model_attributes_type", "dict_type"}:
        return f"must be a table, got {type(value).__name__}"
    if kind == "list_type":
        return f"must be an array, got {type(value).__name__}"
    if msg.startswith("Value error, "):
        return msg.removeprefix("Value error, ")
    reason = _SHOULD.sub("must ", msg, count=1)
    if isinstance(value, str | int | float | bool):
        reason += f", got {_shown(value)}"
    return reason


def format_validation_error(exc: ValidationError, source: str) -> tuple[str, list[dict[str, str]]]:
    """Turns a pydantic error into one readable message ``"invalid config <source>: <key>: <reason>; ..."``.

    Returns the message and the structured ``[{"key", "reason"}]`` list (for ``ConfigError.details``).
    """
    items: list[dict[str, str]] = []
    for error in exc.errors():
        key = _key_path(tuple(error["loc"]))
        reason = _reason(error)
        head, sep, tail = reason.partition(": ")
        if sep and " " not in head and (not key or head.startswith(key)):
            key, reason = head, tail  # the validator named a more precise key itself
        items.append({"key": key or "<root>", "reason": reason})
    text = "; ".join(f"{item['key']}: {item['reason']}" for item in items)
    return f"invalid config {source}: {text}", items
