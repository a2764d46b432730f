"""Schema values, placeholders, defaults and worker pools (docs/configuration.md#value-rules,
docs/configuration.md#keys, docs/multi-agent.md#worker-pools)."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_core.config import Settings, expand_placeholders, load_config, worker_entries
from agent_core.config.schema import DEFAULT_SENSITIVE_PATHS
from agent_core.errors import ConfigError, ErrorCode
from tests.fixtures.env import REMOVE, SoongEnv

HOME = Path("/h/home")
PROJECT = Path("/p/project")


def _load_error(env: SoongEnv, **overrides: Any) -> ConfigError:
    env.write_config(**overrides)
    with pytest.raises(ConfigError) as info:
        load_config(project_dir=env.project)
    assert info.value.code == ErrorCode.config_error
    assert str(env.config_path) in info.value.message
    return info.value


def _keys(err: ConfigError) -> list[str]:
    return [item["key"] for item in err.details["errors"]]


def test_placeholders_expand_and_other_vars_stay_literal(
    soong_env: SoongEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Case B12."""
    os_home = tmp_path / "oshome"
    monkeypatch.setenv("HOME", str(os_home))
    monkeypatch.setenv("OTHER_VAR", "/expanded/other")
    soong_env.write_config(
        context={"session_db_path": "${SOONG_AGENT_HOME}/db/${OTHER_VAR}.sqlite"},
        plan={"default_dir": "<project>/plans/$HOME"},
        task={"wal_dir": "~/wal"},
        tools={"allowed_write_roots": ["<project>/${HOME}/x", "${SOONG_AGENT_HOME}/extra", "~"]},
    )
    s = load_config(project_dir=soong_env.project).settings
    assert s.context.session_db_path == soong_env.home / "db" / "${OTHER_VAR}.sqlite"
    assert s.plan.default_dir == soong_env.project / "plans" / "$HOME"
    assert s.task.wal_dir == os_home / "wal"
    assert s.tools.allowed_write_roots == [
        soong_env.project / "${HOME}" / "x",
        soong_env.home / "extra",
        os_home,
    ]
    for value in (s.context.session_db_path, s.memory.memory_dir, s.plan.default_dir, s.task.wal_dir):
        assert isinstance(value, Path) and value.is_absolute()


@pytest.mark.parametrize("value", ["${HOME}/x", "${OTHER_VAR}/x", "relative/dir", "~user/x"])
def test_unexpanded_or_relative_path_is_config_error(soong_env: SoongEnv, value: str) -> None:
    """Case B12."""
    err = _load_error(soong_env, task={"wal_dir": value})
    assert _keys(err) == ["task.wal_dir"]
    assert repr(value) in err.message


def test_relative_write_root_error_names_index_and_sensitive_pattern_kept(soong_env: SoongEnv) -> None:
    err = _load_error(soong_env, tools={"allowed_write_roots": ["/abs/ok", "rel/root"]})
    assert _keys(err) == ["tools.allowed_write_roots[1]"]
    assert "tools.allowed_write_roots[1]: must be an absolute path" in err.message
    soong_env.write_config(tools={"sensitive_paths": ["secrets.txt", "<project>/private", "~/.ssh"]})
    s = load_config(project_dir=soong_env.project).settings
    assert s.tools.sensitive_paths == [
        "secrets.txt",
        str(soong_env.project / "private"),
        "~/.ssh",
    ]
    err = _load_error(soong_env, tools={"sensitive_paths": ["*.pem", "~root/.ssh"]})
    assert _keys(err) == ["tools.sensitive_paths[1]"]


def test_arrays_replace_defaults(soong_env: SoongEnv) -> None:
    soong_env.write_config(tools={"env_allowlist": ["PATH"], "sensitive_paths": []})
    s = load_config(project_dir=soong_env.project).settings
    assert s.tools.env_allowlist == ["PATH"]
    assert s.tools.sensitive_paths == []


def test_omitted_sections_take_documented_defaults(soong_env: SoongEnv) -> None:
    soong_env.write_config(
        context=REMOVE, memory=REMOVE, plan=REMOVE, task=REMOVE, tools=REMOVE, compact=REMOVE, agents=REMOVE
    )
    s = load_config(project_dir=soong_env.project).settings
    c = s.context
    assert c.session_db_path == soong_env.home / "sessions.sqlite"
    assert (c.active_path_only, c.allow_branch_from, c.branch_summary) == (True, "user_message", False)
    assert (c.reserve_output_tokens, c.dynamic_system_budget, c.non_system_budget) == (4096, 12000, None)
    assert (c.task_board_token_budget, c.task_recent_changes_limit, c.task_recent_changes_window_minutes) == (
        1200,
        20,
        30,
    )
    assert s.memory.memory_dir == soong_env.home / "memory"
    assert s.memory.categories == ["user", "feedback", "reference"]
    assert s.plan.default_dir == soong_env.project / ".soong-agent" / "plans"
    assert s.task.wal_dir == soong_env.project / ".soong-agent" / "tasks"
    assert s.task.step_lease_timeout_ms == 300000
    assert s.tools.env_allowlist == ["PATH", "HOME", "TMPDIR"]
    assert (s.tools.result_limit_bytes, s.tools.result_limit_tokens) == (65536, 8000)
    assert s.tools.sensitive_paths[-4:] == ["*.pem", "*.key", ".env", ".env.*"]
    assert s.compact.model_profile is None and s.compact.max_summary_tokens == 2048
    assert s.agents.worker_pools == [] and s.agents.max_children_per_run == 4
    assert s.runtime.max_turns == 50


