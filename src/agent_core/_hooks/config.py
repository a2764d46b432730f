"""``${SOONG_AGENT_HOME}/hooks.json``: schema, validation and the resolved rule set
(docs/hooks-and-mcp.md#where-and-when, docs/hooks-and-mcp.md#matchers).

:func:`load_hooks_config` reads the user-level file once; ``<project>/.soong-agent/hooks.json`` is never
read. A missing file means "no hooks" (``None``). Everything else that is wrong fails with
``ConfigError(config_error)`` whose message names the file and the offending key: unreadable file, invalid
JSON, ``version`` other than ``1``, unknown event keys or fields, a non-object matcher, a tool-specific
matcher key under ``SessionStart``/``UserPromptSubmit``/``Stop``, an empty ``hooks`` array, a
``timeout_ms`` above ``tools.max_timeout_ms``, or a ``working_dir`` outside ``<project>``,
``${SOONG_AGENT_HOME}`` and the ``tools.allowed_write_roots``.

Placeholders: in ``command`` ``${SOONG_AGENT_HOME}`` and ``<project>`` become the shell-quoted resolved
paths; in ``working_dir`` and ``path_prefix`` the resolved paths (relative values resolve against
``<project>``). Nothing else is expanded.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, StrictInt, ValidationError, field_validator

from agent_core._hooks.matchers import RuleMatcher
from agent_core.config._json_file import MISSING, json_file_error, read_json_file
from agent_core.config.schema import Settings, format_validation_error
from agent_core.errors import AgentCoreError, ConfigError, ErrorCode
from agent_core.tools._paths import is_within, resolve_dir, resolve_path
from agent_core.types.base import StrictModel
from agent_core.types.enums import HookPhase

HOOKS_FILENAME = "hooks.json"
TOOL_PHASES = frozenset({HookPhase.PreToolUse, HookPhase.PostToolUse})
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOME = "${SOONG_AGENT_HOME}"
_PROJECT = "<project>"
_PLACEHOLDER = re.compile(r"\$\{SOONG_AGENT_HOME\}|<project>")


class HookCommandEntry(StrictModel):
    type: Literal["command"]
    command: str = Field(min_length=1)
    timeout_ms: int | None = Field(default=None, ge=1)
    working_dir: str | None = Field(default=None, min_length=1)
    env_allowlist: list[str] = Field(default_factory=list)


class HookMatcherEntry(StrictModel):
    tool_name: str | None = Field(default=None, min_length=1)
    tag: str | None = Field(default=None, min_length=1)
    path_prefix: str | None = Field(default=None, min_length=1)


class HookRuleEntry(StrictModel):
    matcher: HookMatcherEntry | None = None
    hooks: list[HookCommandEntry] = Field(min_length=1)


class HookEventsEntry(StrictModel):
    SessionStart: list[HookRuleEntry] = Field(default_factory=list)
    UserPromptSubmit: list[HookRuleEntry] = Field(default_factory=list)
    PreToolUse: list[HookRuleEntry] = Field(default_factory=list)
    PostToolUse: list[HookRuleEntry] = Field(default_factory=list)
    Stop: list[HookRuleEntry] = Field(default_factory=list)


class HooksFile(StrictModel):
    """The raw file shape (docs/hooks-and-mcp.md#where-and-when)."""

    version: StrictInt
    hooks: HookEventsEntry

    @field_validator("version")
    @classmethod
    def _version_one(cls, v: int) -> int:
        if v != 1:
            raise ValueError(f"version must be 1, got {v}")
        return v


@dataclass(frozen=True, slots=True)
class HookSpec:
    """One hook command, placeholders expanded and limits resolved."""

    phase: HookPhase
    rule_index: int
    hook_index: int
    command: str
    timeout_ms: int
    working_dir: Path
    env_allowlist: tuple[str, ...]

    @property
    def label(self) -> str:
        """Human name used in error messages (``hook #2 of rule #1 of PreToolUse``)."""
        return f"hook #{self.hook_index + 1} of rule #{self.rule_index + 1} of {self.phase.value}"

    def summary(self, limit: int = 200) -> str:
        """The command line shortened for event payloads."""
        text = " ".join(self.command.split())
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class HookRule:
    phase: HookPhase
    index: int
    matcher: RuleMatcher | None
    hooks: tuple[HookSpec, ...]


@dataclass(frozen=True, slots=True)
class HooksConfig:
    """The validated rule set of one ``hooks.json``."""

    path: Path
    rules: dict[HookPhase, tuple[HookRule, ...]]

    def rules_for(self, phase: HookPhase) -> tuple[HookRule, ...]:
        return self.rules.get(phase, ())

    @property
    def env_names(self) -> frozenset[str]:
        """Every hook-level ``env_allowlist`` name (their values are treated as secrets)."""
        return frozenset(
            name for rules in self.rules.values() for r in rules for h in r.hooks for name in h.env_allowlist
        )

    @property
    def hook_count(self) -> int:
        return sum(len(r.hooks) for rules in self.rules.values() for r in rules)


def _error(path: Path, message: str, **details: Any) -> ConfigError:
    return json_file_error(path, "hooks file", message, **details)


def expand_command(command: str, home: Path, project: Path) -> str:
    """Replaces the two placeholders by the shell-quoted resolved paths
    (docs/hooks-and-mcp.md#where-and-when)."""
    return _PLACEHOLDER.sub(lambda m: shlex.quote(str(home if m.group(0) == _HOME else project)), command)


def expand_path(value: str, home: Path, project: Path) -> Path:
    """Placeholders → resolved paths; relative values resolve against ``<project>``; symlinks resolved."""
    text = _PLACEHOLDER.sub(lambda m: str(home if m.group(0) == _HOME else project), value)
    return resolve_path(text, base=project)


def _working_dir(
    raw: str | None, *, where: str, path: Path, settings: Settings, home: Path, project: Path
) -> Path:
    if raw is None:
        return project
    try:
        resolved = expand_path(raw, home, project)
    except AgentCoreError as exc:
        raise _error(path, f"{where}.working_dir: {exc.message}", key=f"{where}.working_dir") from exc
    roots = [project, home, *(resolve_dir(Path(p)) for p in settings.tools.allowed_write_roots)]
    if not any(is_within(resolved, root) for root in roots):
        raise _error(
            path,
            f"{where}.working_dir: {resolved} is outside <project>, ${{SOONG_AGENT_HOME}} and tools.allowed_write_roots",
            key=f"{where}.working_dir",
        )
    return resolved


def _matcher(
    entry: HookMatcherEntry | None, *, phase: HookPhase, where: str, path: Path, home: Path, project: Path
) -> RuleMatcher | None:
    if entry is None:
        return None
    given = [k for k in ("tool_name", "tag", "path_prefix") if getattr(entry, k) is not None]
    if given and phase not in TOOL_PHASES:
        raise _error(
            path,
            f"{where}.matcher: {', '.join(given)} may only be used under PreToolUse/PostToolUse",
            key=f"{where}.matcher",
        )
    prefix: Path | None = None
    if entry.path_prefix is not None:
        try:
            prefix = expand_path(entry.path_prefix, home, project)
        except AgentCoreError as exc:
            raise _error(
                path, f"{where}.matcher.path_prefix: {exc.message}", key=f"{where}.matcher.path_prefix"
            ) from exc
    return RuleMatcher(tool_name=entry.tool_name, tag=entry.tag, path_prefix=prefix)


def build_hooks_config(
    data: Any, *, path: Path, settings: Settings, home: Path, project: Path
) -> HooksConfig:
    """Validates parsed ``hooks.json`` data and resolves every rule (see the module docstring)."""
    try:
        parsed = HooksFile.model_validate(data, strict=True)
    except ValidationError as exc:
        message, items = format_validation_error(exc, str(path))
        raise ConfigError(
            ErrorCode.config_error,
            message.replace("invalid config", "invalid hooks file", 1),
            details={"path": str(path), "errors": items},
            cause=exc,
        ) from exc
    max_timeout = settings.tools.max_timeout_ms
    default_timeout = min(settings.hooks.default_timeout_ms, max_timeout)
    rules: dict[HookPhase, tuple[HookRule, ...]] = {}
    for phase in HookPhase:
        built: list[HookRule] = []
        for r_index, rule in enumerate(getattr(parsed.hooks, phase.value)):
            where = f"hooks.{phase.value}[{r_index}]"
            matcher = _matcher(rule.matcher, phase=phase, where=where, path=path, home=home, project=project)
            specs: list[HookSpec] = []
            for h_index, hook in enumerate(rule.hooks):
                hwhere = f"{where}.hooks[{h_index}]"
                if hook.timeout_ms is not None and hook.timeout_ms > max_timeout:
                    raise _error(
                        path,
                        f"{hwhere}.timeout_ms: {hook.timeout_ms} exceeds tools.max_timeout_ms ({max_timeout})",
                        key=f"{hwhere}.timeout_ms",
                    )
                bad = [n for n in hook.env_allowlist if not ENV_NAME.match(n)]
                if bad:
                    raise _error(
                        path,
                        f"{hwhere}.env_allowlist: invalid variable name(s) {bad!r}",
                        key=f"{hwhere}.env_allowlist",
                    )
                specs.append(
                    HookSpec(
                        phase=phase,
                        rule_index=r_index,
                        hook_index=h_index,
                        command=expand_command(hook.command, home, project),
                        timeout_ms=hook.timeout_ms or default_timeout,
                        working_dir=_working_dir(
                            hook.working_dir,
                            where=hwhere,
                            path=path,
                            settings=settings,
                            home=home,
                            project=project,
                        ),
                        env_allowlist=tuple(dict.fromkeys(hook.env_allowlist)),
                    )
                )
            built.append(HookRule(phase=phase, index=r_index, matcher=matcher, hooks=tuple(specs)))
        rules[phase] = tuple(built)
    return HooksConfig(path=path, rules=rules)


def load_hooks_config(*, settings: Settings, home: Path, project: Path) -> HooksConfig | None:
    """Reads ``<home>/hooks.json``; ``None`` when the file does not exist (see the module docstring)."""
    path = home / HOOKS_FILENAME
    data = read_json_file(path, "hooks file")
    if data is MISSING:
        return None
    return build_hooks_config(data, path=path, settings=settings, home=home, project=project)
