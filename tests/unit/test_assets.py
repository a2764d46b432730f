"""Packaged prompt/template/agent assets and the asset loader (docs/context.md#package-assets,
docs/testing.md).

Case ids: a07 (package assets), a09 (templates live outside code; unknown asset ids). The composer-level
halves of/48 (a composed request) are tested with the prompt composer; here the
single-source data and the loader are checked.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from agent_core._asset_loader import (
    ASSET_PATHS,
    BUILTIN_AGENT_ASSETS,
    STATIC_SYSTEM_ASSETS,
    STATIC_SYSTEM_BLOCKS,
    Asset,
    AssetLoader,
    asset_version,
)
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.types.runtime import AgentDefinition
from tests.fixtures.env import SoongEnv

PACKAGE_ASSETS = Path(str(resources.files("agent_core").joinpath("assets")))
SRC_ROOT = Path(str(resources.files("agent_core")))

# docs/context.md#package-assets, copied here so that a drifting ASSET_PATHS fails.
EXPECTED_PATHS = {
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

# docs/context.md#static-blocks: (block_id, priority, source, asset_id) in emission order.
EXPECTED_STATIC = [
    ("system.core", 0, "core", "system.core"),
    ("system.tool_protocol", 10, "core", "system.tool_protocol"),
    ("system.todo", 20, "core", "system.todo"),
    ("system.permissions", 30, "core", "system.permissions"),
    ("system.multi_agent", 40, "core", "system.multi_agent"),
    ("system.memory", 50, "core", "system.memory"),
    ("system.compact", 60, "core", "system.compact"),
    ("runtime.role", 62, "core", None),
    ("runtime.tool_catalog", 64, "core", None),
    ("instruction_catalog", 70, "instruction_catalog", None),
]

COMPACT_HEADINGS = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
    "## Files & Artifacts",
    "## Tool & Runtime Notes",
]

# docs/configuration.md#keys, verbatim.
CONTRACT_CONFIG_BLOCK = """[runtime]
cancel_timeout_ms = 10000

[model]
provider = "ollama"
base_url = "http://127.0.0.1:11434"
api_key_env = ""
name = "gemma4"
context_window = 8192
max_output_tokens = 4096
temperature = 0.2
timeout_ms = 60000

[model.retry]
max_attempts = 3
initial_backoff_ms = 500
max_backoff_ms = 8000

[model_overrides.compact]
max_output_tokens = 2048
temperature = 0.0

[context]
session_db_path = "${SOONG_AGENT_HOME}/sessions.sqlite"
active_path_only = true
reserve_output_tokens = 4096
dynamic_system_budget = 12000
task_board_token_budget = 1200
task_recent_changes_limit = 20
task_recent_changes_window_minutes = 30

[compact]
enabled = true
reserve_tokens = 8000
keep_recent_tokens = 16000
auto_background = true
recovery_sync = true
model_profile = "compact"
max_summary_tokens = 2048

[memory]
enabled = true
memory_dir = "${SOONG_AGENT_HOME}/memory"
categories = ["user", "feedback", "reference"]
extract_every_messages = 32
extract_every_tokens = 12000
idle_seconds = 120
catalog_max_tokens = 4000
recall_top_k = 5
memory_context_token_budget = 6000

[agents]
max_children_per_run = 4
max_concurrent_children_per_session = 8
default_sub_agent_definition = "default_sub_agent"
default_fork_agent_definition = "default_fork_agent"
default_child_timeout_ms = 600000
child_cancel_timeout_ms = 30000

[[agents.worker_pools]]
pool_id = "default"

[[agents.worker_pools.workers]]
worker_id = "worker_general_1"
agent_definition_id = "default_worker_agent"
allowed_tools = ["agent.task_get", "agent.task_query_steps", "agent.task_claim_step", "agent.task_update_step", "code.read_file", "code.search"]

[plan]
default_dir = "<project>/.soong-agent/plans"
template_name = "default"

