"""``@<worker>`` addressing in orchestrator-mode messages of ``soong-agent serve``
(docs/serve.md#addressing-workers).

A message may address workers of the configured pools: ``@<worker_id>`` (unique across valid pools) or
``@<pool_id>/<worker_id>``. The Orchestrator is then asked to dispatch that worker — it still
orchestrates: the user's text is kept as is and a JSON block ``{"addressed_workers": {"request": ...,
"workers": [...]}}`` names each addressed worker's ``worker_pool_id`` / ``worker_agent_id`` for
``agent.dispatch_worker``; the message metadata records them (``addressed_workers``) for UIs. A mention that names no worker stays plain text
(``@`` is common in code and mail addresses); a ``@<worker_id>`` present in several pools is ambiguous
→ ``validation_error`` naming the qualified choices.
"""

from __future__ import annotations

import re

from agent_core.errors import ErrorCode, InvalidArgumentError
from agent_core.types.content import JsonBlock, TextBlock
from agent_core.types.runtime import UserMessage
from agent_core.types.workers import WorkerView

MENTION = re.compile(r"(?<![\w@./-])@([A-Za-z0-9_][A-Za-z0-9_.\-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.\-]*)?)")
NOTE_TAG = "addressed_workers"


def addressed_workers(text: str, workers: list[WorkerView]) -> list[WorkerView]:
    """The workers ``text`` addresses, in order of first mention, each once."""
    by_id: dict[str, list[WorkerView]] = {}
    for worker in workers:
        by_id.setdefault(worker.worker_agent_id, []).append(worker)
    found: dict[tuple[str, str], WorkerView] = {}
    for match in MENTION.finditer(text):
        name = match.group(1).rstrip(".-")
        pool_id, _, worker_id = name.rpartition("/")
        candidates = [w for w in by_id.get(worker_id, []) if not pool_id or w.worker_pool_id == pool_id]
        if len(candidates) > 1:
            choices = [f"@{w.worker_pool_id}/{w.worker_agent_id}" for w in candidates]
            raise InvalidArgumentError(
                ErrorCode.validation_error,
                f"@{worker_id} names a worker in several pools; write one of {', '.join(choices)}",
                details={"mention": f"@{worker_id}", "choices": choices},
            )
        if candidates:
            worker = candidates[0]
            found.setdefault((worker.worker_pool_id, worker.worker_agent_id), worker)
    return list(found.values())


def addressed_message(text: str, workers: list[WorkerView]) -> UserMessage:
    """The user message plus the ``addressed_workers`` request for the Orchestrator (a JSON block: the
    user's text stays the message text, so titles and the conversation show it unchanged)."""
    ids = [{"worker_pool_id": w.worker_pool_id, "worker_agent_id": w.worker_agent_id} for w in workers]
    request = {
        NOTE_TAG: {
            "request": "The user addressed these workers with @name: dispatch this message's request to them "
            "with agent.dispatch_worker (their worker_pool_id and worker_agent_id), creating a Task for it "
            "when none fits; you still orchestrate and report the result.",
            "workers": [{**i, "name": w.name} for i, w in zip(ids, workers, strict=True)],
        }
    }
    return UserMessage(content=[TextBlock(text=text), JsonBlock(data=request)], metadata={NOTE_TAG: ids})
