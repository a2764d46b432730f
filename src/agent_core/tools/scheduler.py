"""Concurrency classes and turn grouping (tools.md §17). Pure.

A call's class is ``agent`` (``metadata.concurrency == "agent"``), ``serial`` (permission ``write``, tag
``dangerous`` or ``metadata.concurrency == "serial"``) or ``parallel``. Calls outside the effective set
never execute and are classed ``parallel`` (they form no write boundary). Consecutive ``parallel``
calls form one batch, consecutive ``agent`` calls one group, every ``serial`` call its own group; groups
run strictly one after another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agent_core.types.tools import ToolDefinition

CallClass = Literal["parallel", "serial", "agent"]


def call_class(definition: ToolDefinition | None) -> CallClass:
    if definition is None:
        return "parallel"
    concurrency = definition.metadata.get("concurrency")
    if concurrency == "agent":
        return "agent"
    if definition.permission == "write" or "dangerous" in definition.tags or concurrency == "serial":
        return "serial"
    return "parallel"


@dataclass(frozen=True)
class CallGroup:
    kind: CallClass
    indices: tuple[int, ...]


def plan_groups(classes: Sequence[CallClass]) -> list[CallGroup]:
    """Groups call indices in model order: maximal parallel/agent runs; serial calls alone."""
    groups: list[CallGroup] = []
    for index, kind in enumerate(classes):
        if kind != "serial" and groups and groups[-1].kind == kind:
            last = groups[-1]
            groups[-1] = CallGroup(kind, (*last.indices, index))
        else:
            groups.append(CallGroup(kind, (index,)))
    return groups