[task]
wal_dir = "<project>/.soong-agent/tasks"
step_lease_timeout_ms = 300000

[permissions]
readonly_default = "allow"
write_without_callback = "deny"
remember_scope = "session"
allow_for_session_enabled = true

[permissions.network_policy]
default = "confirm"
allowed_hosts = []
allowed_domains = []

[hooks]
enabled = true
default_timeout_ms = 30000

[tools]
declarative_enabled = true
disabled = []
allowed_write_roots = []
allow_tmp_write = false
default_timeout_ms = 120000
max_timeout_ms = 600000
env_allowlist = ["PATH", "HOME", "TMPDIR"]
stdout_limit_bytes = 65536
stderr_limit_bytes = 65536
sensitive_paths = ["~/.ssh", "~/.gnupg", "~/.aws", "~/.config/gcloud", "*.pem", "*.key", ".env", ".env.*"]

[tools.network]
allowed_hosts = []
allowed_domains = []
"""


class ChildAgentResultShape(BaseModel):
    """docs/multi-agent.md#child-results fields a child may self-report (core adds step_id/metadata)."""

    model_config = ConfigDict(extra="forbid")
    status: Literal["completed", "failed"]
    summary: str
    findings: list[str | dict[str, Any]]
    proposed_actions: list[str | dict[str, Any]]
    artifacts: list[dict[str, Any]]


class CompactionPayloadShape(BaseModel):
    """docs/compaction.md#the-payload."""

    model_config = ConfigDict(extra="forbid")
    summary: str
    first_kept_node_id: str
    tokens_before: int
    details: dict[str, Any]


def _markdown_ids() -> list[str]:
    return [asset_id for asset_id, path in EXPECTED_PATHS.items() if path.endswith(".md")]


def _split_frontmatter(text: str) -> tuple[dict[str, Any], str]:
    match = re.match(r"^---\n(.*?)\n---\n(.*)\Z", text, re.S)
    assert match, "agent asset must start with a YAML frontmatter block"
    meta = yaml.safe_load(match.group(1))
    assert isinstance(meta, dict)
    return meta, match.group(2)


def _body(asset_id: str, text: str) -> str:
    return _split_frontmatter(text)[1] if asset_id.startswith("agent.") else text


def _json_blocks(text: str) -> list[Any]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", text, re.S)]


