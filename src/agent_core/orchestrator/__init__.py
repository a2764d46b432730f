"""Orchestrator mode (multi-agent.md §9–§11, task-board.md, context.md §11–§13): worker pools, worker
state, ``agent.list_workers`` / ``agent.dispatch_worker`` / ``agent.plan_template`` and the runtime wiring
of the Task board (:func:`agent_core.orchestrator.install.install`).

Module map: ``pools`` (configured pools, reference validation, per-session worker slots), ``dispatch``
(selection, worker runs on the shared child launcher, run-end fallback, Task-level cancellation),
``tools`` (the tool adapter, incl. the plan tool), ``install`` (the one call from ``open_services``).
"""
