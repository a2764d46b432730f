"""A claiming process for the exactly-once test: races other processes to claim every step of many Tasks.

Usage: ``python -m tests.postgres.claim_child <session_id> <session_dir> <tasks> <steps> <index>`` with the
DSN in ``$SOONG_TEST_PG_DSN``; the WALs are ``<session_dir>/t<k>.wal.jsonl``. Tries to claim each step
once, in a seeded order: catch up with the stored WAL, decide the claim on the fresh DAG, append; a
conflicting append (another process was first) catches up and decides again. A worker run holds one
step at a time, so each claim is made by a new run. Prints ``WON <n> ATTEMPTS <m>``.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from agent_core._storage.postgres.task_wal import PgTaskWal, WalConflictError
from agent_core._tasks.dag import Actor, TaskDag
from agent_core._tasks.decide import decide_claim
from agent_core.errors import AgentCoreError
from tests.conformance.task_wal_support import T0
from tests.fixtures.postgres_server import DSN_ENV


def main(session_id: str, session_dir: str, tasks: int, steps: int, index: int) -> None:
    wal = PgTaskWal(dsn_env=DSN_ENV)
    paths = [Path(session_dir) / f"t{t}.wal.jsonl" for t in range(tasks)]
    dags: dict[Path, TaskDag] = {p: wal.replay(p, session_id=session_id, repair=False).dag for p in paths}
    order = [(p, f"s{k:04d}") for p in paths for k in range(steps)]
    random.Random(index).shuffle(order)
    won = attempts = 0
    for path, step_id in order:
        dag = dags[path]
        actor = Actor(agent_id=f"agent_p{index}", run_id=f"run_p{index}_{path.stem}_{step_id}")
        while True:
            for record in wal.records_after(path, dag.last_wal_seq):
                dag.apply(record)
            try:
                records = decide_claim(dag, step_id, actor=actor, now=T0, lease_ms=3_600_000)
            except AgentCoreError:  # already claimed by another process
                break
            attempts += 1
            try:
                wal.append(path, records)
            except WalConflictError:
                continue
            for record in records:
                dag.apply(record)
            won += 1
            break
    wal.close()
    print(f"WON {won} ATTEMPTS {attempts}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
