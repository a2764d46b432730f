"""Model profile resolution (docs/providers.md#model-profiles, docs/configuration.md#model-profiles;
docs/configuration.md)."""

from __future__ import annotations

from typing import Any

import pytest

from agent_core.config import (
    LoadedConfig,
    ModelProfile,
    ProfileError,
    ProfileNotFound,
    ResolvedModelConfig,
    load_config,
    resolve_model,
    resolve_purpose_model,
)
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from tests.fixtures.env import REMOVE, SoongEnv

MAIN_FIELDS = (
    "provider",
    "base_url",
    "api_key_env",
    "name",
    "context_window",
    "max_output_tokens",
    "temperature",
    "timeout_ms",
    "retry",
)


def _load(env: SoongEnv, **overrides: Any) -> LoadedConfig:
    env.write_config(**overrides)
    return load_config(project_dir=env.project)


def _main_values(loaded: LoadedConfig) -> dict[str, Any]:
    model = loaded.settings.model
    return {key: getattr(model, key) for key in MAIN_FIELDS}


def _values(resolved: ResolvedModelConfig) -> dict[str, Any]:
    return {key: getattr(resolved, key) for key in MAIN_FIELDS}


def test_compact_profile_replaces_only_its_keys_and_merges_retry(soong_env: SoongEnv) -> None:
    loaded = _load(
        soong_env,
        model={
            "temperature": 0.7,
            "retry": {"max_attempts": 4, "initial_backoff_ms": 10, "max_backoff_ms": 50},
        },
        model_overrides={
            "compact": {"max_output_tokens": 2048, "temperature": REMOVE, "retry": {"max_attempts": 9}}
        },
        compact={"model_profile": "compact"},
    )
    resolved = resolve_purpose_model(loaded, "compact")
    expected = _main_values(loaded)
    expected["max_output_tokens"] = 2048
    expected["retry"] = expected["retry"].model_copy(update={"max_attempts": 9})
    assert _values(resolved) == expected
    assert resolved.retry.initial_backoff_ms == 10 and resolved.retry.max_backoff_ms == 50
    assert (resolved.purpose, resolved.profile) == ("compact", "compact")
    assert resolved.source == (
        f"{soong_env.config_path}: [model] + [model_overrides.compact] (via compact.model_profile)"
    )


def test_compact_without_profile_uses_main_model(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env, compact={"model_profile": REMOVE})
    resolved = resolve_purpose_model(loaded, "compact")
    assert _values(resolved) == _main_values(loaded)
    assert resolved.profile is None
    assert resolved.source == f"{soong_env.config_path}: [model]"


