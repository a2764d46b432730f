"""Configuration: ``config.toml`` loading and validation, path placeholders, model profile resolution.

The runtime calls :func:`load_config` in its constructor and hands the :class:`LoadedConfig` to the parts
it wires; model users call :func:`resolve_model` / :func:`resolve_purpose_model`.
"""

from agent_core.config._credentials import check_credentials
from agent_core.config._profiles import ProfileError, ProfileNotFound, resolve_model, resolve_purpose_model
from agent_core.config.loader import LoadedConfig, load_config, resolve_home, resolve_project
from agent_core.config.model import ModelProfile, ResolvedModelConfig, RetryConfig
from agent_core.config.schema import Settings, WorkerSpec, expand_placeholders, worker_entries

__all__ = [
    "LoadedConfig",
    "ModelProfile",
    "ProfileError",
    "ProfileNotFound",
    "ResolvedModelConfig",
    "RetryConfig",
    "Settings",
    "WorkerSpec",
    "check_credentials",
    "expand_placeholders",
    "load_config",
    "resolve_home",
    "resolve_model",
    "resolve_project",
    "resolve_purpose_model",
    "worker_entries",
]
