"""Hook rule matchers (docs/hooks-and-mcp.md#matchers): exact tool name, exact tag, component-wise path
prefix.

There is no regex, glob or expression syntax: ``code.*`` as a tool name matches only a tool literally
named ``code.*``. All given keys must match (AND); a rule without a matcher matches every occurrence of its
event. A call without target paths never matches a ``path_prefix``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from agent_core.tools._paths import is_within


@dataclass(frozen=True, slots=True)
class RuleMatcher:
    """A resolved matcher; ``path_prefix`` is already absolute and symlink-resolved."""

    tool_name: str | None = None
    tag: str | None = None
    path_prefix: Path | None = None

    def matches(
        self, *, tool_name: str | None, tags: Iterable[str] = (), target_paths: Iterable[Path] = ()
    ) -> bool:
        """True when every configured key matches the occurrence (see the module docstring)."""
        if self.tool_name is not None and tool_name != self.tool_name:
            return False
        if self.tag is not None and self.tag not in set(tags):
            return False
        if self.path_prefix is not None:
            prefix = self.path_prefix
            if not any(is_within(Path(p), prefix) for p in target_paths):
                return False
        return True
