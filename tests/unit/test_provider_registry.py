"""Provider registry (docs/providers.md#the-registry; cases C1 and C11 registry halves)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import agent_core
from agent_core.config.model import ResolvedModelConfig
from agent_core.errors import ConfigError, ErrorCode, InvalidArgumentError, InvalidArgumentTypeError
from agent_core.providers import ProviderAdapter, ProviderRegistry
from agent_core.providers._anthropic import AnthropicAdapter
from agent_core.providers._ollama import OllamaAdapter
from agent_core.providers._openai_compatible import OpenAIAdapter
from agent_core.providers._openai_responses import OpenAIResponsesAdapter
from agent_core.types.model import ModelEvent, ModelFailed, ModelMessage, ModelRequest, ProviderErrorPayload
from tests.fixtures.provider_requests import model_config


class RecordingAdapter:
    """Minimal custom adapter used to check the factory contract."""

    provider_key = "custom"

    def __init__(self, config: ResolvedModelConfig) -> None:
        self.config = config
        self.closed = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        yield ModelFailed(
            error=ProviderErrorPayload(
                type="internal", code="internal_error", message="unused", retryable=False
            )
        )

    async def close(self) -> None:
        self.closed += 1


def test_builtin_keys_exact() -> None:
    """Cases C1, C11."""
    registry = ProviderRegistry()
    assert sorted(registry.keys()) == ["anthropic", "ollama", "openai", "openai_responses"]
    assert registry.get("openai") is OpenAIAdapter
    assert registry.get("anthropic") is AnthropicAdapter
    assert registry.get("ollama") is OllamaAdapter
    assert registry.get("openai_responses") is OpenAIResponsesAdapter
    assert "openai" in registry and "fake" not in registry
    assert ProviderRegistry(include_builtins=False).keys() == []


def test_caller_registry_gets_missing_builtins() -> None:
    registry = ProviderRegistry({"fake": RecordingAdapter}, include_builtins=False)
    assert registry.keys() == ["fake"]
    registry.ensure_builtins()
    assert sorted(registry.keys()) == ["anthropic", "fake", "ollama", "openai", "openai_responses"]
    custom_openai = ProviderRegistry({"openai": RecordingAdapter}, include_builtins=False)
    custom_openai.ensure_builtins()
    assert custom_openai.get("openai") is RecordingAdapter  # the caller's entry is kept


def test_custom_factory_receives_resolved_config() -> None:
    """Case C1."""
    seen: list[ResolvedModelConfig] = []

    def factory(config: ResolvedModelConfig) -> ProviderAdapter:
        seen.append(config)
        return RecordingAdapter(config)

    registry = ProviderRegistry()
    registry.register("custom", factory)
    config = model_config("custom", "http://127.0.0.1:1", name="m1", max_attempts=5)
    adapter = registry.create(config)
    assert isinstance(adapter, RecordingAdapter)
    assert seen == [config]
    assert seen[0].name == "m1" and seen[0].retry.max_attempts == 5 and seen[0].context_window == 8192
    assert isinstance(adapter, ProviderAdapter)


def test_registries_are_independent_and_last_registration_wins() -> None:
    """Case C1."""
    first, second = ProviderRegistry(), ProviderRegistry()
    first.register("custom", RecordingAdapter)
    assert "custom" in first and "custom" not in second

    def other(config: ResolvedModelConfig) -> ProviderAdapter:
        return RecordingAdapter(config)

    first.register("custom", other)
    assert first.get("custom") is other


@pytest.mark.parametrize("key", ["", "Openai", "1abc", "a.b", "a b", "é", "_x"])
def test_registry_rejects_bad_keys(key: str) -> None:
    """A malformed key is the caller's misuse: a ``ValueError`` (code ``validation_error``), not config."""
    with pytest.raises(InvalidArgumentError) as info:
        ProviderRegistry().register(key, RecordingAdapter)
    assert isinstance(info.value, ValueError)
    assert info.value.code == ErrorCode.validation_error


def test_registry_accepts_valid_keys_and_rejects_non_callables() -> None:
    registry = ProviderRegistry(include_builtins=False)
    for key in ("a", "my-gw", "gw_2"):
        registry.register(key, RecordingAdapter)
    assert registry.keys() == ["a", "my-gw", "gw_2"]
    with pytest.raises(TypeError) as info:
        registry.register("b", "not callable")  # type: ignore[arg-type]
    assert isinstance(info.value, InvalidArgumentTypeError) and info.value.code == ErrorCode.validation_error
    with pytest.raises(InvalidArgumentTypeError):
        registry.register(7, RecordingAdapter)  # type: ignore[arg-type]


def test_registry_unknown_key_is_config_error() -> None:
    registry = ProviderRegistry()
    with pytest.raises(ConfigError) as info:
        registry.get("nope")
    assert info.value.code == ErrorCode.config_error and "nope" in info.value.message
    with pytest.raises(ConfigError):
        registry.create(model_config("nope", ""))


def test_registry_create_wraps_factory_failures() -> None:
    def broken(config: ResolvedModelConfig) -> ProviderAdapter:
        raise RuntimeError("cannot build")

    def not_an_adapter(config: ResolvedModelConfig) -> Any:
        return object()

    registry = ProviderRegistry({"broken": broken, "odd": not_an_adapter})
    with pytest.raises(ConfigError, match="cannot build") as info:
        registry.create(model_config("broken", ""))
    assert info.value.code == ErrorCode.config_error
    with pytest.raises(ConfigError, match="stream"):
        registry.create(model_config("odd", ""))


def test_registry_create_builds_builtin_adapter_from_config() -> None:
    adapter = ProviderRegistry().create(model_config("ollama", "http://127.0.0.1:9/"))
    assert isinstance(adapter, OllamaAdapter)
    assert adapter.provider_key == "ollama"
    assert adapter.base_url == "http://127.0.0.1:9"  # trailing slash stripped
    assert OpenAIAdapter(model_config("openai", "")).base_url == "https://api.openai.com/v1"
    assert AnthropicAdapter(model_config("anthropic", "")).base_url == "https://api.anthropic.com"
    assert OllamaAdapter(model_config("ollama", "")).base_url == "http://127.0.0.1:11434"


def test_protocol_types_forbid_unknown_fields_and_roles() -> None:
    with pytest.raises(ValidationError, match="unknown_field"):
        ModelRequest(model="m", messages=[], unknown_field=1)  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        ModelMessage(role="skill_context", content=[])  # type: ignore[arg-type]


def test_no_test_provider_in_package() -> None:
    """Case C11: No runtime module defines a fake/mock/test provider; the fake helper is not importable.

    docs/testing.md#testing-your-agents adds the public testing kit ``agent_core.testing`` (FunctionModel,
    TestModel, cassettes): it is the one place such providers live, it is never a built-in registry key and
    ``import agent_core`` does not load it.
    """
    pattern = re.compile(r"class\s+\w*(Fake|Mock|Dummy|Test)\w*(Adapter|Provider)\b")
    root = Path(agent_core.__file__).parent
    kit = root / "testing"
    offenders = [
        p
        for p in root.rglob("*.py")
        if kit not in p.parents and pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []
    code = "import sys, agent_core; print(any(m.startswith('agent_core.testing') for m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
    modules = {m.name for m in pkgutil.walk_packages([str(root)], prefix="agent_core.")}
    assert not [m for m in modules if re.search(r"fake|mock", m, re.I)]
    with pytest.raises(ImportError):
        importlib.import_module("agent_core.providers.fake")