def _copy_root(tmp_path: Path) -> Path:
    root = tmp_path / "assets"
    shutil.copytree(PACKAGE_ASSETS, root, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    return root


# ----------------------------------------------------------------------------------------- A7


def test_asset_paths_equal_contract_mapping() -> None:
    """Case A7."""
    assert ASSET_PATHS == EXPECTED_PATHS
    assert len(ASSET_PATHS) == 16
    stems = ("default_sub_agent", "default_fork_agent", "default_worker_agent", "default_compact_agent")
    expected = {stem: f"agent.{stem}" for stem in stems}
    assert expected == BUILTIN_AGENT_ASSETS


@pytest.mark.parametrize("asset_id", list(EXPECTED_PATHS))
def test_each_required_asset_exists_and_loads(asset_id: str) -> None:
    """Case A7."""
    path = PACKAGE_ASSETS / EXPECTED_PATHS[asset_id]
    assert path.is_file(), path
    data = path.read_bytes()
    assert data.strip(), f"{asset_id} is empty"
    asset = AssetLoader().load(asset_id)
    assert isinstance(asset, Asset)
    assert asset.asset_id == asset_id
    assert asset.text == data.decode("utf-8")
    assert asset.resource == EXPECTED_PATHS[asset_id]
    assert asset.version == hashlib.sha256(data).hexdigest()[:12]


@pytest.mark.parametrize("asset_id", _markdown_ids())
def test_markdown_assets_start_with_title(asset_id: str) -> None:
    """Case A7."""
    body = _body(asset_id, AssetLoader().load(asset_id).text)
    first = next(line for line in body.splitlines() if line.strip())
    assert re.fullmatch(r"# \S.{3,}", first), f"{asset_id}: first line {first!r} is not a '# ' title"


def test_verify_all_loads_all_sixteen_package_assets() -> None:
    """Case A7."""
    loaded = AssetLoader().verify_all()
    assert [a.asset_id for a in loaded] == list(EXPECTED_PATHS)
    assert all(a.text.strip() for a in loaded)


def test_no_todo_or_placeholder_markers_in_assets() -> None:
    """Case A7."""
    for asset_id in EXPECTED_PATHS:
        text = AssetLoader().load(asset_id).text
        for marker in ("TODO", "FIXME", "TBD", "XXX", "Lorem ipsum"):
            assert marker not in text, f"{asset_id} contains {marker!r}"


def test_assets_contain_no_dangerous_suggestions() -> None:
    """Case A7."""
    dangerous = ("rm -rf", "sudo ", "--force", "--no-verify", "chmod 777", "| sh", "| bash", "curl ", "wget ")
    for asset_id in EXPECTED_PATHS:
        text = AssetLoader().load(asset_id).text.lower()
        for phrase in dangerous:
            assert phrase not in text, f"{asset_id} suggests {phrase!r}"


# ------------------------------------------------------------------------------------- config template


def test_config_template_equals_contract_block() -> None:
    """Case A7."""
    text = AssetLoader().load("template.config.default").text
    assert text.startswith(CONTRACT_CONFIG_BLOCK)
    assert tomllib.loads(text) == tomllib.loads(CONTRACT_CONFIG_BLOCK)
    parsed = tomllib.loads(text)
    assert parsed["model"]["provider"] == "ollama"
    assert parsed["model"]["name"] == "gemma4"
    tail = text[len(CONTRACT_CONFIG_BLOCK) :]
    assert all(not line.strip() or line.startswith("#") for line in tail.splitlines()), (
        "only comments may follow"
    )


def test_config_template_vendor_examples_are_generic_comments() -> None:
    """Case A7."""
    text = AssetLoader().load("template.config.default").text
    vendor_lines = [line for line in text.splitlines() if re.search(r"openai|anthropic", line, re.I)]
    assert vendor_lines, "the template documents the openai/anthropic examples"
    assert all(line.startswith("#") for line in vendor_lines)
    for line in text.splitlines():
        if line.startswith("#") and re.match(r"#\s*(base_url|api_key_env|name)\s*=", line):
            assert "<" in line and ">" in line, f"example value must be a generic placeholder: {line!r}"


def test_config_template_is_accepted_by_the_config_loader(soong_env: SoongEnv) -> None:
    """Case A7."""
    from agent_core.config.loader import load_config

    soong_env.write_config(raw=AssetLoader().load("template.config.default").text)
    loaded = load_config(home_dir=soong_env.home, project_dir=soong_env.project)
    assert loaded.settings.model.provider == "ollama"
    assert loaded.settings.model.name == "gemma4"
    assert loaded.session_db_path == soong_env.home / "sessions.sqlite"
    assert not loaded.session_db_path.exists()


# -------------------------------------------------------------------------------------------------- A9


def test_unknown_asset_id_is_internal_error() -> None:
    """Case A9."""
    for bad in ("system.nope", "agent.default_compact", "", "template.plan.Default", "template.plan.../x"):
        with pytest.raises(AgentCoreError) as info:
            AssetLoader().load(bad)
        assert info.value.code == ErrorCode.internal_error


def test_unknown_plan_template_is_config_error() -> None:
    """Case A9."""
    loader = AssetLoader()
    assert loader.template("default") == loader.load("template.plan.default")
    for bad in ("nope", "../default", "Default", ""):
        with pytest.raises(ConfigError) as info:
            loader.template(bad)
        assert info.value.code == ErrorCode.config_error
        assert "template.plan." in info.value.message


def test_asset_text_is_not_in_python_sources() -> None:
    """Case A9."""
    sources = {p: p.read_text(encoding="utf-8") for p in SRC_ROOT.rglob("*.py")}
    assert sources
    for asset_id in _markdown_ids():
        text = AssetLoader().load(asset_id).text
        body = _body(asset_id, text)
        title = next(line for line in body.splitlines() if line.strip())
        prose = [line.strip() for line in body.splitlines() if len(line.strip()) >= 80]
        for path, source in sources.items():
            assert title not in source, f"{path} contains the title of {asset_id}"
            for line in prose:
                assert line not in source, f"{path} contains body text of {asset_id}: {line[:60]!r}"


# ----------------------------------------------------------------------------------- versions / loader


def test_template_version_is_sha256_prefix_and_recorded_as_metadata() -> None:
    asset = AssetLoader().template("default")
    data = (PACKAGE_ASSETS / "templates/plan_default.md").read_bytes()
    assert asset.version == hashlib.sha256(data).hexdigest()[:12] == asset_version(data)
    assert re.fullmatch(r"[0-9a-f]{12}", asset.version)
    assert asset.template_metadata == {
        "template_id": "template.plan.default",
        "template_version": asset.version,
    }
    task = AssetLoader().load("template.task_dag.default")
    assert task.template_metadata["template_id"] == "template.task_dag.default"
    assert task.version != asset.version


def test_asset_is_frozen_and_cached_per_loader() -> None:
    loader = AssetLoader()
    first = loader.load("system.core")
    assert loader.load("system.core") is first
    with pytest.raises(AttributeError):
        first.text = "changed"  # type: ignore[misc]
    assert AssetLoader().load("system.core") is not first


def test_temp_copy_root_changes_text_without_code_change(tmp_path: Path) -> None:
    root = _copy_root(tmp_path)
    new_text = "# Replaced Core\n\nA different core prompt.\n"
    (root / "prompts/system/core.md").write_text(new_text, encoding="utf-8")
    replaced = AssetLoader(root).load("system.core")
    original = AssetLoader().load("system.core")
    assert replaced.text == new_text
    assert replaced.version == asset_version(new_text.encode()) != original.version
    assert original.text != new_text
    # the untouched assets of the copy are identical to the package ones
    assert AssetLoader(root).load("system.todo") == AssetLoader().load("system.todo")
    assert len(AssetLoader(root).verify_all()) == 16


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda p: p.unlink(), "missing"),
        (lambda p: p.write_bytes(b""), "empty"),
        (lambda p: p.write_text("  \n\t\n", encoding="utf-8"), "empty"),
        (lambda p: p.write_bytes(b"# T\n\xff\xfe bad"), "not valid UTF-8"),
        (lambda p: (p.unlink(), p.mkdir()), "missing"),
    ],
)
def test_broken_asset_is_internal_error_naming_it(tmp_path: Path, damage: Any, problem: str) -> None:
    root = _copy_root(tmp_path)
    damage(root / "agents/default_worker_agent.md")
    with pytest.raises(AgentCoreError) as info:
        AssetLoader(root).load("agent.default_worker_agent")
    assert info.value.code == ErrorCode.internal_error
    assert "agent.default_worker_agent" in info.value.message
    assert info.value.details["problem"] == problem
    with pytest.raises(AgentCoreError) as startup:
        AssetLoader(root).verify_all()
    assert startup.value.code == ErrorCode.internal_error
    assert "agent.default_worker_agent" in startup.value.message
    assert "agents/default_worker_agent.md" in startup.value.message


