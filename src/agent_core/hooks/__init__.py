"""User-level hooks (mcp-hooks.md Part B).

``load_hooks(config)`` returns the runtime's :class:`HookDispatcher` (``NO_HOOKS`` when disabled or when
``${SOONG_AGENT_HOME}/hooks.json`` is missing). Submodules: ``base`` (the seam), ``config`` (file schema),
``matchers``, ``runner`` (one hook process), ``dispatcher`` (:class:`HooksDispatcher`).
"""

from agent_core.hooks.base import NO_HOOKS, NO_OUTCOME, HookDispatcher, HookOutcome
from agent_core.hooks.config import HooksConfig, load_hooks_config
from agent_core.hooks.dispatcher import HooksDispatcher, load_hooks

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
