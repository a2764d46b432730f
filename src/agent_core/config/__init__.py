"""Configuration: ``config.toml`` loading and validation, path placeholders, model profile resolution.

The runtime calls :func:`load_config` in its constructor and hands the :class:`LoadedConfig` to the parts
it wires; model users call :func:`resolve_model` / :func:`resolve_purpose_model`.
"""

from typing import TYPE_CHECKING, Any

from agent_core.config._credentials import check_credentials
from agent_core.config._profiles import ProfileError, ProfileNotFound, resolve_model, resolve_purpose_model
from agent_core.config.loader import LoadedConfig, load_config, resolve_home, resolve_project
from agent_core.config.model import ModelProfile, ResolvedModelConfig, RetryConfig
from agent_core.config.schema import Settings, WorkerSpec, expand_placeholders, worker_entries

if TYPE_CHECKING:
    from agent_core.config._pricing import Prices as Prices
    from agent_core.config._pricing import configured_prices as configured_prices
    from agent_core.config._pricing import cost_usd as cost_usd
    from agent_core.config._redacted import redacted_config as redacted_config

_LAZY = {
    "Prices": "agent_core.config._pricing",
    "configured_prices": "agent_core.config._pricing",
    "cost_usd": "agent_core.config._pricing",
    "redacted_config": "agent_core.config._redacted",
}
"""Public names loaded on first use (pricing and the redacted view are for surfaces: serve's trace and
config views): ``Prices`` / ``configured_prices(config)`` / ``cost_usd(usage, prices)`` price a run's usage
with the ``[model] prices`` of each profile; ``redacted_config(config)`` is the settings with secrets masked."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "LoadedConfig",
    "ModelProfile",
    "Prices",
    "ProfileError",
    "ProfileNotFound",
    "ResolvedModelConfig",
    "RetryConfig",
    "Settings",
    "WorkerSpec",
    "check_credentials",
    "configured_prices",
    "cost_usd",
    "expand_placeholders",
    "load_config",
    "redacted_config",
    "resolve_home",
    "resolve_model",
    "resolve_project",
    "resolve_purpose_model",
    "worker_entries",
]
