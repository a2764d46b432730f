"""Per-runtime provider registry (docs/providers.md#the-registry). No global singleton exists.

Keys match ``^[a-z][a-z0-9_-]*$``; registering an existing key replaces it (last registration wins);
an unknown key raises ``ConfigError(config_error)``. ``ProviderRegistry()`` holds exactly the built-in
keys ``openai``, ``anthropic``, ``ollama`` and ``openai_responses``; ``include_builtins=False`` starts
empty.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping

from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import (
    AgentCoreError,
    ConfigError,
    ErrorCode,
    InvalidArgumentError,
    InvalidArgumentTypeError,
)
from agent_core.providers.base import ProviderAdapter, ProviderFactory

PROVIDER_KEY = re.compile(r"^[a-z][a-z0-9_-]*$")


class _Builtin:
    """A built-in adapter class, imported when its key is first used (a run loads only its provider)."""

    __slots__ = ("attribute", "module")

    def __init__(self, module: str, attribute: str) -> None:
        self.module = module
        self.attribute = attribute

    def resolve(self) -> ProviderFactory:
        factory: ProviderFactory = getattr(importlib.import_module(self.module), self.attribute)
        return factory


_BUILTINS = {
    "openai": _Builtin("agent_core.providers._openai_compatible", "OpenAIAdapter"),
    "anthropic": _Builtin("agent_core.providers._anthropic", "AnthropicAdapter"),
    "ollama": _Builtin("agent_core.providers._ollama", "OllamaAdapter"),
    "openai_responses": _Builtin("agent_core.providers._openai_responses", "OpenAIResponsesAdapter"),
}


def builtin_factories() -> dict[str, ProviderFactory]:
    """The built-in adapter classes by key."""
    return {key: builtin.resolve() for key, builtin in _BUILTINS.items()}


class ProviderRegistry:
    """Maps provider keys to adapter classes or factories taking a :class:`ResolvedModelConfig`."""

    def __init__(
        self, factories: Mapping[str, ProviderFactory] | None = None, *, include_builtins: bool = True
    ) -> None:
        self._factories: dict[str, ProviderFactory | _Builtin] = {}
        if include_builtins:
            self._factories.update(_BUILTINS)
        for key, factory in (factories or {}).items():
            self.register(key, factory)

    def register(self, key: str, factory: ProviderFactory) -> None:
        """Adds or replaces ``key``. Misuse is a ``validation_error``: a key that is not a str or a
        non-callable factory raises :class:`~agent_core.errors.InvalidArgumentTypeError` (a ``TypeError``),
        a malformed key :class:`~agent_core.errors.InvalidArgumentError` (a ``ValueError``)."""
        if not isinstance(key, str):
            raise InvalidArgumentTypeError(
                ErrorCode.validation_error, f"a provider key must be a str, not {type(key).__name__}"
            )
        if not PROVIDER_KEY.match(key):
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"invalid provider key {key!r}: must match {PROVIDER_KEY.pattern}",
            )
        if not callable(factory):
            raise InvalidArgumentTypeError(
                ErrorCode.validation_error, f"provider factory for {key!r} is not callable"
            )
        self._factories[key] = factory

    def ensure_builtins(self) -> None:
        """Adds the built-in adapters for the keys this registry lacks
        (docs/architecture.md#assembling-an-open-runtime)."""
        for key, builtin in _BUILTINS.items():
            self._factories.setdefault(key, builtin)

    def get(self, key: str) -> ProviderFactory:
        try:
            factory = self._factories[key]
        except (KeyError, TypeError):
            raise ConfigError(
                ErrorCode.config_error,
                f"unknown model provider {key!r}; registered providers: {sorted(self._factories)}",
            ) from None
        if isinstance(factory, _Builtin):
            factory = self._factories[key] = factory.resolve()
        return factory

    def create(self, config: ResolvedModelConfig) -> ProviderAdapter:
        """Builds an adapter for ``config.provider``; factory failures become ``config_error``."""
        factory = self.get(config.provider)
        try:
            adapter = factory(config)
        except AgentCoreError:
            raise
        except Exception as exc:
            raise ConfigError(
                ErrorCode.config_error,
                f"provider factory {config.provider!r} failed: {type(exc).__name__}: {exc}",
                cause=exc,
            ) from exc
        if not callable(getattr(adapter, "stream", None)) or not callable(getattr(adapter, "close", None)):
            raise ConfigError(
                ErrorCode.config_error,
                f"provider factory {config.provider!r} returned {type(adapter).__name__}, "
                "which lacks stream()/close()",
            )
        return adapter

    def keys(self) -> list[str]:
        return list(self._factories)

    def __contains__(self, key: object) -> bool:
        return key in self._factories

    def __repr__(self) -> str:
        return f"ProviderRegistry(keys={self.keys()!r})"
