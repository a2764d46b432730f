"""Multi-agent support (docs/multi-agent.md): the AgentDefinition registry, the child-run launcher shared by
sub, fork and worker runs, and the ``agent.list_agent_definitions`` / ``agent.create_sub_agent`` /
``agent.fork_agent`` tools. :func:`agent_core._agents.tools.install` wires them into a ``RunManager``.
"""
