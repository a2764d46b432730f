"""Several processes opening a fresh home at the same moment all succeed (issue 13): the applied versions
are re-read inside ``BEGIN IMMEDIATE``, and a locked database is waited for, not reported."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPENER = """
import asyncio, sys, time
from pathlib import Path
from agent_core._redaction import Redactor
from agent_core._storage.sqlite import StorageManager

async def main() -> None:
    storage = StorageManager(Path(sys.argv[1]), redactor=Redactor())
    await storage.open()
    await storage.close()

start = float(sys.argv[2])
while time.time() < start:
    time.sleep(0.001)
asyncio.run(main())
print("opened")
"""

PROCESSES = 6


def test_six_processes_open_a_fresh_database_at_the_same_moment(tmp_path: Path) -> None:
    for attempt in range(3):  # three fresh homes: the race is timing-dependent
        db = tmp_path / f"home{attempt}" / "sessions.sqlite"
        start = time.time() + 1.5  # every child has imported agent_core by then
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPENER, str(db), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        results = [p.communicate(timeout=60) for p in procs]
        for proc, (out, err) in zip(procs, results, strict=True):
            assert proc.returncode == 0 and out.strip() == "opened", err
        import sqlite3

        conn = sqlite3.connect(db)
        try:
            versions = [row[0] for row in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
        finally:
            conn.close()
        from agent_core._storage.migrations import MIGRATIONS

        assert versions == [m.version for m in MIGRATIONS]
