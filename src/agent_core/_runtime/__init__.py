"""The run engine (docs/runs.md#starting-a-run, docs/runs.md#the-agent-loop, docs/runs.md#cancellation):
:mod:`~agent_core._runtime.runs` (sessions, the per-session FIFO queue, live runs, cancellation),
:mod:`~agent_core._runtime.lifecycle` (register → start → terminal events, for root, child, worker and compact
runs), :mod:`~agent_core._runtime.agent_run` (one agent run's scope, prompt and loop),
:mod:`~agent_core._runtime.state`, :mod:`~agent_core._runtime.services` and
:mod:`~agent_core._runtime.features` (the typed optional features the runs call into). The public facade that
assembles it is :mod:`agent_core._api`."""