def test_missing_api_key_env_loads(soong_env: SoongEnv) -> None:
    soong_env.write_config(model={"provider": "openai", "api_key_env": "MISSING_VAR"})
    loaded = load_config(project_dir=soong_env.project)
    assert loaded.settings.model.api_key_env == "MISSING_VAR"


def test_task_budget_only_under_context_and_memory_dir_fixed(soong_env: SoongEnv) -> None:
    err = _load_error(soong_env, task={"task_board_token_budget": 100})
    assert _keys(err) == ["task.task_board_token_budget"]
    assert "unknown key" in err.message
    soong_env.write_config(context={"task_board_token_budget": 100})
    assert load_config(project_dir=soong_env.project).settings.context.task_board_token_budget == 100
    for bad in ("<project>/mem", "${SOONG_AGENT_HOME}/other", "/somewhere/memory"):
        err = _load_error(soong_env, memory={"memory_dir": bad})
        assert _keys(err) == ["memory.memory_dir"]
    soong_env.write_config(memory={"memory_dir": "${SOONG_AGENT_HOME}/x/../memory/"})
    assert load_config(project_dir=soong_env.project).settings.memory.memory_dir == soong_env.home / "memory"


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"permissions": {"write_without_callback": "allow"}}, "permissions.write_without_callback"),
        ({"permissions": {"remember_scope": "forever"}}, "permissions.remember_scope"),
        ({"permissions": {"readonly_default": "deny"}}, "permissions.readonly_default"),
        ({"permissions": {"network_policy": {"default": "maybe"}}}, "permissions.network_policy.default"),
        ({"context": {"active_path_only": False}}, "context.active_path_only"),
        ({"context": {"branch_summary": True}}, "context.branch_summary"),
        ({"context": {"allow_branch_from": "any"}}, "context.allow_branch_from"),
        ({"memory": {"categories": []}}, "memory.categories"),
        ({"memory": {"categories": ["user", "project"]}}, "memory.categories[1]"),
        ({"memory": {"categories": ["user", "user"]}}, "memory.categories"),
        ({"tools": {"stdout_limit_bytes": 0}}, "tools.stdout_limit_bytes"),
        ({"model": {"retry": {"max_attempts": 0}}}, "model.retry.max_attempts"),
        ({"runtime": {"cancel_timeout_ms": True}}, "runtime.cancel_timeout_ms"),
        ({"runtime": {"max_turns": "5"}}, "runtime.max_turns"),
        ({"model": {"temperature": "hot"}}, "model.temperature"),
        ({"tools": {"default_timeout_ms": 700000}}, "tools.default_timeout_ms"),
        ({"tools": {"overrides": {"code.read_file": {"tags": ["x"]}}}}, "tools.overrides"),
        ({"tools": {"mcp": {"tool_overrides": {"docs.search": {"tags": []}}}}}, "tools.mcp.tool_overrides"),
        ({"tools": {"allowed_write_roots": "/abs"}}, "tools.allowed_write_roots"),
        ({"plan": {"template_name": "../x"}}, "plan.template_name"),
        ({"context": 5}, "context"),
    ],
)
def test_restricted_and_invalid_values_are_config_errors(
    soong_env: SoongEnv, overrides: dict[str, Any], key: str
) -> None:
    err = _load_error(soong_env, **overrides)
    assert _keys(err) == [key]
    assert f"{key}: " in err.message


def test_valid_alternatives_are_accepted(soong_env: SoongEnv) -> None:
    soong_env.write_config(
        permissions={"readonly_default": "confirm", "network_policy": {"default": "deny"}},
        tools={
            "overrides": {"mytools.fetch": {"permission": "readonly", "tags": ["net"]}},
            "mcp": {"tool_overrides": {"mcp.docs.*": {"permission": "readonly"}, "mcp.docs.search": {}}},
            "disabled": ["mcp.docs.*"],
        },
        memory={"categories": ["feedback"]},
        model={"temperature": 1},
    )
    s = load_config(project_dir=soong_env.project).settings
    assert s.permissions.readonly_default == "confirm"
    assert s.tools.overrides["mytools.fetch"].permission == "readonly"
    assert set(s.tools.mcp.tool_overrides) == {"mcp.docs.*", "mcp.docs.search"}
    assert s.memory.categories == ["feedback"]
    assert s.model.temperature == 1.0


