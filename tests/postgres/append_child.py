"""A writer process for the cross-process tests: appends to one session of a shared PostgreSQL store.

Usage: ``python -m tests.postgres.append_child <session_id> <agent_id> <run_id> <appends> <tag>`` with the DSN
in ``$SOONG_TEST_PG_DSN``. Each append is one node + two events (one of the run); prints ``DONE <n>``.
"""

from __future__ import annotations

import asyncio
import sys

from agent_core._redaction import Redactor
from agent_core._storage.drafts import EventDraft, NodeDraft
from agent_core._storage.postgres.store import PostgresStorage
from agent_core.types.content import TextBlock
from agent_core.types.enums import EventType
from tests.fixtures.postgres_server import DSN_ENV


async def main(session_id: str, agent_id: str, run_id: str, appends: int, tag: str) -> None:
    store = PostgresStorage(dsn_env=DSN_ENV, redactor=Redactor())
    await store.open()
    try:
        for k in range(appends):
            node = NodeDraft(
                agent_id=agent_id, role="user", content=[TextBlock(text=f"{tag}-{k}")], run_id=run_id
            )
            await store.append(
                session_id,
                nodes=[node],
                events=[
                    EventDraft(
                        event_type=EventType.message_created,
                        agent_id=agent_id,
                        run_id=run_id,
                        node_id=node.node_id,
                    ),
                    EventDraft(
                        event_type=EventType.loop_started, agent_id=agent_id, payload={"tag": tag, "k": k}
                    ),
                ],
                active_node_id=node.node_id,
            )
    finally:
        await store.close()
    print(f"DONE {appends}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
