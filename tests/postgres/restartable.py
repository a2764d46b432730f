"""A PostgreSQL server of its own that a test may restart, stop and start again (the session-wide server
of ``tests/fixtures/postgres_server.py`` is shared by every test and must stay up)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.fixtures.postgres_server import PostgresServer, _as_postgres, pg_bin_dir, start_postgres


@dataclass
class RestartableServer:
    server: PostgresServer

    def _pg_ctl(self, *args: str) -> None:
        argv = [str(pg_bin_dir() / "pg_ctl"), "-D", str(self.server.data_dir), "-w", "-t", "60", *args]
        proc = subprocess.run(_as_postgres(argv), capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 0, f"pg_ctl {args[-1]} failed: {proc.stdout}\n{proc.stderr}"
        self._refresh_pid()

    def _refresh_pid(self) -> None:
        pid_file = self.server.data_dir / "postmaster.pid"
        if pid_file.exists():
            self.server.pid = int(pid_file.read_text().split("\n", 1)[0])

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every client connection is terminated."""
        self._pg_ctl("-l", str(self.server.root / "server.log"), "-m", "fast", "restart")

    def stop(self) -> None:
        self._pg_ctl("-m", "fast", "stop")

    def start(self) -> None:
        """Starts the stopped server again with the options it ran with (``postmaster.opts``)."""
        self._pg_ctl("-l", str(self.server.root / "server.log"), "-o", self._options(), "start")

    def _options(self) -> str:
        """``postmaster.opts`` is ``<postgres> "-D" "<dir>" "-c" "x=y" …``: the options but ``-D <dir>``."""
        parts = [p.strip('"') for p in (self.server.data_dir / "postmaster.opts").read_text().split()[1:]]
        out: list[str] = []
        skip = False
        for part in parts:
            if skip:
                skip = False
            elif part == "-D":
                skip = True
            else:
                out.append(part)
        return " ".join(out)


@pytest.fixture(scope="module")
def restartable_postgres() -> Iterator[RestartableServer]:
    server = start_postgres()
    try:
        yield RestartableServer(server)
    finally:
        server.stop()
