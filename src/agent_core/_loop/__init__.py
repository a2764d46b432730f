"""The agent loop: one driver, the run recorder and the in-memory active path
(docs/runs.md#the-agent-loop)."""
