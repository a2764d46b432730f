"""Adapters that put soong-agent where people work (issue 38): clients of the public SDK only.

- :mod:`agent_core.adapters.channels` — chat platforms (Telegram, Slack) in front of the session inbox
  (``soong-agent channels``, and inside ``soong-agent serve``); ``docs/channels.md`` describes them.

Each adapter uses only what an outside program could use (``AgentRuntime``, ``RunHandle``, the public
types and the permission ``DEFER`` protocol). Importing this package imports no platform code.
"""
