"""The agent loop: one driver, the run recorder and the in-memory active path (runtime.md §7)."""
