"""Long-term memory (docs/context.md#memory): files, Memory Writer, extraction job, triggers, recall, catalog.

:func:`install` wires the feature into an open runtime's :class:`~agent_core._runtime.runs.RunManager`.
With ``memory.enabled = false`` it installs nothing: no ``internal.recall_memory``, no ``memory_catalog``
block, no triggers. Otherwise it registers the recall tool (internal adapter), adds the catalog dynamic
source for runs whose effective set has the tool, and returns the :class:`MemoryService`
(``RunFeatures.memory``: the catalog block, the scheduler on run start/end and close).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_core._memory.catalog import MemoryCatalogBlock
from agent_core._memory.extraction import MemoryExtractor
from agent_core._memory.files import MemoryStore
from agent_core._memory.llm import complete, job_request
from agent_core._memory.recall import RECALL_TOOL, RecallLimits, RecallToolAdapter
from agent_core._memory.triggers import MemoryScheduler
from agent_core._memory.writer import MemoryWriter
from agent_core.config._profiles import resolve_purpose_model
from agent_core.types.content import TextBlock, text_of
from agent_core.types.model import ModelMessage

if TYPE_CHECKING:
    from agent_core._context.prompt import DynamicSource
    from agent_core._runtime.runs import RunManager
    from agent_core._runtime.state import RunState
    from agent_core.tools._effective import EffectiveTools
    from agent_core.types.enums import AgentRole

__all__ = [
    "RECALL_TOOL",
    "MemoryCatalogBlock",
    "MemoryExtractor",
    "MemoryScheduler",
    "MemoryService",
    "MemoryStore",
    "MemoryWriter",
    "RecallToolAdapter",
    "install",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class MemoryService:
    """The memory feature of one runtime (``RunFeatures.memory``)."""

    store: MemoryStore
    writer: MemoryWriter
    extractor: MemoryExtractor
    scheduler: MemoryScheduler
    recall: RecallToolAdapter
    catalog: MemoryCatalogBlock

    def dynamic_sources(
        self, state: RunState, role: AgentRole, effective: EffectiveTools
    ) -> list[DynamicSource]:
        """The ``memory_catalog`` block, for runs whose effective set has the recall tool."""
        return [self.catalog.source] if RECALL_TOOL in effective.names else []

    def on_run_start(self, state: RunState) -> None:
        self.scheduler.on_run_start(state)

    async def on_run_end(self, state: RunState) -> None:
        await self.scheduler.on_run_end(state)

    async def close(self) -> None:
        await self.scheduler.close()


def install(manager: RunManager) -> MemoryService | None:
    """Installs the memory feature on ``manager`` (``None`` when ``memory.enabled`` is false)."""
    services = manager.services
    settings = services.settings.memory
    if not settings.enabled:
        return None
    config = services.config
    store = MemoryStore(memory_dir=settings.memory_dir)
    writer = MemoryWriter(settings.memory_dir, redactor=services.redactor)
    extractor = MemoryExtractor(
        config=config,
        storage=services.storage,
        store=store,
        writer=writer,
        assets=services.assets,
        adapter_for=services.adapter_for,
        redactor=services.redactor,
    )
    scheduler = MemoryScheduler(manager, extractor, settings=settings, counter=services.counter)

    async def select(session_id: str, prompt: str, _limit: int) -> str:
        model = resolve_purpose_model(config, "memory_recall")
        request = job_request(
            model=model,
            assets=services.assets,
            asset_id="memory.recall_selector",
            session_id=session_id,
            purpose="memory_recall",
            messages=[ModelMessage(role="user", content=[TextBlock(text=prompt)])],
        )
        completed = await complete(services.adapter_for(model), request)
        return text_of(completed.content)

    recall = RecallToolAdapter(
        store=store,
        limits=RecallLimits(top_k=settings.recall_top_k, token_budget=settings.memory_context_token_budget),
        select=select,
        counter=services.counter,
    )
    services.tools.register_adapter(recall, internal=True)
    catalog = MemoryCatalogBlock(
        store=store, max_tokens=settings.catalog_max_tokens, counter=services.counter
    )
    return MemoryService(
        store=store, writer=writer, extractor=extractor, scheduler=scheduler, recall=recall, catalog=catalog
    )
