"""Run event streams: delivery, buffering, backpressure and delta coalescing
(docs/events.md#the-live-stream)."""
