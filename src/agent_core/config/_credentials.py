"""The startup check of API-key variables (issue 32 item 8).

Every model the configuration defines — ``[model]``, each ``[model_overrides.<name>]`` and the inline
profile tables (``compact.model_profile``, ``memory.extract_model_profile``,
``memory.recall_model_profile``) — whose effective ``api_key_env`` names a variable needs that variable
set and non-empty. :func:`check_credentials` raises one ``ConfigError(config_error)`` naming the variable,
the config key that names it and the config file, before anything is opened (no session is created).
The value is only tested for emptiness; it is never read into a message, a log or storage.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from agent_core.config.model import ModelProfile
from agent_core.errors import ConfigError, ErrorCode

if TYPE_CHECKING:
    from agent_core.config.loaded import LoadedConfig


def _key_variables(config: LoadedConfig) -> Iterator[tuple[str, str, str]]:
    """``(variable, config key, provider)`` of every configured model that names an API-key variable."""
    settings = config.settings
    main = settings.model
    yield main.api_key_env, "model.api_key_env", main.provider
    profiles: list[tuple[str, object]] = [
        (f"model_overrides.{name}", profile) for name, profile in settings.model_overrides.items()
    ]
    profiles += [
        ("compact.model_profile", settings.compact.model_profile),
        ("memory.extract_model_profile", settings.memory.extract_model_profile),
        ("memory.recall_model_profile", settings.memory.recall_model_profile),
    ]
    for key, profile in profiles:
        if not isinstance(profile, ModelProfile):
            continue  # a profile name (checked as its [model_overrides.<name>] table) or unset
        provider = profile.provider or main.provider
        if profile.api_key_env is not None:
            yield profile.api_key_env, f"{key}.api_key_env", provider
        else:  # the profile inherits the main model's variable
            yield main.api_key_env, "model.api_key_env", provider


def check_credentials(config: LoadedConfig, environ: Mapping[str, str] | None = None) -> None:
    """Raises ``ConfigError`` for the first configured API-key variable that is unset or empty."""
    env = os.environ if environ is None else environ
    for variable, key, provider in _key_variables(config):
        if variable and not env.get(variable):
            raise ConfigError(
                ErrorCode.config_error,
                f"environment variable {variable} is not set or empty: it holds the API key of the "
                f"{provider!r} model ({key} = {variable!r} in {config.config_path}); set it, or change {key}",
                details={"variable": variable, "key": key, "config_path": str(config.config_path)},
            )
