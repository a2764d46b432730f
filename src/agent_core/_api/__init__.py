"""The public SDK facade and its composition root (docs/architecture.md#assembling-an-open-runtime; issue 15
item 5).

``api/`` is what callers touch: :class:`~agent_core._api.runtime.AgentRuntime`, :class:`RunHandle`, the
replay/inspect/session/maintenance queries, and :mod:`~agent_core._api.wiring`, the one place that builds an
open runtime from every room (storage, tools, providers, and the features in a fixed order).
``agent_core._runtime`` is the run engine below the features: the run manager, the run lifecycle, run and
session state, the per-run assembly of the loop. The two are not merged because the features (agents,
orchestrator, compaction, memory, jobs) build on the engine and are assembled by the facade: merged, the
package would import its own dependants.
"""