def test_worker_ids_generated_in_config_order_and_stable(soong_env: SoongEnv) -> None:
    pools = [
        {
            "pool_id": "default",
            "workers": [
                {"agent_definition_id": "default_worker_agent"},
                {"agent_definition_id": "default_worker_agent", "allowed_tools": ["code.read_file"]},
                {"worker_id": "named", "agent_definition_id": "reviewer"},
            ],
        },
        {"pool_id": "second", "workers": [{"agent_definition_id": "x"}]},
    ]
    soong_env.write_config(agents={"worker_pools": pools})
    first = worker_entries(load_config(project_dir=soong_env.project).settings)
    again = worker_entries(load_config(project_dir=soong_env.project).settings)
    assert first == again
    assert [(w.pool_id, w.worker_id, w.position, w.generated_id) for w in first] == [
        ("default", "default_w1_default_worker_agent", 1, True),
        ("default", "default_w2_default_worker_agent", 2, True),
        ("default", "named", 3, False),
        ("second", "second_w1_x", 1, True),
    ]
    assert first[0].allowed_tools is None
    assert first[1].allowed_tools == ("code.read_file",)
    assert first[2].agent_definition_id == "reviewer"


@pytest.mark.parametrize(
    ("pools", "key", "text"),
    [
        (
            [{"pool_id": "p", "workers": [{"worker_id": "w", "agent_definition_id": "a"}] * 2}],
            "agents.worker_pools[0].workers[1].worker_id",
            "duplicate worker_id 'w'",
        ),
        (
            [{"pool_id": "p", "workers": [{"agent_definition_id": "a", "count": 2}]}],
            "agents.worker_pools[0].workers[0].count",
            "unknown key",
        ),
        ([{"pool_id": "p", "count": 2, "workers": []}], "agents.worker_pools[0].count", "unknown key"),
        ([{"workers": []}], "agents.worker_pools[0].pool_id", "required key is missing"),
        (
            [{"pool_id": "p", "workers": [{}]}],
            "agents.worker_pools[0].workers[0].agent_definition_id",
            "missing",
        ),
        ([{"pool_id": "p"}, {"pool_id": "p"}], "agents.worker_pools[1].pool_id", "duplicate pool_id 'p'"),
        (
            [
                {
                    "pool_id": "p",
                    "workers": [
                        {"agent_definition_id": "a"},
                        {"worker_id": "p_w1_a", "agent_definition_id": "b"},
                    ],
                }
            ],
            "agents.worker_pools[0].workers[0]",
            "collides with an explicit worker_id",
        ),
        (
            [{"pool_id": "p", "workers": {"agent_definition_id": "a"}}],
            "agents.worker_pools[0].workers",
            "array",
        ),
        ([{"pool_id": "bad id", "workers": []}], "agents.worker_pools[0].pool_id", "must match"),
        ([{"pool_id": 3, "workers": []}], "agents.worker_pools[0].pool_id", "valid string"),
    ],
)
def test_worker_pool_structural_errors(
    soong_env: SoongEnv, pools: list[dict[str, Any]], key: str, text: str
) -> None:
    err = _load_error(soong_env, agents={"worker_pools": pools})
    assert _keys(err) == [key]
    assert text in err.message


def test_no_worker_pools_loads_without_implicit_pool(soong_env: SoongEnv) -> None:
    soong_env.write_config(agents={"worker_pools": REMOVE})
    s = load_config(project_dir=soong_env.project).settings
    assert s.agents.worker_pools == []
    assert worker_entries(s) == []
    soong_env.write_config(agents={"worker_pools": [{"pool_id": "empty", "workers": []}]})
    s = load_config(project_dir=soong_env.project).settings
    assert [p.pool_id for p in s.agents.worker_pools] == ["empty"]  # reference-level issue, not structural
    assert worker_entries(s) == []


def test_packaged_template_loads_with_this_schema(soong_env: SoongEnv) -> None:
    template = resources.files("agent_core").joinpath("assets/templates/config_default.toml")
    text = template.read_text(encoding="utf-8")
    soong_env.write_config(raw=text)
    loaded = load_config(project_dir=soong_env.project)
    assert (loaded.settings.model.provider, loaded.settings.model.name) == ("ollama", "gemma4")
    assert loaded.settings.compact.model_profile == "compact"
    assert [w.worker_id for w in worker_entries(loaded.settings)] == ["worker_general_1"]
    assert loaded.settings.tools.env_allowlist == tomllib.loads(text)["tools"]["env_allowlist"]


