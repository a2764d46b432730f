"""``gc_paused`` (agent_core/_gc_pause.py): the collector off for a block; with ``tenure`` the young objects
the block leaves are moved to the oldest generation at once, as the runtime's lazy import does (cold start,
issue 16: the first young collection after it would walk every class and function it created)."""

from __future__ import annotations

import gc
import subprocess
import sys

from agent_core._gc_pause import TENURE_MIN_YOUNG, gc_paused


def _young_ids() -> set[int]:
    return {id(o) for o in gc.get_objects(generation=0)}


def test_with_tenure_the_block_leaves_no_young_objects() -> None:
    gc.collect()
    with gc_paused(tenure=True):
        kept = [[i] for i in range(TENURE_MIN_YOUNG + 100)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    young = _young_ids()
    assert not any(id(x) in young for x in kept[:: len(kept) // 50])


def test_the_runtime_import_leaves_no_young_collection_to_walk_it() -> None:
    script = (
        "import gc, agent_core\n"
        "walked = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and walked.append(len(gc.get_objects(0))))\n"
        "agent_core.AgentRuntime\n"
        "garbage = [[i] for i in range(5000)]\n"
        "print(gc.isenabled(), max(walked, default=0))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    enabled, walked = done.stdout.split()
    assert enabled == "True"
    assert int(walked) < TENURE_MIN_YOUNG, walked  # the largest young generation a collection walked
