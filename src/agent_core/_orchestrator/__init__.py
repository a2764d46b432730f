"""Orchestrator mode (docs/multi-agent.md#worker-pools, docs/multi-agent.md#agentlist_workers,
docs/multi-agent.md#dispatching-a-worker, docs/task-board.md, docs/context.md#plans-and-task-templates,
docs/context.md#the-task-board-summary): worker pools, worker state, ``agent.list_workers`` /
``agent.dispatch_worker`` / ``agent.plan_template`` and the runtime wiring of the Task board
(:func:`agent_core._orchestrator.feature.install`).

Module map: ``pools`` (configured pools, reference validation, per-session worker slots), ``dispatch``
(selection, worker runs on the shared child launcher, run-end fallback, Task-level cancellation),
``tools`` (the tool adapter, incl. the plan tool), ``tool_definitions`` (their static definitions),
``orchestration`` (the per-runtime orchestrator), ``feature`` (``RunFeatures.tasks``: builds the
orchestrator on first need; the one call from ``open_services``).
"""
