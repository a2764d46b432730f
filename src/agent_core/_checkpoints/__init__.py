"""File checkpoints per tool node and rewind, per session (issue 37 item 1).

Before each ``code.write_file`` / ``code.edit_file`` call, and each ``code.run_command`` or declarative tool
call (commands change files too), the prior state of the files the call may change is recorded; after it,
their new state. Each tool node names its checkpoint (``metadata.checkpoint_id``).
``AgentRuntime.rewind(session_id, node_id)`` puts the files changed after that node back and switches the
active path. Everything lives under ``${SOONG_AGENT_HOME}/sessions/<session_id>/checkpoints/`` (deleted
with the session); the user's own git history is never used.

* :mod:`.model` — the journal records (what a checkpoint recorded) and file states;
* :mod:`.store` — one session's content-addressed object store, journal and stat cache;
* :mod:`.walk` — the ``stat`` walk of the write roots a command's checkpoint compares;
* :mod:`.service` — opening and closing checkpoints around tool calls (the tool pipeline's seam);
* :mod:`.rewind` — the plan of a rewind (pure: what to restore, what conflicts) and carrying it out.
"""
