"""What the assembly point hands an execution engine that runs steps for an open runtime.

``open_services`` hands the temporal engine's client side its :class:`RunManager` when it wires a runtime;
a worker process (``engine.temporal.worker.run_worker(runtime, stop)``) gets the same parts of the runtime
it is given here, so no module outside ``_api`` reaches into ``AgentRuntime``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_core._api.runtime import AgentRuntime
    from agent_core._runtime.runs import RunManager


async def run_manager(runtime: AgentRuntime) -> RunManager:
    """Opens ``runtime`` (if needed) and returns its run manager: services, settings, live runs."""
    return await runtime._open()
