"""Model profile resolution (docs/providers.md#model-profiles, docs/configuration.md#model-profiles).

A profile (a ``[model_overrides.<name>]`` name, an inline partial table, or a :class:`ModelProfile`) is
overlaid on the main ``[model]``: every key it sets replaces the main value, except ``retry``, which merges
key by key. Provider key existence and API-key variables are not checked here (the provider registry and
adapters do that lazily).

Errors: an unknown profile name raises :class:`ProfileNotFound`; an invalid inline profile or an invalid
overlay result raises :class:`ProfileError`. Both are ``ConfigError(config_error)``; callers resolving an
``AgentDefinition.model_profile`` catch :class:`ProfileError` and report ``invalid_agent_definition``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from agent_core.config.model import ModelProfile, ResolvedModelConfig, RetryConfig
from agent_core.config.schema import PROFILE_NAME, Settings, format_validation_error
from agent_core.errors import ConfigError, ErrorCode, InternalError

if TYPE_CHECKING:
    from agent_core.config.loaded import LoadedConfig

PURPOSES: Final = frozenset(
    {"main", "orchestrator", "sub", "fork", "worker", "compact", "memory_extraction", "memory_recall"}
)
INLINE: Final = "inline"
_PURPOSE_KEYS: Final = {
    "compact": "compact.model_profile",
    "memory_extraction": "memory.extract_model_profile",
    "memory_recall": "memory.recall_model_profile",
}

__all__ = [
    "INLINE",
    "PURPOSES",
    "ProfileError",
    "ProfileNotFound",
    "resolve_model",
    "resolve_purpose_model",
    "validate_profiles",
]


class ProfileError(ConfigError):
    """A model profile reference cannot be used (code ``config_error``); ``profile`` names it."""

    def __init__(
        self,
        message: str,
        *,
        profile: str,
        details: dict[str, Any] | None = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(ErrorCode.config_error, message, details=details, cause=cause)
        self.profile = profile


class ProfileNotFound(ProfileError):
    """A string profile names no ``[model_overrides.<name>]`` table."""


def _unpack(config: LoadedConfig | Settings) -> tuple[Settings, str]:
    if isinstance(config, Settings):
        return config, "config.toml"
    return config.settings, str(config.config_path)


def _profile_from(
    settings: Settings, profile: str | dict[str, Any] | ModelProfile, origin: str
) -> tuple[ModelProfile, str, str]:
    """Returns (partial profile, profile label, source fragment)."""
    if isinstance(profile, str):
        if not PROFILE_NAME.match(profile) or profile not in settings.model_overrides:
            raise ProfileNotFound(
                f"{origin}: unknown model profile {profile!r} (no [model_overrides.{profile}])",
                profile=profile,
                details={"profile": profile},
            )
        return settings.model_overrides[profile], profile, f"[model_overrides.{profile}]"
    if isinstance(profile, ModelProfile):
        return profile, INLINE, "inline profile"
    if not isinstance(profile, dict):
        raise ProfileError(
            f"{origin}: a model profile must be a profile name or a table, got {type(profile).__name__}",
            profile=INLINE,
        )
    try:
        return ModelProfile.model_validate(profile, strict=True), INLINE, "inline profile"
    except ValidationError as exc:
        message, items = format_validation_error(exc, f"{origin} (inline model profile)")
        raise ProfileError(message, profile=INLINE, details={"errors": items}, cause=exc) from exc


def _overlay(settings: Settings, profile: ModelProfile | None) -> dict[str, Any]:
    merged: dict[str, Any] = settings.model.model_dump()
    if profile is None:
        return merged
    for key, value in profile.model_dump(exclude_unset=True).items():
        if key == "retry":
            if value is not None:
                merged["retry"] = {**merged["retry"], **{k: v for k, v in value.items() if v is not None}}
        elif value is not None or key == "temperature":
            merged[key] = value
    return merged


def resolve_model(
    config: LoadedConfig | Settings,
    *,
    purpose: str,
    profile: str | dict[str, Any] | ModelProfile | None,
    source_key: str | None = None,
) -> ResolvedModelConfig:
    """Overlays ``profile`` on ``[model]`` and returns the resolved model for ``purpose``.

    ``source_key`` names where the profile reference came from (e.g. ``compact.model_profile`` or
    ``agent definition x: model_profile``); it appears in ``source`` and in error messages.
    """
    if purpose not in PURPOSES:
        raise InternalError(
            ErrorCode.internal_error, f"unknown model purpose {purpose!r}; expected one of {sorted(PURPOSES)}"
        )
    settings, config_path = _unpack(config)
    origin = f"{config_path}: {source_key}" if source_key else config_path
    partial: ModelProfile | None = None
    label: str | None = None
    source = f"{config_path}: [model]"
    if profile is not None:
        partial, label, fragment = _profile_from(settings, profile, origin)
        source += f" + {fragment}"
        if source_key:
            source += f" (via {source_key})"
    merged = _overlay(settings, partial)
    for key in ("provider", "name"):
        if not merged[key]:
            raise ProfileError(
                f"{origin}: model profile {label!r} sets an empty {key}", profile=label or "", details={}
            )
    if merged.get("temperature") == "default":
        merged["temperature"] = None
    for key in ("input_modalities", "fallback_profiles"):
        merged[key] = tuple(merged.get(key) or ())
    if not merged["input_modalities"]:
        merged["input_modalities"] = ("text",)
    try:
        retry = RetryConfig.model_validate(merged.pop("retry"))
    except ValidationError as exc:
        message, items = format_validation_error(exc, f"{source} (resolved retry)")
        raise ProfileError(message, profile=label or "", details={"errors": items}, cause=exc) from exc
    return ResolvedModelConfig(**merged, retry=retry, purpose=purpose, profile=label, source=source)


def resolve_purpose_model(config: LoadedConfig | Settings, purpose: str) -> ResolvedModelConfig:
    """Resolves a config-driven purpose: ``main``/``orchestrator`` (no profile), ``compact``
    (``compact.model_profile``), ``memory_extraction`` / ``memory_recall`` (``memory.*_model_profile``).

    Child purposes (``sub``/``fork``/``worker``) depend on an AgentDefinition: use :func:`resolve_model`.
    """
    settings, _ = _unpack(config)
    if purpose in ("main", "orchestrator"):
        return resolve_model(config, purpose=purpose, profile=None)
    refs: dict[str, str | ModelProfile | None] = {
        "compact": settings.compact.model_profile,
        "memory_extraction": settings.memory.extract_model_profile,
        "memory_recall": settings.memory.recall_model_profile,
    }
    if purpose not in refs:
        raise InternalError(
            ErrorCode.internal_error,
            f"purpose {purpose!r} has no config-level profile; resolve it with resolve_model(profile=...)",
        )
    return resolve_model(config, purpose=purpose, profile=refs[purpose], source_key=_PURPOSE_KEYS[purpose])


def validate_profiles(config: LoadedConfig | Settings) -> None:
    """Resolves every ``[model_overrides.*]`` table and every config purpose so bad overlays fail at load."""
    settings, _ = _unpack(config)
    for name in settings.model_overrides:
        resolve_model(config, purpose="sub", profile=name, source_key=f"model_overrides.{name}")
    for purpose in ("main", "compact", "memory_extraction", "memory_recall"):
        resolve_purpose_model(config, purpose)
