"""``open_runtime``: an ``AgentRuntime`` on a test model, without a user config file or a model server.

The runtime gets a private home (a temporary directory, or ``home_dir`` when given, which must not already
hold a ``config.toml``) with a generated ``config.toml`` whose ``[model]`` names the test model's provider
key; the model is registered under that key. ``config`` deep-merges extra settings into the generated file
(e.g. ``{"tools": {"disabled": ["code.bash"]}}``). Memory extraction is off unless ``config`` enables it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from agent_core._api.runtime import AgentRuntime
from agent_core._private_fs import make_private_dirs
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import ConfigError, ErrorCode
from agent_core.providers.base import ProviderAdapter
from agent_core.providers.registry import ProviderRegistry


class TestingProvider(Protocol):
    """What :func:`open_runtime` accepts: a provider key, a model name and a provider factory."""

    provider_key: str
    model_name: str

    def factory(self, config: ResolvedModelConfig) -> ProviderAdapter: ...


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _toml_value(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return json.dumps(value)  # JSON strings and numbers are valid TOML
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    if isinstance(value, Mapping):
        items = ", ".join(
            f"{json.dumps(str(k))} = {_toml_value(v, f'{where}.{k}')}" for k, v in value.items()
        )
        return "{" + items + "}"
    raise ConfigError(
        ErrorCode.config_error, f"open_runtime config value at {where} is a {type(value).__name__}"
    )


def config_toml(settings: Mapping[str, Any]) -> str:
    """``settings`` (top-level tables) as TOML text, one ``key = value`` line per entry of each table."""
    lines: list[str] = []
    for table, body in settings.items():
        if not isinstance(body, Mapping):
            raise ConfigError(ErrorCode.config_error, f"open_runtime config key {table!r} must be a table")
        lines.append(f"[{table}]")
        lines.extend(f"{json.dumps(str(k))} = {_toml_value(v, f'{table}.{k}')}" for k, v in body.items())
        lines.append("")
    return "\n".join(lines)


@asynccontextmanager
async def open_runtime(
    model: TestingProvider,
    *,
    project_dir: str | Path,
    home_dir: str | Path | None = None,
    config: Mapping[str, Any] | None = None,
    **runtime_kwargs: Any,
) -> AsyncIterator[AgentRuntime]:
    """An open ``AgentRuntime`` whose model is ``model`` (a FunctionModel, TestModel or cassette).

    ``runtime_kwargs`` go to ``AgentRuntime`` (``permission_callback``, ``tool_registry``, ``debug``).
    The runtime is closed, and a temporary home removed, when the block exits.
    """
    settings: dict[str, Any] = {
        "model": {"provider": model.provider_key, "name": model.model_name, "context_window": 200_000},
        "memory": {"enabled": False},
    }
    settings = _merge(settings, config or {})
    with tempfile.TemporaryDirectory(prefix="soong-testing-") as scratch:
        home = Path(home_dir) if home_dir is not None else Path(scratch)
        config_path = home / "config.toml"
        if config_path.exists():
            raise ConfigError(
                ErrorCode.config_error,
                f"{config_path} already exists; open_runtime writes its own config into a fresh home "
                "(pass an empty home_dir or none)",
                details={"config_path": str(config_path)},
            )
        make_private_dirs(home)  # like a home the runtime creates: 0700 (an existing one is left alone)
        config_path.write_text(config_toml(settings), encoding="utf-8")
        registry = runtime_kwargs.pop("provider_registry", None) or ProviderRegistry()
        registry.register(model.provider_key, model.factory)
        runtime = AgentRuntime(
            project_dir=project_dir, home_dir=home, provider_registry=registry, **runtime_kwargs
        )
        async with runtime:
            yield runtime
