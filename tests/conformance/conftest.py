"""The storage conformance suite's backend fixture: every test runs against ``sqlite`` and ``postgres``.

The same test functions, unchanged, see a :class:`SessionStore` of either backend (siblings) (the ``postgres``
case runs on a real server started once per session, a fresh schema per test).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_core._redaction import Redactor
from agent_core._storage.protocol import SessionStore
from agent_core._storage.sqlite import StorageManager
from tests.fixtures.postgres_server import DSN_ENV
from tests.fixtures.storage_env import make_redactor

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def make_store(backend: str, tmp_path: Path, redactor: Redactor) -> SessionStore:
    if backend == "sqlite":
        return StorageManager(tmp_path / "home" / "sessions.sqlite", redactor=redactor)
    from agent_core._storage.postgres.store import PostgresStorage

    return PostgresStorage(dsn_env=DSN_ENV, redactor=redactor)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        request.getfixturevalue("postgres_dsn")
    return str(request.param)


@pytest.fixture
async def store(backend: str, tmp_path: Path) -> AsyncIterator[SessionStore]:
    storage = make_store(backend, tmp_path, make_redactor())
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()