def test_provider_change_inherits_base_url_and_key_env(soong_env: SoongEnv) -> None:
    loaded = _load(
        soong_env,
        model={"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "K"},
        model_overrides={"other": {"provider": "anthropic", "name": "n2"}},
    )
    resolved = resolve_model(loaded, purpose="sub", profile="other")
    assert (resolved.provider, resolved.name) == ("anthropic", "n2")
    assert (resolved.base_url, resolved.api_key_env) == ("http://127.0.0.1:9/v1", "K")


@pytest.mark.parametrize(
    "overrides",
    [
        {"compact": {"model_profile": "nope"}},
        {"memory": {"extract_model_profile": "ghost"}},
        {"memory": {"recall_model_profile": "memory"}},
    ],
)
def test_unknown_profile_name_in_config_fails_load(soong_env: SoongEnv, overrides: dict[str, Any]) -> None:
    soong_env.write_config(**overrides)
    with pytest.raises(ConfigError) as info:
        load_config(project_dir=soong_env.project)
    assert info.value.code == ErrorCode.config_error
    assert str(soong_env.config_path) in info.value.message
    section, values = next(iter(overrides.items()))
    key, name = next(iter(values.items()))
    assert f"{section}.{key}: names unknown profile {name!r}" in info.value.message


def test_inline_memory_profile_and_unset_profiles(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env, memory={"extract_model_profile": {"name": "x"}})
    extraction = resolve_purpose_model(loaded, "memory_extraction")
    expected = _main_values(loaded) | {"name": "x"}
    assert _values(extraction) == expected
    assert (extraction.profile, extraction.purpose) == ("inline", "memory_extraction")
    assert "memory.extract_model_profile" in extraction.source
    recall = resolve_purpose_model(loaded, "memory_recall")
    assert _values(recall) == _main_values(loaded)
    assert recall.profile is None


def test_memory_profiles_never_use_model_overrides_memory(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env, model_overrides={"memory": {"name": "memory-model"}})
    assert resolve_purpose_model(loaded, "memory_extraction").name == loaded.settings.model.name
    assert resolve_purpose_model(loaded, "memory_recall").name == loaded.settings.model.name


def test_full_inline_profile_sets_every_field(soong_env: SoongEnv) -> None:
    inline = {
        "provider": "anthropic",
        "base_url": "http://127.0.0.1:1",
        "api_key_env": "ANTH",
        "name": "m2",
        "context_window": 1000,
        "max_output_tokens": 100,
        "temperature": 0.9,
        "timeout_ms": 99,
        "retry": {"max_attempts": 1, "initial_backoff_ms": 2, "max_backoff_ms": 3},
    }
    loaded = _load(soong_env, memory={"recall_model_profile": inline})
    resolved = resolve_purpose_model(loaded, "memory_recall")
    dumped = resolved.model_dump()
    assert {k: dumped[k] for k in MAIN_FIELDS} == inline


def test_main_and_orchestrator_purposes_use_main_model(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env)
    for purpose in ("main", "orchestrator"):
        resolved = resolve_purpose_model(loaded, purpose)
        assert _values(resolved) == _main_values(loaded)
        assert (resolved.purpose, resolved.profile) == (purpose, None)


def test_agent_definition_profiles_resolve_and_errors_are_distinguishable(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env, model_overrides={"small": {"name": "small-model", "context_window": 4096}})
    by_name = resolve_model(loaded, purpose="worker", profile="small", source_key="agent worker_x")
    assert (by_name.name, by_name.context_window, by_name.profile) == ("small-model", 4096, "small")
    inline = resolve_model(loaded, purpose="sub", profile={"temperature": 0.5})
    assert inline.temperature == 0.5 and inline.profile == "inline"
    model_obj = resolve_model(loaded, purpose="fork", profile=ModelProfile(name="obj"))
    assert model_obj.name == "obj"
    with pytest.raises(ProfileNotFound) as missing:
        resolve_model(loaded, purpose="sub", profile="large", source_key="agent x: model_profile")
    assert isinstance(missing.value, ProfileError) and isinstance(missing.value, ConfigError)
    assert missing.value.code == ErrorCode.config_error and missing.value.profile == "large"
    assert "agent x: model_profile" in missing.value.message
    with pytest.raises(ProfileError) as bad_inline:
        resolve_model(loaded, purpose="sub", profile={"model": "x"})
    assert not isinstance(bad_inline.value, ProfileNotFound)
    assert "model: unknown key" in bad_inline.value.message
    with pytest.raises(ProfileError):
        resolve_model(loaded, purpose="sub", profile={"context_window": "big"})
    with pytest.raises(ProfileError):
        resolve_model(loaded, purpose="sub", profile=["not", "a", "profile"])  # type: ignore[arg-type]


def test_resolve_model_accepts_bare_settings(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env)
    resolved = resolve_model(loaded.settings, purpose="compact", profile="compact")
    assert resolved.max_output_tokens == loaded.settings.model_overrides["compact"].max_output_tokens
    assert resolved.source.startswith("config.toml: [model] + [model_overrides.compact]")


def test_invalid_purposes_are_internal_errors(soong_env: SoongEnv) -> None:
    loaded = _load(soong_env)
    with pytest.raises(AgentCoreError) as info:
        resolve_model(loaded, purpose="chat", profile=None)
    assert info.value.code == ErrorCode.internal_error
    for purpose in ("sub", "fork", "worker"):
        with pytest.raises(AgentCoreError) as info:
            resolve_purpose_model(loaded, purpose)
        assert info.value.code == ErrorCode.internal_error


@pytest.mark.parametrize(
    ("overrides", "text"),
    [
        ({"model_overrides": {"bad-name": {"name": "x"}}}, "model_overrides: profile name 'bad-name'"),
        ({"model_overrides": {"small": {"nmae": "x"}}}, "model_overrides.small.nmae: unknown key"),
        ({"compact": {"model_profile": {"nmae": "x"}}}, "compact.model_profile.nmae: unknown key"),
        (
            {"compact": {"model_profile": 3}},
            "compact.model_profile: must be a [model_overrides] profile name",
        ),
        (
            {"model_overrides": {"slow": {"retry": {"initial_backoff_ms": 60000}}}},
            "retry.initial_backoff_ms must be <= retry.max_backoff_ms",
        ),
        ({"model_overrides": {"empty": {"name": ""}}}, "sets an empty name"),
    ],
)
def test_invalid_profiles_fail_at_load(soong_env: SoongEnv, overrides: dict[str, Any], text: str) -> None:
    soong_env.write_config(**overrides)
    with pytest.raises(ConfigError) as info:
        load_config(project_dir=soong_env.project)
    assert info.value.code == ErrorCode.config_error
    assert str(soong_env.config_path) in info.value.message
    assert text in info.value.message
