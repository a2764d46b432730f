"""Dependency-cycle detection over Task steps (docs/task-board.md#data-model), shared by the DAG and the
decisions."""

from __future__ import annotations

from collections.abc import Iterable

from agent_core._tasks.models import TaskStep


def find_cycle(steps: Iterable[TaskStep]) -> list[str] | None:
    """Returns one dependency cycle (``[a, b, ..., a]``) or ``None``; unknown ids are ignored."""
    graph = {s.step_id: s.depends_on_step_ids for s in steps}
    state: dict[str, int] = {}
    for root, root_deps in graph.items():
        if root in state:
            continue
        if not root_deps:  # nothing to walk: finished at once (most steps of wide DAGs)
            state[root] = 2
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path: list[str] = []
        while stack:
            node, idx = stack.pop()
            if idx == 0:
                state[node] = 1
                path.append(node)
            deps = graph[node]
            while idx < len(deps) and (deps[idx] not in graph or state.get(deps[idx]) == 2):
                idx += 1
            if idx == len(deps):
                state[node] = 2
                path.pop()
                continue
            nxt = deps[idx]
            stack.append((node, idx + 1))
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            stack.append((nxt, 0))
    return None
