"""The ``temporal`` engine: runs as Temporal workflows, model calls and tool turns as activities.

* :mod:`.workflow` — the deterministic turn sequence (imports nothing from ``agent_core``);
* :mod:`.activities` — the steps, executed by ``soong-agent worker`` processes against the shared store;
* :mod:`.contexts` — a worker's live run contexts, rebuilt from the store when a run moves to it;
* :mod:`.client` — the runtime side: starts the workflow and streams the run's events from the store;
* :mod:`.worker` — a worker process.

``temporalio`` is imported only by these modules (the optional ``temporal`` extra).
"""
