"""User-level hooks (mcp-hooks.md Part B)."""
