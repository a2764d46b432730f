"""load_config: home / config / project resolution, file errors, nothing created
(docs/configuration.md#home-and-project, area B)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agent_core.config import LoadedConfig, load_config
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from tests.fixtures.env import REMOVE, SoongEnv


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _fails(tmp_path: Path, **kwargs: object) -> ConfigError:
    """Calls load_config expecting config_error and asserts nothing was created under tmp_path."""
    before = _tree(tmp_path)
    with pytest.raises(ConfigError) as info:
        load_config(**kwargs)  # type: ignore[arg-type]
    assert info.value.code == ErrorCode.config_error
    assert isinstance(info.value, AgentCoreError)
    assert _tree(tmp_path) == before
    return info.value


@pytest.fixture
def os_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A per-test OS home (HOME) so decoys under ``~/.soong-agent`` never leak between tests."""
    home = (tmp_path / "oshome").resolve()
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def _write_config(directory: Path, model_name: str) -> Path:
    env = SoongEnv(home=directory, project=directory)
    directory.mkdir(parents=True, exist_ok=True)
    return env.write_config(model={"name": model_name})


def test_missing_config_fails_and_creates_nothing(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case B1."""
    err = _fails(tmp_path, project_dir=soong_env.project)
    assert str(soong_env.home / "config.toml") in err.message
    assert "not found" in err.message
    assert not (soong_env.home / "config.toml").exists()
    assert not (soong_env.home / "sessions.sqlite").exists()
    assert not (soong_env.project / ".soong-agent").exists()
    assert err.details["config_path"] == str(soong_env.home / "config.toml")


def test_invalid_toml_names_config_path(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case B2."""
    soong_env.write_config(raw="[model\nprovider = 'fake'\n")
    err = _fails(tmp_path, project_dir=soong_env.project)
    assert str(soong_env.config_path) in err.message
    assert "invalid TOML" in err.message
    assert "line 1" in err.message


def test_non_utf8_and_directory_config_are_config_errors(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case B2."""
    soong_env.config_path.write_bytes(b"[model]\nname = '\xff'\n")
    err = _fails(tmp_path, project_dir=soong_env.project)
    assert str(soong_env.config_path) in err.message and "UTF-8" in err.message
    soong_env.config_path.unlink()
    soong_env.config_path.mkdir()
    err = _fails(tmp_path, project_dir=soong_env.project)
    assert str(soong_env.config_path) in err.message


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"model": {"provider": REMOVE}}, "model.provider"),
        ({"model": {"name": REMOVE}}, "model.name"),
        ({"surprise": {"x": 1}}, "surprise"),
        ({"context": {"unknown_key": 1}}, "context.unknown_key"),
        ({"runtime": {"cancel_timeout_ms": "x"}}, "runtime.cancel_timeout_ms"),
        ({"model": {"provider": ""}}, "model.provider"),
    ],
)
def test_schema_invalid_fails_with_key_path(
    soong_env: SoongEnv, tmp_path: Path, overrides: dict[str, object], key: str
) -> None:
    """Case B3."""
    soong_env.write_config(**overrides)
    err = _fails(tmp_path, project_dir=soong_env.project)
    assert str(soong_env.config_path) in err.message
    assert f"{key}: " in err.message
    assert "validation error" not in err.message.lower() and "errors.pydantic.dev" not in err.message
    assert [item["key"] for item in err.details["errors"]] == [key]
    assert not (soong_env.home / "sessions.sqlite").exists()


def test_soong_agent_home_beats_os_home_decoy(soong_env: SoongEnv, os_home: Path) -> None:
    """Case B4."""
    decoy = os_home / ".soong-agent" / "config.toml"
    decoy.parent.mkdir()
    decoy.write_text("this is [not toml", encoding="utf-8")
    soong_env.write_config(model={"name": "home-model"})
    loaded = load_config(project_dir=soong_env.project)
    assert loaded.home == soong_env.home
    assert loaded.settings.model.name == "home-model"
    assert loaded.session_db_path == soong_env.home / "sessions.sqlite"
    assert _tree(os_home) == [".soong-agent", ".soong-agent/config.toml"]


def test_default_home_is_os_home_dot_soong_agent(
    os_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case B5."""
    monkeypatch.delenv("SOONG_AGENT_HOME", raising=False)
    project = tmp_path / "project"
    project.mkdir()
    _write_config(os_home / ".soong-agent", "default-home-model")
    loaded = load_config(project_dir=project)
    assert loaded.home == os_home / ".soong-agent"
    assert loaded.config_path == os_home / ".soong-agent" / "config.toml"
    assert loaded.settings.model.name == "default-home-model"


def test_precedence_home_dir_env_default(
    os_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case B5."""
    project = tmp_path / "project"
    project.mkdir()
    _write_config(os_home / ".soong-agent", "default-model")
    _write_config(tmp_path / "env_home", "env-model")
    _write_config(tmp_path / "arg_home", "arg-model")
    monkeypatch.setenv("SOONG_AGENT_HOME", str(tmp_path / "env_home"))
    assert load_config(home_dir=tmp_path / "arg_home", project_dir=project).settings.model.name == "arg-model"
    assert load_config(project_dir=project).settings.model.name == "env-model"
    monkeypatch.setenv("SOONG_AGENT_HOME", "")
    assert load_config(project_dir=project).settings.model.name == "default-model"
    monkeypatch.delenv("SOONG_AGENT_HOME")
    assert load_config(project_dir=project).settings.model.name == "default-model"


def test_explicit_config_path_replaces_home_config(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case B5."""
    soong_env.write_config(model={"name": "home-model"})
    other = _write_config(tmp_path / "elsewhere", "explicit-model")
    loaded = load_config(config_path=other, project_dir=soong_env.project)
    assert loaded.settings.model.name == "explicit-model"
    assert loaded.config_path == other
    assert loaded.home == soong_env.home  # the home (and its placeholders) stays the resolved home
    assert loaded.settings.context.session_db_path == soong_env.home / "sessions.sqlite"
    err = _fails(tmp_path, config_path=tmp_path / "missing.toml", project_dir=soong_env.project)
    assert str(tmp_path / "missing.toml") in err.message


def test_relative_config_path_resolves_against_cwd(
    soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case B5."""
    _write_config(tmp_path / "rel", "rel-model")
    monkeypatch.chdir(tmp_path)
    loaded = load_config(config_path="rel/config.toml", project_dir=soong_env.project)
    assert loaded.config_path == tmp_path / "rel" / "config.toml"
    assert loaded.settings.model.name == "rel-model"


def test_project_defaults_to_resolved_cwd(
    soong_env: SoongEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Case B6."""
    soong_env.write_config()
    link = tmp_path / "cwd_link"
    link.symlink_to(soong_env.project, target_is_directory=True)
    monkeypatch.chdir(link)
    loaded = load_config()
    assert loaded.project == soong_env.project
    assert loaded.settings.task.wal_dir == soong_env.project / ".soong-agent" / "tasks"


def test_project_file_resolves_to_parent(soong_env: SoongEnv) -> None:
    """Case B7."""
    soong_env.write_config()
    target = soong_env.write_project("src/a.py", "MARKER_7f3a\n")
    loaded = load_config(project_dir=target)
    assert loaded.project == soong_env.project / "src"
    assert loaded.settings.plan.default_dir == soong_env.project / "src" / ".soong-agent" / "plans"


def test_missing_project_dir_fails_and_creates_nothing(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case B8."""
    soong_env.write_config()
    missing = tmp_path / "nope" / "deeper"
    err = _fails(tmp_path, project_dir=missing)
    assert str(missing) in err.message
    assert not missing.exists() and not (tmp_path / "nope").exists()
    assert not any(p.name == ".soong-agent" for p in tmp_path.rglob("*"))


def test_project_config_is_never_read(soong_env: SoongEnv) -> None:
    """Case B9."""
    soong_env.write_config(model={"name": "user-model", "provider": "fake"})
    soong_env.write_project(
        ".soong-agent/config.toml",
        '[model]\nprovider = "openai"\nbase_url = "http://x"\napi_key_env = "P"\nname = "project-model"\n'
        "[model_overrides.project_only]\nname = 'p'\n",
    )
    loaded = load_config(project_dir=soong_env.project)
    assert loaded.settings.model.name == "user-model"
    assert loaded.settings.model.provider == "fake"
    assert loaded.settings.model.api_key_env == ""
    assert "project_only" not in loaded.settings.model_overrides
    # even an invalid project config is ignored silently
    soong_env.write_project(".soong-agent/config.toml", "not [ toml")
    assert load_config(project_dir=soong_env.project).settings.model.name == "user-model"


def test_symlinked_project_and_home_are_stored_resolved(soong_env: SoongEnv, tmp_path: Path) -> None:
    """Case B11."""
    soong_env.write_config()
    project_link = tmp_path / "project_link"
    project_link.symlink_to(soong_env.project, target_is_directory=True)
    home_link = tmp_path / "home_link"
    home_link.symlink_to(soong_env.home, target_is_directory=True)
    loaded = load_config(home_dir=home_link, project_dir=project_link)
    assert loaded.project == soong_env.project
    assert loaded.home == soong_env.home
    assert loaded.settings.memory.memory_dir == soong_env.home / "memory"
    assert loaded.settings.task.wal_dir == soong_env.project / ".soong-agent" / "tasks"


def test_session_db_path_argument_beats_config_and_default(soong_env: SoongEnv, tmp_path: Path) -> None:
    soong_env.write_config(context={"session_db_path": "<project>/db/s.sqlite"})
    loaded = load_config(project_dir=soong_env.project)
    assert loaded.session_db_path == soong_env.project / "db" / "s.sqlite"
    explicit = tmp_path / "explicit.sqlite"
    loaded = load_config(project_dir=soong_env.project, session_db_path=explicit)
    assert loaded.session_db_path == explicit
    assert loaded.settings.context.session_db_path == explicit
    assert not explicit.exists() and not (soong_env.project / "db").exists()
    soong_env.write_config(context={"session_db_path": REMOVE})
    assert load_config(project_dir=soong_env.project).session_db_path == soong_env.home / "sessions.sqlite"


def test_loaded_config_is_frozen_and_success_creates_nothing(soong_env: SoongEnv, tmp_path: Path) -> None:
    soong_env.write_config()
    before = _tree(tmp_path)
    loaded = load_config(project_dir=soong_env.project)
    assert _tree(tmp_path) == before
    assert isinstance(loaded, LoadedConfig)
    with pytest.raises(AttributeError):
        loaded.home = tmp_path  # type: ignore[misc]


def test_missing_home_directory_reports_expected_config_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    ghost = tmp_path / "ghost_home"
    monkeypatch.setenv("SOONG_AGENT_HOME", str(ghost))
    err = _fails(tmp_path, project_dir=project)
    assert str(ghost / "config.toml") in err.message
    assert not ghost.exists()


def test_home_dir_with_tilde_expands_os_home(os_home: Path, tmp_path: Path) -> None:
    _write_config(os_home / "custom", "tilde-model")
    project = tmp_path / "project"
    project.mkdir()
    loaded = load_config(home_dir="~/custom", project_dir=project)
    assert loaded.home == os_home / "custom"
    assert os.fspath(loaded.config_path) == os.fspath(os_home / "custom" / "config.toml")