def test_verify_all_names_every_broken_asset(tmp_path: Path) -> None:
    root = _copy_root(tmp_path)
    (root / "prompts/memory/extraction.md").unlink()
    (root / "templates/config_default.toml").write_text("", encoding="utf-8")
    with pytest.raises(AgentCoreError) as info:
        AssetLoader(root).verify_all()
    assert info.value.code == ErrorCode.internal_error
    assert "memory.extraction" in info.value.message
    assert "template.config.default" in info.value.message
    assert len(info.value.details["assets"]) == 2


def test_plan_template_lookup_by_convention_in_a_root(tmp_path: Path) -> None:
    root = _copy_root(tmp_path)
    (root / "templates/plan_short.md").write_text(
        "# Short Plan\n\nWrite a three-line plan.\n", encoding="utf-8"
    )
    loader = AssetLoader(root)
    short = loader.template("short")
    assert short.asset_id == "template.plan.short"
    assert short.resource == "templates/plan_short.md"
    assert short.template_metadata["template_id"] == "template.plan.short"
    with pytest.raises(ConfigError):
        AssetLoader().template("short")  # not in the package
    (root / "templates/plan_blank.md").write_text("\n", encoding="utf-8")
    with pytest.raises(AgentCoreError) as info:
        AssetLoader(root).template("blank")
    assert info.value.code == ErrorCode.internal_error


