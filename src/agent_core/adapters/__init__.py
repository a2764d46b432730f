"""Adapters that put soong-agent where people work (issue 38): clients of the public SDK only.

- :mod:`agent_core.adapters.acp` — an Agent Client Protocol agent over stdio (``soong-agent acp``), for
  editors such as Zed and JetBrains; needs the ``acp`` extra (``agent-client-protocol``).
- :mod:`agent_core.adapters.mcp_server` — an MCP server (``soong-agent mcp-server``, stdio or streamable
  HTTP) exposing runs, sessions and transcripts to other agents; built on the ``mcp`` SDK.
- :mod:`agent_core.adapters.channels` — chat platforms (Telegram, Slack) in front of the session inbox
  (``soong-agent channels``, and inside ``soong-agent serve``); ``docs/channels.md`` describes them.

Each adapter uses only what an outside program could use (``AgentRuntime``, ``RunHandle``, the public
types, the permission ``DEFER`` protocol and the :mod:`agent_core.tools.files` hook); ``docs/adapters.md``
describes the first two. Importing this package imports no protocol SDK or platform code.
"""
