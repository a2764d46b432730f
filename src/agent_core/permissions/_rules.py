"""User permission rules (``[[permissions.rules]]``, issue 14 item 9) and command session scopes.

* :class:`RuleSet` matches one call against the configured rules. A rule names a ``tool`` (exact or
  ``fnmatch`` glob) and optionally an ``argv_prefix`` (command calls) or a ``path`` glob (the resolved
  targets of file tools). Of all matching rules ``deny`` wins over ``confirm``, which wins over ``allow``;
  among equals the first one in the file is reported.
* :func:`apply_rule` folds the winner into the policy decision: ``deny`` denies; ``confirm`` asks even what
  the policy would allow; ``allow`` skips the prompt for the ordinary reasons (write, dangerous, network
  confirmation, readonly confirmation, search outside the project) but never for a sensitive path, a
  write outside the write roots or a protected path (git internals, soong-agent's state, credential
  files), which still ask with ``suggested_decision = deny``.
* A bare ``argv_prefix[0]`` (no ``/``) matches only a bare ``argv[0]`` (looked up on the allowlisted
  PATH), never a path the model chose (``/tmp/x/git``); one with a ``/`` must equal ``argv[0]``.
* What ``allow_for_session`` remembers for a command lives in :mod:`agent_core.permissions._session_grants`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from agent_core.config.schema import PermissionRule, Settings
from agent_core.errors import ErrorCode
from agent_core.permissions._policy import (
    REASON_OUTSIDE_ROOTS,
    REASON_SENSITIVE,
    UNGRANTABLE,
    CallFacts,
    PolicyDecision,
)
from agent_core.types.enums import PermissionDecisionKind
from agent_core.types.tools import ToolDefinition

REASON_RULE_CONFIRM = "rule_confirm"
_RANK = {"deny": 0, "confirm": 1, "allow": 2}
_NEVER_WAIVED = frozenset({REASON_SENSITIVE, REASON_OUTSIDE_ROOTS, *UNGRANTABLE})


@dataclass(frozen=True, slots=True)
class RuleMatch:
    """The winning rule of one call."""

    index: int
    rule: PermissionRule

    @property
    def decision(self) -> str:
        return self.rule.decision

    def describe(self) -> dict[str, Any]:
        """The rule as recorded in audit events: its position and its fields."""
        return {"index": self.index, **self.rule.model_dump(exclude_none=True)}


def call_argv(arguments: Mapping[str, Any]) -> list[str] | None:
    argv = arguments.get("argv")
    if isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv):
        return list(argv)
    return None


def argv_matches(prefix: Sequence[str], argv: Sequence[str]) -> bool:
    if len(argv) < len(prefix):
        return False
    return all(p == a for p, a in zip(prefix, argv, strict=False))


def _expand(pattern: str, project: Path) -> str:
    text = pattern.replace("<project>", os.fspath(project))
    if text == "~" or text.startswith("~/"):
        text = os.path.expanduser("~") + text[1:]
    return text


class RuleSet:
    """The ``[[permissions.rules]]`` of one runtime (stateless)."""

    def __init__(self, rules: Sequence[PermissionRule]) -> None:
        self._rules = tuple(rules)

    @classmethod
    def from_settings(cls, settings: Settings) -> RuleSet:
        return cls(settings.permissions.rules)

    def __bool__(self) -> bool:
        return bool(self._rules)

    def _matches(
        self, rule: PermissionRule, tool: str, arguments: Mapping[str, Any], facts: CallFacts, project: Path
    ) -> bool:
        if not fnmatchcase(tool, rule.tool):
            return False
        if rule.argv_prefix is not None:
            argv = call_argv(arguments)
            return argv is not None and argv_matches(rule.argv_prefix, argv)
        if rule.path is not None:
            paths = list(getattr(facts, "target_paths", None) or [])
            pattern = _expand(rule.path, project)
            return bool(paths) and all(fnmatchcase(os.fspath(p), pattern) for p in paths)
        return True

    def match(
        self, tool: ToolDefinition, arguments: Mapping[str, Any], facts: CallFacts, project: Path
    ) -> RuleMatch | None:
        """The winning rule for this call, ``None`` when no rule matches (internal tools never match)."""
        if not self._rules or "internal" in tool.tags:
            return None
        best: RuleMatch | None = None
        for index, rule in enumerate(self._rules):
            if not self._matches(rule, tool.name, arguments, facts, project):
                continue
            if best is None or _RANK[rule.decision] < _RANK[best.decision]:
                best = RuleMatch(index, rule)
        return best


def apply_rule(
    decision: PolicyDecision, match: RuleMatch | None, *, tool: str, has_callback: bool
) -> PolicyDecision:
    """``decision`` with the winning rule applied (see module docstring)."""
    if match is None or (decision.action == "deny" and match.decision != "deny"):
        return decision
    where = f"permission rule #{match.index + 1} ({match.rule.tool})"
    if match.decision == "deny":
        return PolicyDecision(
            action="deny",
            reasons=decision.reasons,
            target_scope=decision.target_scope,
            deny_code=ErrorCode.permission_denied,
            message=f"tool '{tool}' is denied by {where} in config.toml",
        )
    if match.decision == "allow":
        if decision.action == "allow" or set(decision.reasons) & _NEVER_WAIVED:
            return decision
        return PolicyDecision(action="allow", reasons=decision.reasons, target_scope=decision.target_scope)
    if decision.action != "allow":  # confirm: already asking
        return decision
    reasons = (*decision.reasons, REASON_RULE_CONFIRM)
    if not has_callback:
        return PolicyDecision(
            action="deny",
            reasons=reasons,
            target_scope=decision.target_scope,
            deny_code=ErrorCode.permission_denied,
            message=f"tool '{tool}' must be confirmed ({where}) and no permission callback is configured",
        )
    return PolicyDecision(
        action="ask",
        reasons=reasons,
        suggested_decision=PermissionDecisionKind.allow_once,
        allow_for_session_available=False,
        target_scope=decision.target_scope,
    )