# ----------------------------------------------------------------------------------------------


def test_static_block_order_ids_priorities_match_context_spec() -> None:
    got = [(s.block_id, s.priority, s.source, s.asset_id) for s in STATIC_SYSTEM_BLOCKS]
    assert got == EXPECTED_STATIC
    assert [s.block_id for s in STATIC_SYSTEM_ASSETS] == [row[0] for row in EXPECTED_STATIC[:7]]
    priorities = [s.priority for s in STATIC_SYSTEM_BLOCKS]
    assert priorities == sorted(priorities) and len(set(priorities)) == len(priorities)
    assert all(0 <= p <= 99 for p in priorities)
    for spec in STATIC_SYSTEM_ASSETS:
        assert spec.asset_id is not None
        assert spec.asset_id in ASSET_PATHS and ASSET_PATHS[spec.asset_id].startswith("prompts/system/")


# ---------------------------------------------------------------------------------------- agent assets


@pytest.mark.parametrize("definition_id", list(BUILTIN_AGENT_ASSETS))
def test_agent_assets_parse_as_definition_file_form(definition_id: str) -> None:
    """Case A7."""
    asset = AssetLoader().load(BUILTIN_AGENT_ASSETS[definition_id])
    meta, body = _split_frontmatter(asset.text)
    assert meta["id"] == definition_id == Path(asset.resource).stem
    assert set(meta) <= {"id", "name", "description", "suggested_tools", "tags", "model_profile", "overrides"}
    assert "model_profile" not in meta and "overrides" not in meta
    definition = AgentDefinition(
        agent_definition_id=meta["id"],
        name=meta["name"],
        description=meta["description"],
        body=body,
        suggested_tools=meta.get("suggested_tools", []),
        tags=meta.get("tags", []),
        source="builtin",
    )
    assert definition.name.strip() and definition.description.strip() and definition.body.strip()
    assert "builtin" in definition.tags
    assert re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", definition.agent_definition_id)
    assert definition.description not in body, "the description must not leak into the prompt body"


def test_agent_asset_recommended_metadata() -> None:
    """Case A7."""

    def meta(definition_id: str) -> dict[str, Any]:
        return _split_frontmatter(AssetLoader().load(f"agent.{definition_id}").text)[0]

    assert meta("default_sub_agent")["tags"] == ["builtin", "sub"]
    assert meta("default_sub_agent")["suggested_tools"] == []
    assert meta("default_fork_agent")["tags"] == ["builtin", "fork"]
    assert meta("default_fork_agent")["suggested_tools"] == []
    assert meta("default_worker_agent")["tags"] == ["builtin", "worker"]
    assert meta("default_worker_agent")["suggested_tools"] == [
        "agent.task_get",
        "agent.task_query_steps",
        "agent.task_claim_step",
        "agent.task_update_step",
        "code.read_file",
        "code.search",
    ]
    assert meta("default_compact_agent")["suggested_tools"] == []


