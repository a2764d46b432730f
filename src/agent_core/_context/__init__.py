"""Prompt composition: system blocks, active-path messages, budget and trimming (docs/context.md,
docs/compaction.md#budget-and-trimming)."""
