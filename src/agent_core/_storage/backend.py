"""Chooses the session-store backend from ``[storage]`` (docs/storage.md#backends).

``sqlite`` (default) is the embedded :class:`StorageManager` on ``context.session_db_path``; ``postgres``
imports the ``postgres`` extra only here, when it is configured.
"""

from __future__ import annotations

from agent_core._redaction import Redactor
from agent_core._storage.protocol import SessionStore
from agent_core._storage.sqlite import StorageManager
from agent_core.config.loader import LoadedConfig

_CONFORMS: type[SessionStore] = StorageManager


def session_store(config: LoadedConfig, redactor: Redactor) -> SessionStore:
    """The (unopened) session store ``config`` selects."""
    storage = config.settings.storage
    if storage.backend == "postgres":
        from agent_core._storage.postgres.store import PostgresStorage

        assert storage.postgres.dsn_env is not None  # the config validator requires it
        return PostgresStorage(
            dsn_env=storage.postgres.dsn_env,
            redactor=redactor,
            reconnect_timeout_ms=storage.postgres.reconnect_timeout_ms,
        )
    # other processes may write the same file (serve beside chat and run, the temporal engine's workers)
    return StorageManager(config.session_db_path, redactor=redactor)
