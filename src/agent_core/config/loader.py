"""Loads the user-level ``config.toml`` (docs/configuration.md#home-and-project,
docs/configuration.md#value-rules): home, config path and project resolution.

:func:`load_config` is synchronous, only reads, and creates nothing on disk. Every failure is a
``ConfigError(config_error)`` whose message names the config file (and the offending key path, e.g.
``tools.allowed_write_roots[0]``). ``<project>/.soong-agent/config.toml`` is never read.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent_core.config._profiles import validate_profiles
from agent_core.config.loaded import LoadedConfig
from agent_core.config.schema import Settings, expand_placeholders, format_validation_error
from agent_core.errors import ConfigError, ErrorCode

HOME_ENV = "SOONG_AGENT_HOME"
HOME_DIRNAME = ".soong-agent"
CONFIG_FILENAME = "config.toml"
SESSION_DB_FILENAME = "sessions.sqlite"

__all__ = [
    "CONFIG_FILENAME",
    "HOME_ENV",
    "LoadedConfig",
    "expand_placeholders",
    "format_validation_error",
    "load_config",
    "resolve_home",
    "resolve_project",
]


def resolve_home(home_dir: str | Path | None = None) -> Path:
    """``home_dir`` → env ``SOONG_AGENT_HOME`` (non-empty) → ``~/.soong-agent``; resolved, never created."""
    if home_dir is not None:
        chosen = Path(home_dir).expanduser()
    elif os.environ.get(HOME_ENV):
        chosen = Path(os.environ[HOME_ENV]).expanduser()
    else:
        try:
            chosen = Path.home() / HOME_DIRNAME
        except RuntimeError as exc:
            raise ConfigError(
                ErrorCode.config_error,
                f"cannot determine the soong-agent home: {HOME_ENV} is unset and the OS home is unknown",
                cause=exc,
            ) from exc
    return chosen.resolve()


def resolve_project(project_dir: str | Path | None = None) -> Path:
    """``None`` → cwd; a file → its parent; must exist; symlinks resolved. Missing → ``config_error``."""
    raw = Path.cwd() if project_dir is None else Path(project_dir).expanduser()
    try:
        resolved = raw.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise ConfigError(
            ErrorCode.config_error,
            f"project directory does not exist or is not accessible: {raw}",
            details={"project_dir": str(raw)},
            cause=exc,
        ) from exc
    return resolved if resolved.is_dir() else resolved.parent


MINIMAL_CONFIG = """\
[model]
provider = "ollama"                  # or "openai" (also llama.cpp, vLLM: set base_url), "anthropic"
base_url = "http://127.0.0.1:11434"  # openai: https://api.openai.com/v1, anthropic: https://api.anthropic.com
name = "gemma4"                      # the model's name on that server
api_key_env = ""                     # openai/anthropic: the variable holding the key, e.g. "OPENAI_API_KEY"
context_window = 8192
"""
"""The smallest working ``config.toml`` (a local Ollama), shown when the file is missing."""


def _missing_config(config_path: Path, cause: BaseException) -> ConfigError:
    """The missing-config error: one line naming the file and the packaged template; ``details`` carry the
    template's path and :data:`MINIMAL_CONFIG` (the CLI prints it under the line). Nothing is created."""
    from agent_core._asset_loader import CONFIG_TEMPLATE_ID, packaged_location

    template = packaged_location(CONFIG_TEMPLATE_ID)
    return ConfigError(
        ErrorCode.config_error,
        f"config file not found: {config_path} (soong-agent never creates one): create it with at least a "
        f"[model] table, e.g. the minimal config below, or start from the commented template {template}",
        details={
            "config_path": str(config_path),
            "template_path": template,
            "minimal_config": MINIMAL_CONFIG,
        },
        cause=cause,
    )


def _read_toml(config_path: Path) -> dict[str, Any]:
    try:
        data = config_path.read_bytes()
    except FileNotFoundError as exc:
        raise _missing_config(config_path, exc) from exc
    except OSError as exc:
        reason = "is a directory" if isinstance(exc, IsADirectoryError) else (exc.strerror or str(exc))
        raise ConfigError(
            ErrorCode.config_error,
            f"cannot read config file {config_path}: {reason}",
            details={"config_path": str(config_path)},
            cause=exc,
        ) from exc
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            ErrorCode.config_error,
            f"invalid config file {config_path}: not valid UTF-8 ({exc.reason} at byte {exc.start})",
            details={"config_path": str(config_path)},
            cause=exc,
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            ErrorCode.config_error,
            f"invalid TOML in config file {config_path}: {exc}",
            details={"config_path": str(config_path)},
            cause=exc,
        ) from exc


def load_config(
    *,
    home_dir: str | Path | None = None,
    config_path: str | Path | None = None,
    project_dir: str | Path | None = None,
    session_db_path: str | Path | None = None,
) -> LoadedConfig:
    """Resolves home, config file and project, parses and validates ``config.toml``; creates nothing.

    Raises ``ConfigError(config_error)`` for a missing/unreadable file, TOML errors, schema errors (message:
    config path + key path + reason), an unknown ``model_overrides`` reference, an invalid resolved model
    profile, or a missing project directory.
    """
    home = resolve_home(home_dir)
    path = Path(config_path).expanduser().absolute() if config_path is not None else home / CONFIG_FILENAME
    raw = _read_toml(path)
    project = resolve_project(project_dir)
    try:
        settings = Settings.model_validate(raw, strict=True, context={"home": home, "project": project})
    except ValidationError as exc:
        message, items = format_validation_error(exc, str(path))
        raise ConfigError(
            ErrorCode.config_error, message, details={"config_path": str(path), "errors": items}, cause=exc
        ) from exc
    if session_db_path is not None:
        db_path = Path(session_db_path).expanduser().absolute()
        settings = settings.model_copy(
            update={"context": settings.context.model_copy(update={"session_db_path": db_path})}
        )
    loaded = LoadedConfig(
        home=home,
        project=project,
        config_path=path,
        settings=settings,
        session_db_path=settings.context.session_db_path,
    )
    validate_profiles(loaded)
    return loaded