@pytest.mark.parametrize("definition_id", ["default_sub_agent", "default_fork_agent", "default_worker_agent"])
def test_child_agents_specify_the_child_result_json_block(definition_id: str) -> None:
    body = _split_frontmatter(AssetLoader().load(f"agent.{definition_id}").text)[1]
    blocks = _json_blocks(body)
    assert len(blocks) == 1, "exactly one example result block"
    result = ChildAgentResultShape.model_validate(blocks[0])
    assert result.summary
    assert "fenced `json` block" in body
    assert "expected output schema" in body


def test_compact_agent_specifies_payload_and_all_summary_headings() -> None:
    body = _split_frontmatter(AssetLoader().load("agent.default_compact_agent").text)[1]
    fence = re.search(r"```markdown\n(.*?)\n```", body, re.S)
    assert fence is not None
    assert fence.group(1).splitlines() == COMPACT_HEADINGS
    assert "## Split Turn Prefix" in body
    (example,) = _json_blocks(body)
    payload = CompactionPayloadShape.model_validate(example)
    lines = payload.summary.splitlines()
    positions = [lines.index(heading) for heading in COMPACT_HEADINGS]
    assert positions == sorted(positions)


# -------------------------------------------------------------------------------------- memory prompts


def test_memory_extraction_prompt_specifies_submit_schema() -> None:
    text = AssetLoader().load("memory.extraction").text
    assert "memory_writer.submit" in text and "memory_writer.read_memory" in text
    (example,) = _json_blocks(text)
    assert set(example) == {"operations", "ignored_candidates", "duplicate_decisions", "conflicts"}
    create_user, create_reference, update = example["operations"]
    create_keys = {"op", "category", "name", "summary", "tags", "body", "source_node_ids"}
    assert set(create_user) == create_keys and create_user["category"] == "user"
    assert set(create_reference) == create_keys | {"evidence"} and create_reference["category"] == "reference"
    assert set(update) == {"op", "memory_id", "summary", "tags", "body", "source_node_ids"}
    assert update["op"] == "update"
    for create in (create_user, create_reference):
        assert create["op"] == "create"
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", create["name"]) and len(create["name"]) <= 64
        assert "\n" not in create["summary"] and len(create["summary"]) <= 200
        assert create["source_node_ids"] and create["body"].strip()
        assert len(create["tags"]) <= 10 and all(len(tag) <= 40 for tag in create["tags"])
    assert update["source_node_ids"]
    for key in ("ignored_candidates", "duplicate_decisions", "conflicts"):
        assert all(item["source_node_ids"] for item in example[key])
    for rule in ("16 KiB", "200 characters", "at most 10", "^[a-z0-9]+(-[a-z0-9]+)*$", "at most 8 turns"):
        assert rule in text


def test_memory_recall_selector_prompt_specifies_memory_ids_output() -> None:
    text = AssetLoader().load("memory.recall_selector").text
    (example,) = _json_blocks(text)
    assert list(example) == ["memory_ids"]
    assert all(re.fullmatch(r"mem_\d{14}_[0-9a-f]{6}", i) for i in example["memory_ids"])
    assert "relevance order" in text and "<limit>" in text


def test_system_prompts_name_their_tools_canonically() -> None:
    loader = AssetLoader()
    protocol = loader.load("system.tool_protocol").text
    for name in ("code.read_file", "code.list_dir", "code.search", "code.write_file", "code.edit_file"):
        assert f"`{name} {{" in protocol
    assert "`code.run_command {argv" in protocol
    for term in (
        "tool_not_available",
        "validation_error",
        "artifact",
        "start_line",
        "max_lines",
        "overwrite",
    ):
        assert term in protocol
    assert "internal.recall_memory" in loader.load("system.memory").text
    multi = loader.load("system.multi_agent").text
    for name in (
        "agent.list_agent_definitions",
        "agent.create_sub_agent",
        "agent.fork_agent",
        "agent.dispatch_worker",
    ):
        assert name in multi
    assert "<compaction_summary" in loader.load("system.compact").text