def test_direct_settings_without_path_context_keep_templates_and_require_absolute() -> None:
    s = Settings.model_validate({"model": {"provider": "fake", "name": "m"}})
    assert str(s.context.session_db_path) == "${SOONG_AGENT_HOME}/sessions.sqlite"
    assert str(s.plan.default_dir) == "<project>/.soong-agent/plans"
    assert s.tools.sensitive_paths == DEFAULT_SENSITIVE_PATHS
    s = Settings.model_validate(
        {"model": {"provider": "fake", "name": "m"}, "tools": {"allowed_write_roots": ["/abs"]}}
    )
    assert s.tools.allowed_write_roots == [Path("/abs")]
    with pytest.raises(ValueError, match="absolute"):
        Settings.model_validate(
            {"model": {"provider": "fake", "name": "m"}, "tools": {"allowed_write_roots": ["rel"]}}
        )


def test_settings_with_path_context_are_concrete() -> None:
    s = Settings.model_validate(
        {"model": {"provider": "fake", "name": "m"}}, context={"home": HOME, "project": PROJECT}
    )
    assert s.context.session_db_path == HOME / "sessions.sqlite"
    assert s.memory.memory_dir == HOME / "memory"
    assert s.task.wal_dir == PROJECT / ".soong-agent" / "tasks"
    assert s.tools.sensitive_paths == DEFAULT_SENSITIVE_PATHS  # '~' is left to the sensitive-path matcher


def test_expand_placeholders_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/os/home")
    assert expand_placeholders("${SOONG_AGENT_HOME}/a", HOME, PROJECT) == "/h/home/a"
    assert expand_placeholders("<project>/b/<project>", HOME, PROJECT) == "/p/project/b//p/project"
    assert expand_placeholders("~", HOME, PROJECT) == "/os/home"
    assert expand_placeholders("~/.ssh", HOME, PROJECT) == "/os/home/.ssh"
    assert expand_placeholders("a/~/b", HOME, PROJECT) == "a/~/b"
    assert expand_placeholders("~other/x", HOME, PROJECT) == "~other/x"
    assert expand_placeholders("~/<project>", HOME, PROJECT, expand_user=False) == "~//p/project"
    assert expand_placeholders("${HOME}/$HOME/${SOONG_AGENT_HOME_X}", HOME, PROJECT) == (
        "${HOME}/$HOME/${SOONG_AGENT_HOME_X}"
    )
    weird_home = Path("/h/<project>")
    assert expand_placeholders("${SOONG_AGENT_HOME}", weird_home, PROJECT) == "/h/<project>"


@given(st.text())
def test_expand_placeholders_leaves_text_without_placeholders_unchanged(value: str) -> None:
    if "${SOONG_AGENT_HOME}" in value or "<project>" in value or value == "~" or value.startswith("~/"):
        return
    assert expand_placeholders(value, HOME, PROJECT) == value


def test_absent_tables_validate_to_their_models_defaults() -> None:
    """Absent tables (and nested tables such as ``engine.temporal``, ``model.retry``) are validated from
    an empty table by the ``Settings`` validator itself (cold start: no validator of their own is built);
    the values equal the models' own defaults, and no two configs share a mutable default."""
    from agent_core.config.model import ModelSection, RetryConfig
    from agent_core.config.schema import (
        AgentsSection,
        EngineSection,
        HooksSection,
        LimitsSection,
        PermissionsSection,
        RuntimeSection,
        StorageSection,
        ToolsMcp,
        ToolsNetwork,
    )

    data = {"model": {"provider": "openai", "name": "m"}}
    one = Settings.model_validate(data, strict=True, context={"home": HOME, "project": PROJECT})
    two = Settings.model_validate(data, strict=True, context={"home": HOME, "project": PROJECT})
    assert one.runtime == RuntimeSection()
    assert one.agents == AgentsSection()
    assert one.permissions == PermissionsSection()
    assert one.hooks == HooksSection()
    assert one.storage == StorageSection()
    assert one.engine == EngineSection()
    assert one.limits.max_turns == RuntimeSection().max_turns  # the legacy fallback still applies
    assert one.limits.model_copy(update={"max_turns": None}) == LimitsSection()
    assert one.tools.network == ToolsNetwork() and one.tools.mcp == ToolsMcp()
    assert one.model.retry == RetryConfig() == ModelSection(provider="p", name="n").retry
    assert isinstance(one.engine.temporal, type(EngineSection().temporal))
    one.permissions.network_policy.allowed_hosts.append("example.org")
    one.tools.disabled.append("code.read_file")
    assert two.permissions.network_policy.allowed_hosts == [] and two.tools.disabled == []
    assert PermissionsSection().network_policy.allowed_hosts == []
