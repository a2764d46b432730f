"""User skills: the ``${SOONG_AGENT_HOME}/skills/*.md`` catalog (``catalog``) and the ``internal.load_skill``
tool (``tool_definition``: its static definition; ``tool``: the implementation, imported on first use)."""
