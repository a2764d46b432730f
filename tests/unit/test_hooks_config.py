"""hooks.json loading, validation and matchers (docs/hooks-and-mcp.md#where-and-when,
docs/hooks-and-mcp.md#matchers; H9, H19, H20)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from agent_core._hooks import NO_HOOKS, HooksDispatcher, load_hooks
from agent_core._hooks.config import HOOKS_FILENAME, load_hooks_config
from agent_core._hooks.matchers import RuleMatcher
from agent_core.config.loader import LoadedConfig, load_config
from agent_core.errors import ConfigError, ErrorCode
from agent_core.types.enums import HookPhase
from tests.fixtures.env import SoongEnv


def _config(env: SoongEnv, **overrides: Any) -> LoadedConfig:
    env.write_config(**overrides)
    return load_config(home_dir=env.home, project_dir=env.project)


def _write_hooks(env: SoongEnv, data: Any) -> Path:
    text = data if isinstance(data, str) else json.dumps(data)
    return env.write_home(HOOKS_FILENAME, text)


def _rule(matcher: Any = None, command: str = "true", **hook: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {"hooks": [{"type": "command", "command": command, **hook}]}
    if matcher is not None:
        rule["matcher"] = matcher
    return rule


def _expect_error(env: SoongEnv, data: Any, fragment: str, **overrides: Any) -> ConfigError:
    path = _write_hooks(env, data)
    config = _config(env, **overrides)
    with pytest.raises(ConfigError) as info:
        load_hooks(config)
    assert info.value.code == ErrorCode.config_error
    assert str(path) in info.value.message
    assert fragment in info.value.message, info.value.message
    return info.value


def test_missing_file_means_no_hooks(soong_env: SoongEnv) -> None:
    assert load_hooks(_config(soong_env)) is NO_HOOKS


def test_project_level_hooks_file_is_never_read(soong_env: SoongEnv) -> None:
    """Case H9."""
    soong_env.write_project(
        ".soong-agent/hooks.json", json.dumps({"version": 1, "hooks": {"PreToolUse": [_rule()]}})
    )
    assert load_hooks(_config(soong_env)) is NO_HOOKS
    # even an invalid project file is ignored: nothing reads it
    soong_env.write_project(".soong-agent/hooks.json", "{not json")
    assert load_hooks(_config(soong_env)) is NO_HOOKS


def test_hooks_disabled_does_not_read_the_file(soong_env: SoongEnv) -> None:
    """Case H20."""
    _write_hooks(soong_env, "{broken")
    assert load_hooks(_config(soong_env, hooks={"enabled": False})) is NO_HOOKS
    _write_hooks(soong_env, {"version": 1, "hooks": {"PreToolUse": [_rule()]}})
    assert load_hooks(_config(soong_env, hooks={"enabled": False})) is NO_HOOKS
    dispatcher = load_hooks(_config(soong_env))
    assert isinstance(dispatcher, HooksDispatcher)
    assert dispatcher.config.hook_count == 1


def test_unknown_event_key(soong_env: SoongEnv) -> None:
    _expect_error(soong_env, {"version": 1, "hooks": {"PlanModeComplete": [_rule()]}}, "PlanModeComplete")


def test_non_object_matcher(soong_env: SoongEnv) -> None:
    _expect_error(soong_env, {"version": 1, "hooks": {"PreToolUse": [_rule("code.write_file")]}}, "matcher")


def test_tool_matcher_under_stop_and_session_events(soong_env: SoongEnv) -> None:
    for phase, key in (("Stop", "tool_name"), ("SessionStart", "tag"), ("UserPromptSubmit", "path_prefix")):
        data = {"version": 1, "hooks": {phase: [_rule({key: "x"})]}}
        _expect_error(soong_env, data, f"hooks.{phase}[0].matcher")


def test_invalid_json_and_unreadable_file(soong_env: SoongEnv) -> None:
    _expect_error(soong_env, "{not json", "invalid JSON")
    (soong_env.home / HOOKS_FILENAME).unlink()
    (soong_env.home / HOOKS_FILENAME).mkdir()
    config = _config(soong_env)
    with pytest.raises(ConfigError) as info:
        load_hooks(config)
    assert "is a directory" in info.value.message


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"hooks": {}}, "version"),
        ({"version": 2, "hooks": {}}, "version"),
        ({"version": True, "hooks": {}}, "version"),
        ({"version": 1, "hooks": {}, "extra": 1}, "extra"),
        ({"version": 1, "hooks": {"PreToolUse": [{"hooks": []}]}}, "hooks.PreToolUse[0].hooks"),
        ({"version": 1, "hooks": {"PreToolUse": [_rule(args=["x"])]}}, "args"),
        ({"version": 1, "hooks": {"PreToolUse": [_rule({"tool_name": "a", "regex": "b"})]}}, "regex"),
        ({"version": 1, "hooks": {"Stop": [{"hooks": [{"type": "http", "command": "x"}]}]}}, "type"),
        ({"version": 1, "hooks": {"Stop": [_rule(env_allowlist=["BAD-NAME"])]}}, "env_allowlist"),
        (None, "<root>"),
        ([], "<root>"),
    ],
)
def test_schema_violations_fail_with_config_error(soong_env: SoongEnv, data: Any, fragment: str) -> None:
    _expect_error(soong_env, json.dumps(data), fragment)


def test_timeout_above_max_is_rejected(soong_env: SoongEnv) -> None:
    data = {"version": 1, "hooks": {"Stop": [_rule(timeout_ms=700_000)]}}
    _expect_error(soong_env, data, "tools.max_timeout_ms")


def test_working_dir_must_stay_inside_allowed_roots(soong_env: SoongEnv, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    data = {"version": 1, "hooks": {"Stop": [_rule(working_dir=str(outside))]}}
    _expect_error(soong_env, data, "working_dir")
    # an allowed write root makes it acceptable
    _write_hooks(soong_env, data)
    config = _config(soong_env, tools={"allowed_write_roots": [str(outside)]})
    hooks = load_hooks_config(settings=config.settings, home=config.home, project=config.project)
    assert hooks is not None
    assert hooks.rules_for(HookPhase.Stop)[0].hooks[0].working_dir == outside.resolve()


def test_placeholders_defaults_and_relative_paths(soong_env: SoongEnv) -> None:
    (soong_env.project / "sub").mkdir()
    data = {
        "version": 1,
        "hooks": {
            "PreToolUse": [
                _rule(
                    {"path_prefix": "src/"},
                    command="python3 ${SOONG_AGENT_HOME}/g.py <project>",
                    working_dir="sub",
                ),
                _rule({"path_prefix": "<project>/lib"}, working_dir="${SOONG_AGENT_HOME}", timeout_ms=7),
            ]
        },
    }
    _write_hooks(soong_env, data)
    config = _config(soong_env)
    hooks = load_hooks_config(settings=config.settings, home=config.home, project=config.project)
    assert hooks is not None
    first, second = hooks.rules_for(HookPhase.PreToolUse)
    spec = first.hooks[0]
    home_q, project_q = shlex.quote(str(soong_env.home)), shlex.quote(str(soong_env.project))
    assert spec.command == f"python3 {home_q}/g.py {project_q}"
    assert spec.working_dir == soong_env.project / "sub"
    assert spec.timeout_ms == 5000  # hooks.default_timeout_ms of the baseline config
    assert first.matcher is not None and first.matcher.path_prefix == soong_env.project / "src"
    assert second.hooks[0].working_dir == soong_env.home
    assert second.hooks[0].timeout_ms == 7
    assert second.matcher is not None and second.matcher.path_prefix == soong_env.project / "lib"
    assert hooks.rules_for(HookPhase.Stop) == ()


def test_placeholder_paths_with_spaces_are_quoted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "my home"
    project = tmp_path / "my project"
    home.mkdir()
    project.mkdir()
    env = SoongEnv(home=home.resolve(), project=project.resolve())
    _write_hooks(env, {"version": 1, "hooks": {"Stop": [_rule(command="cat <project>/x")]}})
    config = _config(env)
    hooks = load_hooks_config(settings=config.settings, home=config.home, project=config.project)
    assert hooks is not None
    assert hooks.rules_for(HookPhase.Stop)[0].hooks[0].command == f"cat '{env.project}'/x"


def test_matchers_are_exact(tmp_path: Path) -> None:
    """Case H19."""
    src = tmp_path / "src"
    by_name = RuleMatcher(tool_name="code.write_file")
    assert by_name.matches(tool_name="code.write_file")
    assert not by_name.matches(tool_name="code.edit_file")
    glob = RuleMatcher(tool_name="code.*")
    regex = RuleMatcher(tool_name="code\\..*")
    for name in ("code.write_file", "code.edit_file", "code.read_file"):
        assert not glob.matches(tool_name=name)
        assert not regex.matches(tool_name=name)
    assert glob.matches(tool_name="code.*")
    by_tag = RuleMatcher(tag="write")
    assert by_tag.matches(tool_name="code.write_file", tags=["code", "write"])
    assert by_tag.matches(tool_name="code.edit_file", tags=["write"])
    assert not by_tag.matches(tool_name="code.read_file", tags=["readonly"])
    by_path = RuleMatcher(path_prefix=src)
    assert by_path.matches(tool_name="t.x", target_paths=[src / "a" / "b.py"])
    assert by_path.matches(tool_name="t.x", target_paths=[src])
    assert not by_path.matches(tool_name="t.x", target_paths=[tmp_path / "srcx" / "a.py"])
    assert not by_path.matches(tool_name="t.x", target_paths=[])
    assert by_path.matches(tool_name="t.x", target_paths=[tmp_path / "docs", src / "z"])
    both = RuleMatcher(tag="write", path_prefix=src)
    assert both.matches(tool_name="t.x", tags=["write"], target_paths=[src / "a"])
    assert not both.matches(tool_name="t.x", tags=["readonly"], target_paths=[src / "a"])
    assert not both.matches(tool_name="t.x", tags=["write"], target_paths=[tmp_path / "a"])
    assert RuleMatcher().matches(tool_name=None)
