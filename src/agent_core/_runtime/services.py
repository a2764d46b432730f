"""The collaborators one open runtime wires together (built in ``AgentRuntime`` open, closed on close)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_core._artifacts.manager import ArtifactManager
from agent_core._asset_loader import AssetLoader
from agent_core._checkpoints.service import CheckpointService
from agent_core._context.calibration import TokenCalibration
from agent_core._context.tokens import DEFAULT_COUNTER, TokenCounter
from agent_core._hooks.base import NO_HOOKS, HookDispatcher
from agent_core._questions.service import QuestionService
from agent_core._redaction import Redactor
from agent_core._storage.protocol import SessionStore
from agent_core.config.loader import LoadedConfig
from agent_core.config.model import ResolvedModelConfig
from agent_core.config.schema import Settings
from agent_core.permissions._gate import PermissionGate
from agent_core.providers.base import ProviderAdapter
from agent_core.providers.registry import ProviderRegistry
from agent_core.tools._pipeline import ToolExecutor
from agent_core.tools.registry import ToolRegistry

if TYPE_CHECKING:
    from agent_core._hooks.callbacks import CallbackHooks
    from agent_core._mcp import McpManager

log = logging.getLogger("agent_core._runtime")


@dataclass(eq=False, kw_only=True, slots=True)
class Services:
    config: LoadedConfig
    redactor: Redactor
    storage: SessionStore
    artifacts: ArtifactManager
    assets: AssetLoader
    providers: ProviderRegistry
    tools: ToolRegistry
    executor: ToolExecutor
    gate: PermissionGate
    hooks: HookDispatcher = NO_HOOKS
    counter: TokenCounter = DEFAULT_COUNTER
    debug: bool = False
    adapters: dict[ResolvedModelConfig, ProviderAdapter] = field(default_factory=dict)
    mcp: McpManager | None = None
    """The MCP servers of ``mcp.json`` (``None`` without the file); connected lazily by the runs."""
    calibration: TokenCalibration = field(default_factory=TokenCalibration)
    """The per-model correction of the token estimate (``_context/calibration.py``)."""
    hook_callbacks: CallbackHooks | None = None
    """The in-process hooks of ``AgentRuntime(hooks=...)`` (also inside :attr:`hooks`), ``None`` without."""
    questions: QuestionService = field(default_factory=lambda: QuestionService(None))
    """The question callback and deferred questions of ``internal.ask_user``."""
    checkpoints: CheckpointService = field(init=False)
    """File checkpoints around write/edit/command calls, per session (``agent_core._checkpoints``)."""

    def __post_init__(self) -> None:
        self.checkpoints = CheckpointService(self.config.settings, self.config.home)
        self.executor.checkpoints = self.checkpoints

    @property
    def settings(self) -> Settings:
        return self.config.settings

    def adapter_for(self, config: ResolvedModelConfig) -> ProviderAdapter:
        """One adapter per distinct resolved model config, created on first use."""
        adapter = self.adapters.get(config)
        if adapter is None:
            adapter = self.providers.create(config)
            self.adapters[config] = adapter
        return adapter

    async def close_adapters(self) -> None:
        adapters = list(self.adapters.values())
        self.adapters.clear()
        seen: set[int] = set()
        for adapter in adapters:
            if id(adapter) in seen:
                continue
            seen.add(id(adapter))
            try:
                await adapter.close()
            except Exception:
                log.warning("provider adapter %r failed to close", adapter, exc_info=True)
