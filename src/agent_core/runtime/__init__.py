"""Run and session state, the session FIFO queue and per-run prompt assembly (runtime.md §6)."""
