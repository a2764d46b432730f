"""Prompt composition: system blocks, active-path messages, budget and trimming (context.md, compact.md §9)."""
