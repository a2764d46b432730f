"""Where a run's loop executes (docs/scale-out.md): ``local`` is this process's asyncio loop
(``agent_core._runtime.runs``); ``temporal`` (:mod:`agent_core.engine.temporal`) runs each root run as a
Temporal workflow whose activities run the same loop steps (``agent_core._loop.driver``)."""
