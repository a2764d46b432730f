"""User-level hooks (docs/hooks-and-mcp.md#hooks).

``load_hooks(config)`` returns the runtime's :class:`HookDispatcher` (``NO_HOOKS`` when disabled or when
``${SOONG_AGENT_HOME}/hooks.json`` is missing). Submodules: ``base`` (the seam), ``config`` (file schema),
``matchers``, ``runner`` (one hook process), ``dispatcher`` (:class:`HooksDispatcher`).

Every runtime imports the seam (``hooks.base``); the file schema, matchers and process runner are
imported on first use of their names (cold start: a run without ``hooks.json`` never loads them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from agent_core._hooks.base import NO_HOOKS, NO_OUTCOME, HookDispatcher, HookOutcome

if TYPE_CHECKING:
    from agent_core._hooks.config import HooksConfig, load_hooks_config
    from agent_core._hooks.dispatcher import HooksDispatcher, load_hooks

_LAZY = {
    "HooksConfig": "agent_core._hooks.config",
    "load_hooks_config": "agent_core._hooks.config",
    "HooksDispatcher": "agent_core._hooks.dispatcher",
    "load_hooks": "agent_core._hooks.dispatcher",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "NO_HOOKS",
    "NO_OUTCOME",
    "HookDispatcher",
    "HookOutcome",
    "HooksConfig",
    "HooksDispatcher",
    "load_hooks",
    "load_hooks_config",
]
