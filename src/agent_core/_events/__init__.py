"""Run event streams: delivery, buffering, backpressure and delta coalescing (runtime.md §9.4–§9.6)."""
